// Plumbing for the GPU kernel tests: checked CUDA calls, device arrays on one test stream, poison, bounded
// comparisons with compact failure messages, and a runner that takes every version of an op from the registry
// through a direct launch and a CUDA-graph replay.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/launch.cuh"
#include "kernels/registry.h"
#include "tests/gpu/reference.h"

namespace qwen3::gpu_test {

// ---- CUDA calls -------------------------------------------------------------------------------------------
inline void cuda_ok(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ") in " + what + " at " + file + ":" +
                             std::to_string(line));
}
#define CUDA_OK(call) ::qwen3::gpu_test::cuda_ok((call), #call, __FILE__, __LINE__)

inline bool cuda_device_present() {
  static const bool present = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return present;
}

// Set when a kernel fault (illegal address, trap) has made the CUDA context unusable: later tests fail at
// once with this message instead of reporting unrelated errors.
inline std::string& context_lost_reason() {
  static std::string reason;
  return reason;
}

// Every copy, memset and launch of the tests goes to this one stream. It does not synchronize with the legacy
// default stream, so a kernel that ignores its stream argument races with the checks and is caught.
inline cudaStream_t test_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}

// ---- run parameters ---------------------------------------------------------------------------------------
// One seed per process (fresh random inputs every run), printed so a failure can be replayed:
// QWEN3_TEST_SEED=N.
inline uint64_t run_seed() {
  static const uint64_t seed = [] {
    const char* fixed = std::getenv("QWEN3_TEST_SEED");
    const uint64_t s = fixed ? std::strtoull(fixed, nullptr, 10)
                             : (uint64_t(std::random_device{}()) << 32) ^ uint64_t(std::random_device{}());
    std::printf("[ seed     ] QWEN3_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

inline uint64_t case_seed(const std::string& label) {
  return reference::mix_seed(run_seed(), std::hash<std::string>{}(label));
}

// QWEN3_GPU_TESTS_VERBOSE=1 prints every comparison (error/bound headroom) even when it passes.
// QWEN3_GPU_TESTS_QUICK=1 drops the largest cases (e.g. under compute-sanitizer, which runs kernels 10-100x
// slower).
inline bool quick_mode() {
  const char* quick = std::getenv("QWEN3_GPU_TESTS_QUICK");
  return quick && *quick && std::string(quick) != "0";
}

// The comma-separated items of environment variable `name` (empty items dropped; unset: none).
inline std::vector<std::string> env_comma_list(const char* name) {
  std::vector<std::string> out;
  const char* env = std::getenv(name);
  const std::string list = env ? env : "";
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// QWEN3_GPU_TESTS_VERSIONS=v29_,v25_ runs only the versions whose names start with one of the comma-separated
// prefixes (a new version through a long test without the others' minutes); empty or unset: every version. A
// filtered run does not check that some version supports each engine shape (the filter may leave none).
inline const std::vector<std::string>& version_filter() {
  static const std::vector<std::string> prefixes = env_comma_list("QWEN3_GPU_TESTS_VERSIONS");
  return prefixes;
}

inline bool version_selected(const std::string& name) {
  const auto& prefixes = version_filter();
  if (prefixes.empty()) return true;
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
}

// QWEN3_GPU_TESTS_CASES="ctx=1 heads" runs only the cases of VersionRunner whose labels contain one of the
// comma-separated strings (one case many times under --gtest_repeat, to catch an intermittent failure); empty or
// unset: every case. A case it keeps still runs every selected version, so the check that some version supports
// each engine shape stays.
inline const std::vector<std::string>& case_filter() {
  static const std::vector<std::string> parts = env_comma_list("QWEN3_GPU_TESTS_CASES");
  return parts;
}

inline bool case_selected(const std::string& label) {
  const auto& parts = case_filter();
  if (parts.empty()) return true;
  return std::any_of(parts.begin(), parts.end(),
                     [&](const std::string& p) { return label.find(p) != std::string::npos; });
}

// ---- device memory ----------------------------------------------------------------------------------------
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t count) : count_(count) {
    if (count_) CUDA_OK(cudaMalloc(&ptr_, bytes()));
  }
  explicit DeviceArray(std::span<const T> host) : DeviceArray(host.size()) { upload(host); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept { swap(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    swap(other);
    return *this;
  }
  ~DeviceArray() {
    if (ptr_) (void)cudaFree(ptr_);  // errors ignored: a lost context must not turn into std::terminate
  }

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  void upload(std::span<const T> host) {
    if (host.size() != count_) throw std::logic_error("DeviceArray::upload: size mismatch");
    if (count_) CUDA_OK(cudaMemcpyAsync(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice, test_stream()));
  }
  // All bytes 0xFF: bf16 0xFFFF and fp32 0xFFFFFFFF are NaN, int32 is -1. An element still holding it after a
  // launch was never written.
  void poison() {
    if (count_) CUDA_OK(cudaMemsetAsync(ptr_, 0xFF, bytes(), test_stream()));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_) CUDA_OK(cudaMemcpyAsync(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost, test_stream()));
    CUDA_OK(cudaStreamSynchronize(test_stream()));
    return host;
  }

 private:
  void swap(DeviceArray& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(count_, other.count_);
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

inline kernels::bf16* as_bf16(const DeviceArray<uint16_t>& a) {
  return reinterpret_cast<kernels::bf16*>(a.get());
}

inline std::vector<uint16_t> random_bf16(size_t count, uint64_t seed, float lo, float hi) {
  std::vector<uint16_t> v(count);
  reference::fill_uniform_bf16(v, seed, lo, hi);
  return v;
}

constexpr uint16_t kPoisonBf16 = 0xFFFF;

// ---- comparisons ------------------------------------------------------------------------------------------
// Accumulates one output tensor's comparison; expect_ok() turns it into one compact gtest failure.
class Check {
 public:
  explicit Check(std::string what) : what_(std::move(what)) {}

  // |got - want| <= bound, want the exact (or reference-rounded) value.
  void near(int64_t index, uint16_t got_bits, double want, double bound) {
    if (!usable(got_bits)) return;
    const double got = reference::to_float(got_bits);
    const double diff = std::fabs(got - want);
    err_sq_ += diff * diff;
    ref_sq_ += want * want;
    note(index, got, want, bound, bound > 0 ? diff / bound : (diff > 0 ? INFINITY : 0.0), diff > bound);
  }
  // Within max_ulps representable bf16 values of the reference-rounded value.
  void ulps(int64_t index, uint16_t got_bits, uint16_t want_bits, int64_t max_ulps) {
    if (!usable(got_bits)) return;
    const double got = reference::to_float(got_bits), want = reference::to_float(want_bits);
    err_sq_ += (got - want) * (got - want);
    ref_sq_ += want * want;
    const int64_t distance = reference::ulp_distance(got_bits, want_bits);
    note(index, got, want, double(max_ulps), double(distance) / double(std::max<int64_t>(max_ulps, 1)),
         distance > max_ulps);
  }
  // Exact equality of raw bits (copies).
  void exact(int64_t index, uint16_t got_bits, uint16_t want_bits) {
    ++checked_;
    if (got_bits == want_bits) return;
    if (got_bits == kPoisonBf16) {
      ++unwritten_;
      return;
    }
    note(index, reference::to_float(got_bits), reference::to_float(want_bits), 0.0, INFINITY, true);
  }
  // An element that must not have been touched (still poison).
  void untouched(int64_t index, uint16_t got_bits) {
    if (got_bits != kPoisonBf16) {
      ++stray_writes_;
      if (first_stray_ < 0) first_stray_ = index;
    }
  }

  bool ok() const { return violations_ == 0 && unwritten_ == 0 && nonfinite_ == 0 && stray_writes_ == 0; }
  double rel_frobenius() const { return ref_sq_ > 0 ? std::sqrt(err_sq_ / ref_sq_) : std::sqrt(err_sq_); }
  int64_t checked() const { return checked_; }

  std::string summary() const {
    std::ostringstream s;
    s << what_ << ": " << checked_ << " checked";
    if (violations_)
      s << ", " << violations_ << " over the bound (worst #" << worst_index_ << ": got " << worst_got_
        << ", want " << worst_want_ << ", bound " << worst_bound_ << ")";
    if (unwritten_) s << ", " << unwritten_ << " UNWRITTEN (still the 0xFFFF poison, or a NaN made from it)";
    if (nonfinite_) s << ", " << nonfinite_ << " non-finite";
    if (stray_writes_) s << ", " << stray_writes_ << " STRAY WRITES (first at #" << first_stray_ << ")";
    s << ", rel. Frobenius " << rel_frobenius() << ", worst error/bound " << worst_ratio_;
    return s.str();
  }

 private:
  bool usable(uint16_t got_bits) {
    ++checked_;
    if (got_bits == kPoisonBf16) {
      ++unwritten_;
      return false;
    }
    if (!std::isfinite(reference::to_float(got_bits))) {
      ++nonfinite_;
      return false;
    }
    return true;
  }
  // Keeps the element with the largest error/bound ratio (a violation always has ratio > 1).
  void note(int64_t index, double got, double want, double bound, double ratio, bool violation) {
    if (violation) ++violations_;
    if (worst_index_ >= 0 && !(ratio > worst_ratio_)) return;
    worst_ratio_ = ratio;
    worst_index_ = index;
    worst_got_ = got;
    worst_want_ = want;
    worst_bound_ = bound;
  }

  std::string what_;
  int64_t checked_ = 0, violations_ = 0, unwritten_ = 0, nonfinite_ = 0, stray_writes_ = 0;
  int64_t worst_index_ = -1, first_stray_ = -1;
  double worst_got_ = 0, worst_want_ = 0, worst_bound_ = 0, worst_ratio_ = 0;
  double err_sq_ = 0, ref_sq_ = 0;
};

// One gtest failure per failing tensor, naming the case, the version and the launch mode.
inline void expect_ok(const Check& check, const std::string& label, double max_rel_frobenius = -1) {
  static const bool verbose = [] {
    const char* v = std::getenv("QWEN3_GPU_TESTS_VERBOSE");
    return v && *v && std::string(v) != "0";
  }();
  if (verbose) std::printf("[ check    ] %s | %s\n", label.c_str(), check.summary().c_str());
  if (!check.ok()) {
    ADD_FAILURE() << label << " | " << check.summary();
  }
  if (max_rel_frobenius > 0 && check.rel_frobenius() > max_rel_frobenius) {
    ADD_FAILURE() << label << " | relative Frobenius error over " << max_rel_frobenius << " | "
                  << check.summary();
  }
}

// Failures recorded so far in the running test (a run that adds none passed).
inline int failures_so_far() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
}

// ---- programmatic dependent launch: inputs that arrive late
// --------------------------------------------------- In the engine every kernel runs with PDL: it starts
// while its predecessor still runs and may read only weights before pdl_wait(). To catch an activation read
// before the wait, the graph run poisons the inputs the previous kernel would have produced and launches a
// "late producer" right before the version under test: it lets its dependent start at once
// (griddepcontrol.launch_dependents), spins, then writes the real inputs back. A version that waits reads the
// real inputs; one that reads early reads the poison.
// name: how late_regions (below) picks the region ("positions", "slots"; most are left unnamed).
struct Produced {
  void* ptr;
  size_t bytes;
  const char* name;
};
template <class T>
Produced produced(const DeviceArray<T>& a, const char* name = "") {
  return {a.get(), a.bytes(), name};
}

// Which of a graph run's late inputs arrive on time instead (neither poisoned nor written late). In the engine's step
// the positions and slots are written several kernels before the attention, so a version reads them valid before its
// wait while the QKV GEMV is still writing qkv: an order that the run with everything late (the positions too)
// cannot make. QWEN3_GPU_TESTS_ON_TIME unset: that order (positions and slots on time) in about half the cases,
// picked by the case's seed, everything late in the others; "none": everything late in every case; names
// ("positions"): those on time in every case.
inline std::vector<Produced> late_regions(const std::vector<Produced>& regions, const std::string& case_label) {
  static const char* env = std::getenv("QWEN3_GPU_TESTS_ON_TIME");
  static const std::vector<std::string> named = env_comma_list("QWEN3_GPU_TESTS_ON_TIME");
  static const std::vector<std::string> engine_order = {"positions", "slots"}, all_late;
  const bool unset = env == nullptr || *env == '\0';
  const std::vector<std::string>& on_time = !unset ? named : (case_seed(case_label) & 2) ? engine_order : all_late;
  std::vector<Produced> late;
  for (const Produced& r : regions)
    if (std::find(on_time.begin(), on_time.end(), std::string(r.name)) == on_time.end()) late.push_back(r);
  return late;
}

constexpr int kMaxProduced = 6;

// How long the late producer below spins before it copies the inputs back, in clock cycles: 100000 (~50 us at
// 2 GHz, long enough for the dependent's prologue to run ahead), or QWEN3_GPU_TESTS_LATE_DELAY_CYCLES (0 and up), to
// move where the inputs land against the version's own pre-wait work.
inline long long late_delay_cycles() {
  static const long long cycles = [] {
    const char* env = std::getenv("QWEN3_GPU_TESTS_LATE_DELAY_CYCLES");
    if (env == nullptr || *env == '\0') return 100000LL;
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (*end != '\0' || v < 0) throw std::invalid_argument("QWEN3_GPU_TESTS_LATE_DELAY_CYCLES: not a count of cycles");
    return v;
  }();
  return cycles;
}

struct LateProducerJob {
  const uint8_t* stash[kMaxProduced];
  uint8_t* target[kMaxProduced];
  size_t bytes[kMaxProduced];
  int count;
  long long delay_cycles;
};

#if defined(__CUDACC__)
__global__ void late_producer_kernel(LateProducerJob job) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long start = clock64();
  while (clock64() - start < job.delay_cycles) {
  }
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int r = 0; r < job.count; ++r)
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < job.bytes[r]; i += stride)
      job.target[r][i] = job.stash[r][i];
}
#endif

class LateProducer {
 public:
  explicit LateProducer(const std::vector<Produced>& regions) : regions_(regions) {
    if (regions_.size() > size_t(kMaxProduced)) throw std::logic_error("LateProducer: too many regions");
    size_t total = 0;
    for (const Produced& r : regions_) total += r.bytes;
    stash_ = DeviceArray<uint8_t>(total);
  }
  bool empty() const { return regions_.empty(); }
  // Outside the capture: keep the real inputs, then poison them.
  void arm() {
    size_t offset = 0;
    for (const Produced& r : regions_) {
      CUDA_OK(
          cudaMemcpyAsync(stash_.get() + offset, r.ptr, r.bytes, cudaMemcpyDeviceToDevice, test_stream()));
      CUDA_OK(cudaMemsetAsync(r.ptr, 0xFF, r.bytes, test_stream()));
      offset += r.bytes;
    }
  }
  // After a failed run: the real inputs back in place.
  void restore() {
    size_t offset = 0;
    for (const Produced& r : regions_) {
      (void)cudaMemcpyAsync(r.ptr, stash_.get() + offset, r.bytes, cudaMemcpyDeviceToDevice, test_stream());
      offset += r.bytes;
    }
    (void)cudaStreamSynchronize(test_stream());
  }
  // Inside the capture, immediately before the version's launch.
  void launch(cudaStream_t stream) const {
    LateProducerJob job{};
    size_t offset = 0;
    for (size_t i = 0; i < regions_.size(); ++i) {
      job.stash[i] = stash_.get() + offset;
      job.target[i] = static_cast<uint8_t*>(regions_[i].ptr);
      job.bytes[i] = regions_[i].bytes;
      offset += regions_[i].bytes;
    }
    job.count = int(regions_.size());
    job.delay_cycles = late_delay_cycles();
#if defined(__CUDACC__)
    late_producer_kernel<<<132, 256, 0, stream>>>(job);
    CUDA_OK(cudaGetLastError());
#else
    (void)stream;
    (void)job;
    throw std::logic_error("LateProducer: the late producer kernel needs a CUDA compiler");
#endif
  }

 private:
  std::vector<Produced> regions_;
  DeviceArray<uint8_t> stash_;
};

// ---- the version runner -----------------------------------------------------------------------------------
// Captures `launch` into a CUDA graph in global capture mode and replays it once: a launch that synchronizes,
// allocates or touches another stream fails here rather than inside the engine's decode graph.
inline void launch_in_graph(const std::function<void(cudaStream_t)>& launch) {
  cudaStream_t stream = test_stream();
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  try {
    launch(stream);
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (end != cudaSuccess || graph == nullptr) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string("CUDA graph capture failed: ") + cudaGetErrorString(end) +
                             " (a launch must not synchronize, allocate or use another stream)");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  CUDA_OK(instantiated);
  const cudaError_t launched = cudaGraphLaunch(exec, stream);
  const cudaError_t synced = cudaStreamSynchronize(stream);
  (void)cudaGraphExecDestroy(exec);
  CUDA_OK(launched);
  CUDA_OK(synced);
}

template <class Args>
struct VersionUnderTest {
  std::string name;
  void (*launch)(const Args&, cudaStream_t);
  bool (*supports)(const Args&);
  bool graph = true;  // also replay through a CUDA graph (false only for the cuBLAS baseline)
};

template <class Args>
std::vector<VersionUnderTest<Args>> versions_under_test(
    const std::vector<kernels::KernelVersion<Args>>& versions) {
  std::vector<VersionUnderTest<Args>> out;
  for (const auto& v : versions)
    if (version_selected(v.name)) out.push_back({v.name, v.launch, v.supports, true});
  return out;
}

// Runs every version of one op on each case it supports, once launched directly and once replayed from a CUDA
// graph. Before each run `prepare` uploads the inputs and poisons the outputs; after it `check` compares with
// the reference (gtest expectations carry the label). At the end prints one line per version: cases run /
// skipped.
template <class Args>
class VersionRunner {
 public:
  explicit VersionRunner(std::vector<VersionUnderTest<Args>> versions) : versions_(std::move(versions)) {
    if (version_filter().empty()) EXPECT_FALSE(versions_.empty()) << "the registry lists no version of this op";
  }
  explicit VersionRunner(const std::vector<kernels::KernelVersion<Args>>& versions)
      : VersionRunner(versions_under_test(versions)) {}
  VersionRunner(const VersionRunner&) = delete;
  VersionRunner& operator=(const VersionRunner&) = delete;
  ~VersionRunner() {
    for (const auto& v : versions_) {
      const Tally& t = tally_[v.name];
      std::printf("[ versions ] %-28s %3d cases run, %3d skipped (supports() false)%s\n", v.name.c_str(),
                  t.run, t.skipped, t.skipped_example.empty() ? "" : (", e.g. " + t.skipped_example).c_str());
      if (t.failed > 0)  // (so that the summary lines alone name the failing version and its first case)
        std::printf("[ versions ] %-28s %3d cases FAILED, the first: %s\n", v.name.c_str(), t.failed,
                    t.failed_example.c_str());
    }
  }

  // required: an engine shape; at least one version must support it. produced: the inputs the previous kernel
  // of the engine writes (activations, positions, ...), which the graph run delivers late (see LateProducer).
  void run(const std::string& case_label, const Args& args, const std::function<void()>& prepare,
           const std::function<void(const std::string& label)>& check, bool required = false,
           const std::vector<Produced>& produced = {}) {
    if (!case_selected(case_label)) return;
    const std::vector<Produced> late = late_regions(produced, case_label);  // (the graph runs')
    int supported = 0;
    for (const auto& v : versions_) {
      if (!context_lost_reason().empty()) return;
      Tally& t = tally_[v.name];
      if (v.supports && !v.supports(args)) {
        if (t.skipped++ == 0) t.skipped_example = case_label;
        continue;
      }
      ++supported;
      ++t.run;
      for (const bool graph : {false, true}) {
        if (graph && !v.graph) continue;
        // The graph run is the engine's configuration: PDL on (where the GPU has it), inputs arriving late.
        kernels::set_programmatic_dependent_launch(graph);
        const bool late_inputs = graph && kernels::programmatic_dependent_launch() && !late.empty();
        const std::string label =
            case_label + " | " + v.name +
            (graph ? (late_inputs ? (late.size() == produced.size() ? " (graph, PDL, late inputs)"
                                                                     : " (graph, PDL, late inputs but some on time)")
                                  : " (graph)")
                   : " (direct)");
        const int failures_before = failures_so_far();
        LateProducer producer(late_inputs ? late : std::vector<Produced>{});
        try {
          prepare();
          if (graph) {
            if (late_inputs) producer.arm();
            launch_in_graph([&](cudaStream_t s) {
              if (late_inputs) producer.launch(s);
              v.launch(args, s);
            });
          } else {
            v.launch(args, test_stream());
            finish(label);
          }
          check(label);
        } catch (const std::exception& e) {
          ADD_FAILURE() << label << " | " << e.what();
          note_if_context_lost(label);
          // Inputs that are not re-uploaded by prepare() must not stay poisoned for the next case.
          if (late_inputs && context_lost_reason().empty()) producer.restore();
        }
        kernels::set_programmatic_dependent_launch(false);
        if (failures_so_far() != failures_before) {  // the graph replay would repeat the same failure
          if (t.failed++ == 0) t.failed_example = label;
          break;
        }
      }
    }
    if (required && version_filter().empty()) {
      EXPECT_GT(supported, 0) << case_label << ": no version supports this engine shape";
    }
  }

  // For tests that drive the launches themselves (sampling statistics): the versions supporting `args`.
  std::vector<VersionUnderTest<Args>> supporting(const Args& args, const std::string& case_label) {
    std::vector<VersionUnderTest<Args>> out;
    for (const auto& v : versions_) {
      Tally& t = tally_[v.name];
      if (v.supports && !v.supports(args)) {
        if (t.skipped++ == 0) t.skipped_example = case_label;
        continue;
      }
      ++t.run;
      out.push_back(v);
    }
    return out;
  }

  static void finish(const std::string& label) {
    const cudaError_t launched = cudaGetLastError();
    const cudaError_t synced = cudaStreamSynchronize(test_stream());
    if (launched == cudaSuccess && synced == cudaSuccess) return;
    note_if_context_lost(label);
    CUDA_OK(launched != cudaSuccess ? launched : synced);
  }

 private:
  static void note_if_context_lost(const std::string& label) {
    // A fault inside a kernel is sticky: every later call fails with it.
    const cudaError_t status = cudaDeviceSynchronize();
    if (status != cudaSuccess && context_lost_reason().empty())
      context_lost_reason() = label + ": " + cudaGetErrorString(status);
  }

  struct Tally {
    int run = 0, skipped = 0, failed = 0;  // failed: cases with a failure, direct or in the graph
    std::string skipped_example, failed_example;
  };
  std::vector<VersionUnderTest<Args>> versions_;
  std::map<std::string, Tally> tally_;
};

// Base fixture: skips without a GPU, fails at once after a lost context.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_present()) {
      GTEST_SKIP() << "no CUDA device";
    }
    if (!context_lost_reason().empty())
      FAIL() << "the CUDA context was lost earlier (" << context_lost_reason() << "); this test cannot run";
    (void)run_seed();
  }
};

}  // namespace qwen3::gpu_test
