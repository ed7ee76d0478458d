// bench_runner: every version of every kernel in kernels/registry.h at the Qwen3-8B shapes the engine runs,
// in the decode regime (1, 2, 4, 8 tokens; contexts 128 / 1024 / 8192) and the prefill regime (512 and 2048
// tokens).
//
// For each (op, shape, version): the median time per launch over --repeat timed runs, each run a CUDA-graph
// replay of many launches that rotate over enough copies of the inputs to exceed twice the L2 (so weights
// stream from HBM as in the engine); the bytes the op must move (each input read once, each output written
// once, counted from the shape) and its FLOPs; GB/s, TFLOP/s, % of peak (the roofline fraction: the larger of
// GB/s over the measured streaming-read peak and TFLOP/s over the measured bf16 tensor peak), and the speedup
// over the op's baseline (its first version, or an unfused composite where the first listed version is a
// fusion) and over cuBLAS for GEMMs. Outputs are poisoned before the first launch and must be fully written
// by it; inputs are random, never zeros.
//
// Prints one table (then a summary of the headline shapes) and writes <out>/runner-<UTC>.json, rewritten
// after every op so a run cut short still leaves its results.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_common.cuh"
#include "core/peaks.h"
#include "kernels/common/launch.cuh"
#include "kernels/kernels.h"
#include "kernels/registry.h"

namespace qwen3::bench {
namespace {

using kernels::AddArgs;
using kernels::AddRmsnormArgs;
using kernels::AttentionArgs;
using kernels::bf16;
using kernels::DeviceSampling;
using kernels::EmbeddingArgs;
using kernels::GateUpSwigluArgs;
using kernels::GemmArgs;
using kernels::GemvResidualArgs;
using kernels::KernelVersion;
using kernels::KvWriteArgs;
using kernels::NormGateUpSwigluArgs;
using kernels::NormGemvArgs;
using kernels::QkNormRopeCacheArgs;
using kernels::QkvAttentionArgs;
using kernels::RmsnormArgs;
using kernels::RopeArgs;
using kernels::SampleArgs;
using kernels::SiluMulArgs;
using json = nlohmann::json;

// Qwen3-8B
constexpr int64_t kVocab = 151936, kHidden = 4096, kQHeads = 32, kKvHeads = 8, kHeadDim = 128, kInter = 12288;
constexpr float kEps = 1e-6f;
constexpr double kRopeTheta = 1e6;

// The fallback ceilings of docs/gpu-machine.md (H200, measured 2026-11-29), used when no peaks file is found.
constexpr double kFallbackReadGBs = 4530, kFallbackBf16Tflops = 780;

// ---- options and global state -----------------------------------------------------------------------------
struct Options {
  std::set<std::string> kernels;      // empty: all
  std::string regime = "all";         // decode | prefill | all
  std::vector<std::string> versions;  // name substrings; empty: all (the baseline and cuBLAS always run)
  int repeat = 20;
  double time_budget_s = 0;      // 0: none
  double sample_ms = 2.0;        // target duration of one timed run (a graph of many launches)
  double rotation_factor = 2.0;  // rotated sets cover this many L2 sizes
  bool pdl = true;  // programmatic dependent launch, as the engine's fast path runs (sm_90 and later)
  std::string out_dir, peaks_file;
  bool write_json = true;
};

struct Peaks {
  double read_GB_s = kFallbackReadGBs, bf16_tflops = kFallbackBf16Tflops;
  std::string source = "fallback: docs/gpu-machine.md (4530 GB/s read, 780 TFLOP/s bf16); run measure_peaks";
};

struct Row {
  std::string op, regime, shape, version, status = "ok", timing, note;
  json params;
  double bytes = 0, flops = 0;
  Stats us;  // per launch
  int launches_per_run = 0, sets = 0, kernels_per_launch = 1;
  double rotation_bytes = 0;
  bool headline = false, baseline = false, cublas = false, composite = false;
  double speedup_vs_baseline = 0, speedup_vs_cublas = 0;  // 0: none

  bool ok() const { return status == "ok"; }
  double gb_s() const { return bytes / (us.median * 1e-6) / 1e9; }
  double tflops() const { return flops / (us.median * 1e-6) / 1e12; }
};

struct Context {
  Options options;
  Peaks peaks;
  GpuInfo gpu;
  std::string commit, started, json_path;
  cudaStream_t stream = nullptr;
  std::vector<Row> rows;
  double deadline_s = 0;  // seconds since start; 0: none
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool failed = false;

  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  bool out_of_time() const { return deadline_s > 0 && elapsed_s() > deadline_s; }
};

double percent_of_peak(const Row& r, const Peaks& p, bool* memory_bound) {
  const double memory = r.gb_s() / p.read_GB_s, compute = r.tflops() / p.bf16_tflops;
  if (memory_bound) *memory_bound = memory >= compute;
  return 100.0 * std::max(memory, compute);
}

// ---- buffers ----------------------------------------------------------------------------------------------
enum class Role {
  kInput,   // random bf16 (or fixed host contents), read by the op
  kInOut,   // random bf16 (or fixed host contents), updated in place (in-place ops, KV caches, step counters)
  kOutput,  // poisoned before the first launch, must be fully written by it
  kScratch,  // zeroed once (workspaces, intermediates of composite baselines)
};

struct Buffer {
  std::string name;
  Role role = Role::kInput;
  size_t bytes = 0;
  float lo = -1.0f, hi = 1.0f;  // random bf16 range
  std::vector<uint8_t> host;    // fixed contents copied into every set, instead of random values
  int elem_bytes = 2;           // outputs: element size of the written check
  bool shared = false;          // one copy for every rotated set (workspaces)
};

Buffer make_buffer(std::string name, Role role, size_t bytes) {
  Buffer b;
  b.name = std::move(name);
  b.role = role;
  b.bytes = bytes;
  return b;
}
Buffer random_bf16(std::string name, int64_t count, float lo, float hi, Role role = Role::kInput) {
  Buffer b = make_buffer(std::move(name), role, size_t(count) * 2);
  b.lo = lo;
  b.hi = hi;
  return b;
}
template <class T>
Buffer host_values(std::string name, const std::vector<T>& values, Role role = Role::kInput) {
  Buffer b = make_buffer(std::move(name), role, values.size() * sizeof(T));
  b.host.resize(b.bytes);
  std::memcpy(b.host.data(), values.data(), b.bytes);
  return b;
}
Buffer output(std::string name, int64_t count, int elem_bytes = 2) {
  Buffer b = make_buffer(std::move(name), Role::kOutput, size_t(count) * size_t(elem_bytes));
  b.elem_bytes = elem_bytes;
  return b;
}
Buffer scratch(std::string name, size_t bytes, bool shared) {
  Buffer b = make_buffer(std::move(name), Role::kScratch, std::max<size_t>(bytes, 4));
  b.shared = shared;
  return b;
}

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

// `count` copies of a shape's buffers (one copy of shared ones) in one allocation, filled and poisoned.
class DeviceSets {
 public:
  DeviceSets(const std::vector<Buffer>& buffers, int count, uint64_t seed, cudaStream_t stream)
      : buffers_(buffers), count_(count) {
    size_t set_bytes = 0, shared_bytes = 0;
    for (const Buffer& b : buffers_) (b.shared ? shared_bytes : set_bytes) += aligned(b.bytes);
    set_bytes_ = set_bytes;
    BENCH_CHECK(cudaMalloc(&base_, set_bytes * size_t(count) + shared_bytes));
    BENCH_CHECK(cudaMalloc(&counter_, sizeof(unsigned long long)));
    char* next = base_;
    std::vector<void*> shared(buffers_.size(), nullptr);
    for (size_t i = 0; i < buffers_.size(); ++i)
      if (buffers_[i].shared) {
        shared[i] = next;
        next += aligned(buffers_[i].bytes);
      }
    pointers_.resize(size_t(count));
    for (int s = 0; s < count; ++s)
      for (size_t i = 0; i < buffers_.size(); ++i) {
        if (buffers_[i].shared) {
          pointers_[size_t(s)].push_back(shared[i]);
          continue;
        }
        pointers_[size_t(s)].push_back(next);
        next += aligned(buffers_[i].bytes);
      }
    for (int s = 0; s < count; ++s)
      for (size_t i = 0; i < buffers_.size(); ++i) {
        const Buffer& b = buffers_[i];
        if (b.shared && s > 0) continue;
        void* p = pointers_[size_t(s)][i];
        if (b.role == Role::kOutput) {
          BENCH_CHECK(cudaMemsetAsync(p, 0xFF, b.bytes, stream));
        } else if (b.role == Role::kScratch) {
          BENCH_CHECK(cudaMemsetAsync(p, 0, b.bytes, stream));
        } else if (!b.host.empty()) {
          BENCH_CHECK(cudaMemcpyAsync(p, b.host.data(), b.bytes, cudaMemcpyHostToDevice, stream));
        } else {
          fill_random_bf16(p, b.bytes / 2, splitmix64(seed ^ splitmix64(uint64_t(s) * 1000 + i)), b.lo, b.hi,
                           stream);
        }
      }
    BENCH_CHECK(cudaStreamSynchronize(stream));
  }
  DeviceSets(const DeviceSets&) = delete;
  DeviceSets& operator=(const DeviceSets&) = delete;
  ~DeviceSets() {
    (void)cudaFree(base_);
    (void)cudaFree(counter_);
  }

  int count() const { return count_; }
  size_t set_bytes() const { return set_bytes_; }
  const std::vector<void*>& pointers(int set) const { return pointers_[size_t(set)]; }

  void poison_outputs(cudaStream_t stream) {
    for (int s = 0; s < count_; ++s)
      for (size_t i = 0; i < buffers_.size(); ++i)
        if (buffers_[i].role == Role::kOutput)
          BENCH_CHECK(cudaMemsetAsync(pointers_[size_t(s)][i], 0xFF, buffers_[i].bytes, stream));
  }
  // Output elements still holding the poison, over every set.
  uint64_t unwritten(cudaStream_t stream) {
    BENCH_CHECK(cudaMemsetAsync(counter_, 0, sizeof(unsigned long long), stream));
    for (int s = 0; s < count_; ++s)
      for (size_t i = 0; i < buffers_.size(); ++i)
        if (buffers_[i].role == Role::kOutput)
          count_poison(pointers_[size_t(s)][i], buffers_[i].bytes, buffers_[i].elem_bytes, counter_, stream);
    unsigned long long found = 0;
    BENCH_CHECK(cudaMemcpyAsync(&found, counter_, sizeof found, cudaMemcpyDeviceToHost, stream));
    BENCH_CHECK(cudaStreamSynchronize(stream));
    return found;
  }

 private:
  std::vector<Buffer> buffers_;
  int count_;
  size_t set_bytes_ = 0;
  char* base_ = nullptr;
  unsigned long long* counter_ = nullptr;
  std::vector<std::vector<void*>> pointers_;
};

// ---- shapes and candidates --------------------------------------------------------------------------------
template <class Args>
struct Shape {
  std::string regime, label;
  json params;
  double bytes = 0, flops = 0;  // what one launch must move (each input once, each output once) and compute
  bool headline = false;        // in the summary
  std::vector<Buffer> buffers;
  std::function<Args(const std::vector<void*>&)> bind;  // one set's pointers, in `buffers` order
};

template <class Args>
Shape<Args> make_shape(std::string regime, std::string label, json params) {
  Shape<Args> s;
  s.regime = std::move(regime);
  s.label = std::move(label);
  s.params = std::move(params);
  return s;
}

template <class Args>
struct Timed {
  std::string name;
  // ptrs: the set's pointers, for composite baselines that need buffers outside Args
  std::function<void(const Args&, const std::vector<void*>& ptrs, cudaStream_t)> launch;
  bool (*supports)(const Args&) = nullptr;
  int kernels_per_launch = 1;
  bool cublas = false;
  bool composite = false;  // an unfused baseline chaining other ops' versions
  std::function<std::string(const Args&, const std::vector<void*>&)> describe;  // composites: what they chain
};

// KernelVersion::kernels_per_launch where the registry declares it (1 otherwise).
template <class Version>
int kernels_per_launch_of(const Version& v) {
  if constexpr (requires { v.kernels_per_launch; }) {
    return v.kernels_per_launch;
  } else {
    return 1;
  }
}

template <class Args>
std::vector<Timed<Args>> registry_candidates(const std::vector<KernelVersion<Args>>& versions) {
  std::vector<Timed<Args>> out;
  for (const KernelVersion<Args>& v : versions) {
    Timed<Args> t;
    t.name = v.name;
    t.launch = [launch = v.launch](const Args& a, const std::vector<void*>&, cudaStream_t s) {
      launch(a, s);
    };
    t.supports = v.supports;
    t.kernels_per_launch = kernels_per_launch_of(v);
    out.push_back(std::move(t));
  }
  return out;
}

// The newest listed version of an op that supports `args`: what an unfused composite chains.
template <class Args>
const KernelVersion<Args>& newest_supporting(const std::vector<KernelVersion<Args>>& versions,
                                             const Args& args) {
  for (auto it = versions.rbegin(); it != versions.rend(); ++it)
    if (it->takes(args)) return *it;
  throw std::runtime_error("no version supports the composite's arguments");
}

template <class T>
T* as(void* p) {
  return static_cast<T*>(p);
}

struct TokenCount {
  std::string regime;
  int64_t tokens;
  bool headline;
};
std::vector<TokenCount> token_counts() {
  return {{"decode", 1, true},  {"decode", 2, false},    {"decode", 4, false},
          {"decode", 8, false}, {"prefill", 512, false}, {"prefill", 2048, true}};
}

std::vector<int32_t> random_ints(int64_t count, int32_t lo, int32_t hi, uint64_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = lo + int32_t(splitmix64(seed ^ splitmix64(i)) % uint64_t(int64_t(hi) - lo + 1));
  return v;
}
std::vector<int32_t> iota_ints(int64_t count, int32_t first = 0) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = first + int32_t(i);
  return v;
}
std::vector<float> inv_freq(int64_t head_dim) {  // transformers' default rope init, fp32
  std::vector<float> f(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i)
    f[size_t(i)] = 1.0f / std::pow(float(kRopeTheta), float(2 * i) / float(head_dim));
  return f;
}

// ---- timing -----------------------------------------------------------------------------------------------
// A launch that fails leaves the context usable (a bad configuration) or not (a fault inside a kernel): the
// second kind ends the run, after the results so far are written.
[[noreturn]] void fatal(Context& ctx, const std::string& message);
void write_json(Context& ctx);

bool context_is_dead() {
  return cudaDeviceSynchronize() != cudaSuccess;
}

template <class Args>
void time_candidate(Context& ctx, const Timed<Args>& c, const std::vector<Args>& args, DeviceSets& sets,
                    Row& row) {
  cudaStream_t stream = ctx.stream;
  const int n_sets = sets.count();
  auto launch_set = [&](int s) { c.launch(args[size_t(s)], sets.pointers(s), stream); };
  auto fail = [&](const std::string& what) {
    row.status = "error: " + what;
    ctx.failed = true;
    (void)cudaGetLastError();
    if (context_is_dead()) fatal(ctx, row.op + " " + row.shape + " " + row.version + ": " + what);
  };
  current_case() = row.op + " " + row.regime + " " + row.shape + " " + row.version;
  EventPair events;
  try {
    // First pass over every set: the output must be fully written (and the time estimates the next steps).
    sets.poison_outputs(stream);
    events.start(stream);
    for (int s = 0; s < n_sets; ++s) launch_set(s);
    events.stop(stream);
    BENCH_CHECK(cudaGetLastError());
    const cudaError_t synced = cudaStreamSynchronize(stream);
    if (synced != cudaSuccess) return fail(std::string("kernel failed: ") + cudaGetErrorString(synced));
    // Never below the events' resolution, so the run sizes below stay finite.
    double per_launch_ms = std::max(1e-4, double(events.elapsed_ms()) / n_sets);
    if (const uint64_t unwritten = sets.unwritten(stream)) {
      row.status = "UNWRITTEN: " + std::to_string(unwritten) + " output elements still poison";
      ctx.failed = true;
      return;
    }
    if (per_launch_ms < 200) {  // an estimate without one-time costs (module load, lazy attributes)
      const int estimate_sets = int(std::clamp<double>(std::ceil(50.0 / per_launch_ms), 1, n_sets));
      events.start(stream);
      for (int s = 0; s < estimate_sets; ++s) launch_set(s);
      events.stop(stream);
      per_launch_ms = std::max(1e-4, double(events.elapsed_ms()) / estimate_sets);
    }
    if (per_launch_ms > 500) {  // a slow baseline: one more launch is the measurement
      events.start(stream);
      launch_set(0);
      events.stop(stream);
      row.us = stats_of({double(events.elapsed_ms()) * 1e3});
      row.launches_per_run = 1;
      row.timing = "single launch (slower than 500 ms)";
      BENCH_CHECK(cudaGetLastError());
      return;
    }
    // A run lasts about sample_ms and, for a kernel near the memory time of its inputs, rotates over every
    // set (a multiple of n_sets launches). A kernel far slower than its memory time (latency- or issue-bound:
    // more than 20x) cannot be moved much by L2 hits, so its run may cover fewer sets. Runs: --repeat, fewer
    // if a run is long.
    const double memory_ms = double(sets.set_bytes()) / (ctx.peaks.read_GB_s * 1e9) * 1e3;
    int64_t launches = 0;
    if (per_launch_ms > 20 * memory_ms) {
      launches = std::clamp<int64_t>(int64_t(std::ceil(ctx.options.sample_ms / per_launch_ms)), 1, n_sets);
    } else {
      const int64_t rounds =
          std::max<int64_t>(1, int64_t(std::ceil(ctx.options.sample_ms / (per_launch_ms * n_sets))));
      launches = std::min<int64_t>(rounds * n_sets, std::max<int64_t>(n_sets, 20000));
    }
    row.rotation_bytes = double(sets.set_bytes()) * double(std::min<int64_t>(launches, n_sets));
    const int runs = std::clamp(int(4000.0 / (per_launch_ms * double(launches))), 3, ctx.options.repeat);
    auto launch_run = [&] {
      for (int64_t i = 0; i < launches; ++i) launch_set(int(i % n_sets));
    };
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    try {
      launch_run();
    } catch (...) {
      (void)cudaStreamEndCapture(stream, &graph);
      if (graph) (void)cudaGraphDestroy(graph);
      throw;
    }
    const bool captured = cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph &&
                          cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (graph) (void)cudaGraphDestroy(graph);
    if (!captured)
      (void)cudaGetLastError();  // not capturable: plain stream launches (CPU launch cost included)
    row.timing = captured ? "graph replay" : "stream launches (graph capture failed)";
    auto run = [&] {
      if (captured)
        BENCH_CHECK(cudaGraphLaunch(exec, stream));
      else
        launch_run();
    };
    run();  // warm
    std::vector<double> per_launch_us;
    for (int i = 0; i < runs; ++i) {
      events.start(stream);
      run();
      events.stop(stream);
      per_launch_us.push_back(double(events.elapsed_ms()) * 1e3 / double(launches));
    }
    if (exec) (void)cudaGraphExecDestroy(exec);
    BENCH_CHECK(cudaGetLastError());
    row.us = stats_of(per_launch_us);
    row.launches_per_run = int(launches);
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

// ---- the table --------------------------------------------------------------------------------------------
void print_header() {
  std::printf("%-18s %-7s %-30s %-26s %10s %8s %8s %9s %7s %9s\n", "op", "regime", "shape", "version",
              "median_us", "GB/s", "TFLOP/s", "%peak", "vs_base", "vs_cublas");
}

std::string speedup_text(double s) {
  if (s <= 0) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2fx", s);
  return buffer;
}

void print_row(const Row& r, const Peaks& peaks) {
  const std::string version = r.version.size() > 26 ? r.version.substr(0, 25) + "~" : r.version;
  if (!r.ok()) {
    std::printf("%-18s %-7s %-30s %-26s %s\n", r.op.c_str(), r.regime.c_str(), r.shape.c_str(),
                version.c_str(), r.status.c_str());
    return;
  }
  bool memory_bound = true;
  const double pct = percent_of_peak(r, peaks, &memory_bound);
  char pct_text[32];
  std::snprintf(pct_text, sizeof pct_text, "%.1f%% %s", pct, memory_bound ? "m" : "c");
  std::printf("%-18s %-7s %-30s %-26s %10.2f %8.1f %8.2f %9s %7s %9s\n", r.op.c_str(), r.regime.c_str(),
              r.shape.c_str(), version.c_str(), r.us.median, r.gb_s(), r.tflops(), pct_text,
              speedup_text(r.speedup_vs_baseline).c_str(), speedup_text(r.speedup_vs_cublas).c_str());
}

// ---- running one op ---------------------------------------------------------------------------------------
bool version_selected(const Options& o, const std::string& name) {
  if (o.versions.empty()) return true;
  for (const std::string& part : o.versions)
    if (name.find(part) != std::string::npos) return true;
  return false;
}

template <class Args>
void run_shape(Context& ctx, const std::string& op, const std::vector<Timed<Args>>& candidates,
               const Shape<Args>& shape) {
  std::vector<Row> rows;
  auto new_row = [&](const Timed<Args>& c, size_t index) {
    Row r;
    r.op = op;
    r.regime = shape.regime;
    r.shape = shape.label;
    r.params = shape.params;
    r.version = c.name;
    r.bytes = shape.bytes;
    r.flops = shape.flops;
    r.headline = shape.headline;
    r.baseline = index == 0;
    r.cublas = c.cublas;
    r.composite = c.composite;
    r.kernels_per_launch = c.kernels_per_launch;
    return r;
  };
  if (ctx.out_of_time()) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      Row r = new_row(candidates[i], i);
      r.status = "skipped: time budget spent";
      rows.push_back(r);
    }
    ctx.rows.insert(ctx.rows.end(), rows.begin(), rows.end());
    return;
  }

  // Enough rotated sets that a set is evicted from L2 before it comes round again.
  size_t set_bytes = 0;
  for (const Buffer& b : shape.buffers)
    if (!b.shared) set_bytes += aligned(b.bytes);
  const double target = ctx.options.rotation_factor * double(ctx.gpu.l2_bytes);
  const int sets_count = int(std::clamp<double>(std::ceil(target / double(set_bytes)), 1, 8192));
  DeviceSets sets(shape.buffers, sets_count, std::hash<std::string>{}(op + shape.label), ctx.stream);
  std::vector<Args> args;
  for (int s = 0; s < sets.count(); ++s) args.push_back(shape.bind(sets.pointers(s)));

  std::vector<std::string> unsupported;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Timed<Args>& c = candidates[i];
    if (i > 0 && !c.cublas && !version_selected(ctx.options, c.name)) continue;
    Row r = new_row(c, i);
    r.sets = sets.count();
    r.rotation_bytes =
        double(sets.set_bytes()) * sets.count();  // narrowed by time_candidate if a run uses fewer
    if (c.supports && !c.supports(args[0])) {
      r.status = "unsupported";
      unsupported.push_back(c.name);
      rows.push_back(r);
      continue;
    }
    if (c.describe) {
      try {
        r.note = c.describe(args[0], sets.pointers(0));
      } catch (const std::exception& e) {
        r.note = e.what();
      }
    }
    time_candidate(ctx, c, args, sets, r);
    rows.push_back(r);
  }

  // Speedups: over the first candidate (the op's baseline) and over cuBLAS.
  const Row* baseline = !rows.empty() && rows.front().baseline && rows.front().ok() ? &rows.front() : nullptr;
  const Row* cublas = nullptr;
  for (const Row& r : rows)
    if (r.cublas && r.ok()) cublas = &r;
  for (Row& r : rows) {
    if (!r.ok()) continue;
    if (baseline) r.speedup_vs_baseline = baseline->us.median / r.us.median;
    if (cublas) r.speedup_vs_cublas = cublas->us.median / r.us.median;
  }
  for (const Row& r : rows) {
    if (r.status == "unsupported") continue;
    print_row(r, ctx.peaks);
    if (!r.note.empty()) std::printf("%-18s %-7s %-30s   = %s\n", "", "", "", r.note.c_str());
  }
  if (!unsupported.empty()) {
    std::string names;
    for (const std::string& n : unsupported) names += (names.empty() ? "" : ", ") + n;
    std::printf("%-18s %-7s %-30s   (unsupported here: %s)\n", "", "", "", names.c_str());
  }
  std::fflush(stdout);
  ctx.rows.insert(ctx.rows.end(), rows.begin(), rows.end());
}

template <class Args>
void run_op(Context& ctx, const std::string& op, const std::string& regime,
            const std::vector<Timed<Args>>& candidates, const std::vector<Shape<Args>>& shapes) {
  if (!ctx.options.kernels.empty() && !ctx.options.kernels.count(op)) return;
  bool any = false;
  for (const Shape<Args>& shape : shapes) {
    if (shape.regime != regime) continue;
    run_shape(ctx, op, candidates, shape);
    any = true;
  }
  if (any) write_json(ctx);
}

// ---- the ops at Qwen3-8B shapes ---------------------------------------------------------------------------
std::vector<Shape<EmbeddingArgs>> embedding_shapes() {
  std::vector<Shape<EmbeddingArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    const int64_t t = tc.tokens;
    auto s = make_shape<EmbeddingArgs>(tc.regime, "tokens=" + std::to_string(t),
                                       {{"tokens", t}, {"vocab", kVocab}, {"hidden", kHidden}});
    s.bytes = 2.0 * double(t * kHidden) * 2 + 4.0 * double(t);  // rows read + written, ids
    s.headline = tc.headline;
    s.buffers = {host_values("ids", random_ints(t, 0, int32_t(kVocab - 1), 11)),  // (tokens)
                 random_bf16("table", kVocab * kHidden, -1, 1),                   // (vocab, hidden)
                 output("out", t * kHidden)};                                     // (tokens, hidden)
    s.bind = [t](const std::vector<void*>& p) {
      return EmbeddingArgs{as<int32_t>(p[0]), as<bf16>(p[1]), as<bf16>(p[2]), t, kHidden};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<Shape<RmsnormArgs>> rmsnorm_shapes() {
  std::vector<Shape<RmsnormArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    // The layer norms (rows = tokens, n = hidden) and QK-norm over the query heads (rows = tokens * 32, n =
    // 128).
    for (const bool heads : {false, true}) {
      const int64_t rows = heads ? tc.tokens * kQHeads : tc.tokens, n = heads ? kHeadDim : kHidden;
      auto s = make_shape<RmsnormArgs>(tc.regime,
                                       std::string(heads ? "q-norm" : "hidden") +
                                           " rows=" + std::to_string(rows) + " n=" + std::to_string(n),
                                       {{"rows", rows}, {"n", n}});
      s.bytes = 2.0 * (2.0 * double(rows * n) + double(n));
      s.headline = tc.headline && !heads;
      s.buffers = {random_bf16("x", rows * n, -3, 3), random_bf16("weight", n, -1.5f, 1.5f),
                   output("y", rows * n)};
      s.bind = [rows, n](const std::vector<void*>& p) {
        return RmsnormArgs{as<bf16>(p[0]), as<bf16>(p[1]), as<bf16>(p[2]), rows, n, kEps};
      };
      shapes.push_back(std::move(s));
    }
  }
  return shapes;
}

std::vector<Shape<AddRmsnormArgs>> add_rmsnorm_shapes() {
  std::vector<Shape<AddRmsnormArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    const int64_t rows = tc.tokens, n = kHidden;
    auto s = make_shape<AddRmsnormArgs>(tc.regime, "rows=" + std::to_string(rows) + " n=" + std::to_string(n),
                                        {{"rows", rows}, {"n", n}});
    s.bytes = 2.0 * (4.0 * double(rows * n) + double(n));  // residual and delta read, residual and y written
    s.headline = tc.headline;
    s.buffers = {random_bf16("residual", rows * n, -8, 8, Role::kInOut),
                 random_bf16("delta", rows * n, -2, 2), random_bf16("weight", n, -1.5f, 1.5f),
                 output("y", rows * n)};
    s.bind = [rows, n](const std::vector<void*>& p) {
      return AddRmsnormArgs{as<bf16>(p[0]), as<bf16>(p[1]), as<bf16>(p[2]), as<bf16>(p[3]), rows, n, kEps};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

struct Projection {
  const char* name;
  int64_t n, k;
};
// The engine's projections: QKV fused, O, gate|up fused, down, lm_head.
const Projection kProjections[] = {
    {"qkv", (kQHeads + 2 * kKvHeads) * kHeadDim, kHidden},
    {"o", kHidden, kQHeads* kHeadDim},
    {"gate_up", 2 * kInter, kHidden},
    {"down", kHidden, kInter},
    {"lm_head", kVocab, kHidden},
};

std::vector<Shape<GemmArgs>> gemm_shapes() {
  std::vector<Shape<GemmArgs>> shapes;
  for (const TokenCount& tc : token_counts())
    for (const Projection& p : kProjections) {
      const int64_t m = tc.tokens, n = p.n, k = p.k;
      auto s = make_shape<GemmArgs>(
          tc.regime,
          std::string(p.name) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k),
          {{"projection", p.name}, {"m", m}, {"n", n}, {"k", k}});
      s.bytes = 2.0 * (double(m * k) + double(n * k) + double(m * n));
      s.flops = 2.0 * double(m) * double(n) * double(k);
      s.headline = tc.headline;
      s.buffers = {random_bf16("x", m * k, -2, 2), random_bf16("w", n * k, -0.05f, 0.05f),
                   output("y", m * n)};
      s.bind = [m, n, k](const std::vector<void*>& ptr) {
        return GemmArgs{as<bf16>(ptr[0]), as<bf16>(ptr[1]), as<bf16>(ptr[2]), m, n, k};
      };
      shapes.push_back(std::move(s));
    }
  return shapes;
}

std::vector<Timed<GemmArgs>> gemm_candidates() {
  auto candidates = registry_candidates(kernels::gemm_versions());
  const bool listed = std::any_of(kernels::gemm_versions().begin(), kernels::gemm_versions().end(),
                                  [](const auto& v) { return v.launch == &kernels::launch_gemm_cublas; });
  for (size_t i = 0; i < candidates.size(); ++i)
    if (kernels::gemm_versions()[i].launch == &kernels::launch_gemm_cublas) candidates[i].cublas = true;
  if (!listed) {
    Timed<GemmArgs> c;
    c.name = "cublas";
    c.launch = [](const GemmArgs& a, const std::vector<void*>&, cudaStream_t s) {
      kernels::launch_gemm_cublas(a, s);
    };
    c.cublas = true;
    candidates.push_back(std::move(c));
  }
  return candidates;
}

std::vector<Shape<RopeArgs>> rope_shapes() {
  std::vector<Shape<RopeArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    const int64_t t = tc.tokens;
    const auto positions = tc.regime == "decode" ? random_ints(t, 0, 8191, 21) : iota_ints(t);
    auto s = make_shape<RopeArgs>(
        tc.regime, "tokens=" + std::to_string(t),
        {{"tokens", t}, {"q_heads", kQHeads}, {"kv_heads", kKvHeads}, {"head_dim", kHeadDim}});
    s.bytes =
        2.0 * 2.0 * double(t * (kQHeads + kKvHeads) * kHeadDim) + 4.0 * double(t) + 2.0 * double(kHeadDim);
    s.headline = tc.headline;
    s.buffers = {random_bf16("q", t * kQHeads * kHeadDim, -4, 4, Role::kInOut),
                 random_bf16("k", t * kKvHeads * kHeadDim, -4, 4, Role::kInOut),
                 host_values("positions", positions), host_values("inv_freq", inv_freq(kHeadDim))};
    s.bind = [t](const std::vector<void*>& p) {
      return RopeArgs{as<bf16>(p[0]), as<bf16>(p[1]), as<int32_t>(p[2]), as<float>(p[3]), 1.0f, t,
                      kQHeads,        kKvHeads,       kHeadDim};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

// Decode: one token per cache slot at context 1024; prefill: T tokens of one sequence in slot 0.
struct CacheShape {
  int64_t tokens, slots, max_ctx;
  std::vector<int32_t> positions, slot_ids;  // slot_ids empty: nullptr
};
CacheShape cache_shape(const TokenCount& tc) {
  if (tc.regime == "decode")
    return {tc.tokens, tc.tokens, 1024, random_ints(tc.tokens, 0, 1023, 31), iota_ints(tc.tokens)};
  return {tc.tokens, 1, tc.tokens, iota_ints(tc.tokens), {}};
}

std::vector<Shape<QkNormRopeCacheArgs>> qk_norm_rope_cache_shapes() {
  std::vector<Shape<QkNormRopeCacheArgs>> shapes;
  constexpr int64_t kQkvWidth = (kQHeads + 2 * kKvHeads) * kHeadDim;
  for (const TokenCount& tc : token_counts()) {
    const CacheShape c = cache_shape(tc);
    const int64_t t = c.tokens, cache = c.slots * c.max_ctx * kKvHeads * kHeadDim, max_ctx = c.max_ctx;
    const bool has_slots = !c.slot_ids.empty();
    auto s = make_shape<QkNormRopeCacheArgs>(
        tc.regime, "tokens=" + std::to_string(t) + " max_ctx=" + std::to_string(max_ctx),
        {{"tokens", t}, {"slots", c.slots}, {"max_ctx", max_ctx}});
    // qkv read; q written; k and v rows written into the cache; norms, positions and slots read.
    s.bytes = 2.0 * double(t * kQkvWidth) + 2.0 * double(t * (kQHeads + 2 * kKvHeads) * kHeadDim) +
              2.0 * 2 * double(kHeadDim) + 8.0 * double(t);
    s.headline = tc.headline;
    s.buffers = {random_bf16("qkv", t * kQkvWidth, -4, 4), random_bf16("q_norm", kHeadDim, -1.5f, 1.5f),
                 random_bf16("k_norm", kHeadDim, -1.5f, 1.5f), output("q_out", t * kQHeads * kHeadDim),
                 random_bf16("k_cache", cache, -1, 1, Role::kInOut),
                 random_bf16("v_cache", cache, -1, 1, Role::kInOut), host_values("positions", c.positions),
                 host_values("slots", has_slots ? c.slot_ids : std::vector<int32_t>{0}),
                 host_values("inv_freq", inv_freq(kHeadDim)),
                 // The unfused baseline's separate q and k (a QKV projection into three buffers).
                 random_bf16("q_separate", t * kQHeads * kHeadDim, -4, 4),
                 random_bf16("k_separate", t * kKvHeads * kHeadDim, -4, 4, Role::kInOut)};
    s.bind = [t, max_ctx, has_slots](const std::vector<void*>& p) {
      return QkNormRopeCacheArgs{as<bf16>(p[0]),
                                 as<bf16>(p[1]),
                                 as<bf16>(p[2]),
                                 as<bf16>(p[3]),
                                 as<bf16>(p[4]),
                                 as<bf16>(p[5]),
                                 as<int32_t>(p[6]),
                                 has_slots ? as<int32_t>(p[7]) : nullptr,
                                 as<float>(p[8]),
                                 1.0f,
                                 kEps,
                                 t,
                                 kQHeads,
                                 kKvHeads,
                                 kHeadDim,
                                 max_ctx};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

// The unfused sequence the fused op replaces: rmsnorm over the q heads and over the k heads (in place), rope,
// and the cache store, each the newest version that supports its shape. It reads q and k from separate
// buffers, as a QKV projection into three outputs would leave them.
std::vector<Timed<QkNormRopeCacheArgs>> qk_norm_rope_cache_candidates() {
  struct Parts {
    RmsnormArgs q_norm, k_norm;
    RopeArgs rope;
    KvWriteArgs store;
  };
  auto parts = [](const QkNormRopeCacheArgs& a, const std::vector<void*>& p) {
    const bf16* q_in = as<bf16>(p[9]);  // (tokens, q_heads, head_dim): the projection's q
    bf16* k = as<bf16>(p[10]);          // (tokens, kv_heads, head_dim): the projection's k, normed in place
    const int64_t width = (a.q_heads + 2 * a.kv_heads) * a.head_dim;
    return Parts{{q_in, a.q_norm, a.q_out, a.tokens * a.q_heads, a.head_dim, a.eps},
                 {k, a.k_norm, k, a.tokens * a.kv_heads, a.head_dim, a.eps},
                 {a.q_out, k, a.positions, a.inv_freq, a.attention_factor, a.tokens, a.q_heads, a.kv_heads,
                  a.head_dim},
                 {k, a.qkv + (a.q_heads + a.kv_heads) * a.head_dim, a.k_cache, a.v_cache, a.positions,
                  a.slots, a.tokens, a.kv_heads, a.head_dim, a.max_ctx, a.kv_heads * a.head_dim, width}};
  };
  Timed<QkNormRopeCacheArgs> unfused;
  unfused.name = "unfused";
  unfused.composite = true;
  unfused.kernels_per_launch = 4;
  unfused.launch = [parts](const QkNormRopeCacheArgs& a, const std::vector<void*>& p, cudaStream_t s) {
    const Parts x = parts(a, p);
    newest_supporting(kernels::rmsnorm_versions(), x.q_norm).launch(x.q_norm, s);
    newest_supporting(kernels::rmsnorm_versions(), x.k_norm).launch(x.k_norm, s);
    newest_supporting(kernels::rope_versions(), x.rope).launch(x.rope, s);
    newest_supporting(kernels::kv_write_versions(), x.store).launch(x.store, s);
  };
  unfused.describe = [parts](const QkNormRopeCacheArgs& a, const std::vector<void*>& p) {
    const Parts x = parts(a, p);
    return std::string("unfused = ") + newest_supporting(kernels::rmsnorm_versions(), x.q_norm).name +
           " (q), " + newest_supporting(kernels::rmsnorm_versions(), x.k_norm).name + " (k), " +
           newest_supporting(kernels::rope_versions(), x.rope).name + ", " +
           newest_supporting(kernels::kv_write_versions(), x.store).name;
  };
  std::vector<Timed<QkNormRopeCacheArgs>> candidates{unfused};
  for (auto& c : registry_candidates(kernels::qk_norm_rope_cache_versions()))
    candidates.push_back(std::move(c));
  return candidates;
}

std::vector<Shape<KvWriteArgs>> kv_write_shapes() {
  std::vector<Shape<KvWriteArgs>> shapes;
  constexpr int64_t kQkvWidth = (kQHeads + 2 * kKvHeads) * kHeadDim;
  for (const TokenCount& tc : token_counts()) {
    const CacheShape c = cache_shape(tc);
    const int64_t t = c.tokens, cache = c.slots * c.max_ctx * kKvHeads * kHeadDim, max_ctx = c.max_ctx;
    const bool has_slots = !c.slot_ids.empty();
    auto s = make_shape<KvWriteArgs>(tc.regime,
                                     "tokens=" + std::to_string(t) + " max_ctx=" + std::to_string(max_ctx),
                                     {{"tokens", t}, {"slots", c.slots}, {"max_ctx", max_ctx}});
    s.bytes = 2.0 * 2.0 * 2.0 * double(t * kKvHeads * kHeadDim) + 8.0 * double(t);  // k, v read and written
    s.headline = tc.headline;
    s.buffers = {random_bf16("qkv", t * kQkvWidth, -4, 4),  // (tokens, q | k | v): k and v read in place
                 random_bf16("k_cache", cache, -1, 1, Role::kInOut),
                 random_bf16("v_cache", cache, -1, 1, Role::kInOut), host_values("positions", c.positions),
                 host_values("slots", has_slots ? c.slot_ids : std::vector<int32_t>{0})};
    s.bind = [t, max_ctx, has_slots](const std::vector<void*>& p) {
      const bf16* qkv = as<bf16>(p[0]);
      return KvWriteArgs{qkv + kQHeads * kHeadDim,
                         qkv + (kQHeads + kKvHeads) * kHeadDim,
                         as<bf16>(p[1]),
                         as<bf16>(p[2]),
                         as<int32_t>(p[3]),
                         has_slots ? as<int32_t>(p[4]) : nullptr,
                         t,
                         kKvHeads,
                         kHeadDim,
                         max_ctx,
                         kQkvWidth,
                         kQkvWidth};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<Shape<AttentionArgs>> attention_shapes() {
  std::vector<Shape<AttentionArgs>> shapes;
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  // keys_read: cached rows that must be read (each once); keys_attended: (query, key) pairs, for the FLOPs.
  auto make = [&](const std::string& regime, const std::string& label, int64_t tokens, int64_t slots,
                  int64_t max_ctx, std::vector<int32_t> positions, bool has_slots, double keys_read,
                  double keys_attended, bool headline) {
    auto s = make_shape<AttentionArgs>(regime, label,
                                       {{"tokens", tokens}, {"slots", slots}, {"max_ctx", max_ctx}});
    const int64_t q_size = tokens * kQHeads * kHeadDim, cache = slots * max_ctx * kKvHeads * kHeadDim;
    // q read and out written; each needed key and value row read once.
    s.bytes = 2.0 * 2.0 * double(q_size) + 2.0 * 2.0 * double(kKvHeads * kHeadDim) * keys_read +
              8.0 * double(tokens);
    s.flops = 4.0 * double(kQHeads * kHeadDim) * keys_attended;  // q.k and p.v: 2 FLOPs per element each
    s.headline = headline;
    const int32_t max_position = *std::max_element(positions.begin(), positions.end());
    const size_t workspace_bytes =
        size_t(
            std::max<int64_t>(kernels::attention_workspace_floats(tokens, kQHeads, kHeadDim, max_ctx), 1)) *
        4;
    s.buffers = {random_bf16("q", q_size, -1, 1),
                 random_bf16("k_cache", cache, -1, 1),
                 random_bf16("v_cache", cache, -1, 1),
                 output("out", q_size),
                 host_values("positions", positions),
                 host_values("slots", iota_ints(std::max<int64_t>(slots, 1))),
                 scratch("workspace", workspace_bytes, true)};
    s.bind = [=](const std::vector<void*>& p) {
      return AttentionArgs{as<bf16>(p[0]), as<bf16>(p[1]),    as<bf16>(p[2]),
                           as<bf16>(p[3]), as<int32_t>(p[4]), has_slots ? as<int32_t>(p[5]) : nullptr,
                           tokens,         kQHeads,           kKvHeads,
                           kHeadDim,       max_ctx,           max_position,
                           scale,          as<float>(p[6])};
    };
    return s;
  };
  // Decode: one token per sequence (slot), each at the last position of a context of ctx keys.
  for (const int64_t batch : {1, 2, 4, 8})
    for (const int64_t ctx : {128, 1024, 8192})
      shapes.push_back(make("decode", "b=" + std::to_string(batch) + " ctx=" + std::to_string(ctx), batch,
                            batch, ctx, std::vector<int32_t>(size_t(batch), int32_t(ctx - 1)), true,
                            double(batch * ctx), double(batch * ctx), batch == 1 && ctx == 1024));
  // Prefill: T tokens of one sequence from position 0 (causal: token t attends t + 1 keys).
  for (const int64_t t : {512, 2048})
    shapes.push_back(make("prefill", "T=" + std::to_string(t), t, 1, t, iota_ints(t), false, double(t),
                          double(t) * double(t + 1) / 2, t == 2048));
  return shapes;
}

// Decode attention with QK-norm, RoPE and the cache store fused in (qkv_attention): one token per slot at the
// last position of a context of ctx keys. Bytes: qkv read, the new k/v rows written, every cached K/V row read.
std::vector<Shape<QkvAttentionArgs>> qkv_attention_shapes() {
  std::vector<Shape<QkvAttentionArgs>> shapes;
  constexpr int64_t kQkvWidth = (kQHeads + 2 * kKvHeads) * kHeadDim;
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  for (const int64_t batch : {1, 4})
    for (const int64_t ctx : {128, 1024, 8192}) {
      const int64_t max_ctx = ctx, cache = batch * max_ctx * kKvHeads * kHeadDim;
      const std::vector<int32_t> positions(size_t(batch), int32_t(ctx - 1));
      auto s = make_shape<QkvAttentionArgs>("decode", "b=" + std::to_string(batch) + " ctx=" + std::to_string(ctx),
                                            {{"tokens", batch}, {"slots", batch}, {"max_ctx", max_ctx}});
      s.bytes = 2.0 * double(batch * kQkvWidth) + 2.0 * 2.0 * double(batch * kKvHeads * kHeadDim) +
                2.0 * 2.0 * double(kKvHeads * kHeadDim) * double(batch * (ctx - 1)) +
                2.0 * double(batch * kQHeads * kHeadDim);
      s.flops = 4.0 * double(kQHeads * kHeadDim) * double(batch * ctx);
      s.headline = batch == 1 && ctx == 1024;
      const size_t workspace_bytes =
          size_t(std::max<int64_t>(kernels::attention_workspace_floats(batch, kQHeads, kHeadDim, max_ctx), 1)) * 4;
      s.buffers = {random_bf16("qkv", batch * kQkvWidth, -4, 4), random_bf16("q_norm", kHeadDim, 0.5f, 1.5f),
                   random_bf16("k_norm", kHeadDim, 0.5f, 1.5f), scratch("q_out", size_t(batch * kQHeads * kHeadDim) * 2, true),
                   random_bf16("k_cache", cache, -1, 1, Role::kInOut), random_bf16("v_cache", cache, -1, 1, Role::kInOut),
                   host_values("positions", positions), host_values("slots", iota_ints(batch)),
                   host_values("inv_freq", inv_freq(kHeadDim)), output("out", batch * kQHeads * kHeadDim),
                   scratch("workspace", workspace_bytes, true)};
      s.bind = [=](const std::vector<void*>& p) {
        return QkvAttentionArgs{{as<bf16>(p[0]), as<bf16>(p[1]), as<bf16>(p[2]), as<bf16>(p[3]), as<bf16>(p[4]),
                                 as<bf16>(p[5]), as<int32_t>(p[6]), as<int32_t>(p[7]), as<float>(p[8]), 1.0f, kEps,
                                 batch, kQHeads, kKvHeads, kHeadDim, max_ctx},
                                as<bf16>(p[9]),
                                int64_t(ctx - 1),
                                scale,
                                as<float>(p[10])};
      };
      shapes.push_back(std::move(s));
    }
  return shapes;
}

std::vector<Shape<SiluMulArgs>> silu_mul_shapes() {
  std::vector<Shape<SiluMulArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    const int64_t t = tc.tokens;
    auto s =
        make_shape<SiluMulArgs>(tc.regime, "tokens=" + std::to_string(t) + " inter=" + std::to_string(kInter),
                                {{"tokens", t}, {"inter", kInter}});
    s.bytes = 2.0 * 3.0 * double(t * kInter);
    s.headline = tc.headline;
    s.buffers = {random_bf16("gate_up", t * 2 * kInter, -8, 8), output("out", t * kInter)};
    s.bind = [t](const std::vector<void*>& p) {
      return SiluMulArgs{as<bf16>(p[0]), as<bf16>(p[1]), t, kInter};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<Shape<GateUpSwigluArgs>> gate_up_swiglu_shapes() {
  std::vector<Shape<GateUpSwigluArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    const int64_t m = tc.tokens, k = kHidden;
    auto s = make_shape<GateUpSwigluArgs>(
        tc.regime, std::to_string(m) + "x" + std::to_string(2 * kInter) + "x" + std::to_string(k),
        {{"m", m}, {"inter", kInter}, {"k", k}});
    s.bytes = 2.0 * (double(m * k) + double(2 * kInter * k) + double(m * kInter));
    s.flops = 2.0 * double(m) * double(2 * kInter) * double(k);
    s.headline = tc.headline;
    s.buffers = {random_bf16("x", m * k, -2, 2), random_bf16("w_gate_up", 2 * kInter * k, -0.05f, 0.05f),
                 output("out", m * kInter),
                 // The unfused baseline's gate|up activations (m, 2 * inter).
                 scratch("gate_up", size_t(m * 2 * kInter) * 2, false)};
    s.bind = [m, k](const std::vector<void*>& p) {
      return GateUpSwigluArgs{as<bf16>(p[0]), as<bf16>(p[1]), as<bf16>(p[2]), m, kInter, k};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

// The unfused pair the fused op replaces: the gate|up GEMM into memory, then silu_mul (newest supporting
// versions).
std::vector<Timed<GateUpSwigluArgs>> gate_up_swiglu_candidates() {
  auto gemm_args = [](const GateUpSwigluArgs& a, const std::vector<void*>& p) {
    return GemmArgs{a.x, a.w_gate_up, as<bf16>(p[3]), a.m, 2 * a.inter, a.k};
  };
  auto silu_args = [](const GateUpSwigluArgs& a, const std::vector<void*>& p) {
    return SiluMulArgs{as<bf16>(p[3]), a.out, a.m, a.inter};
  };
  Timed<GateUpSwigluArgs> unfused;
  unfused.name = "unfused";
  unfused.composite = true;
  unfused.kernels_per_launch = 2;
  unfused.launch = [=](const GateUpSwigluArgs& a, const std::vector<void*>& p, cudaStream_t s) {
    const GemmArgs g = gemm_args(a, p);
    const SiluMulArgs act = silu_args(a, p);
    newest_supporting(kernels::gemm_versions(), g).launch(g, s);
    newest_supporting(kernels::silu_mul_versions(), act).launch(act, s);
  };
  unfused.describe = [=](const GateUpSwigluArgs& a, const std::vector<void*>& p) {
    return std::string("unfused = ") + newest_supporting(kernels::gemm_versions(), gemm_args(a, p)).name +
           " + " + newest_supporting(kernels::silu_mul_versions(), silu_args(a, p)).name;
  };
  std::vector<Timed<GateUpSwigluArgs>> candidates{unfused};
  for (auto& c : registry_candidates(kernels::gate_up_swiglu_versions())) candidates.push_back(std::move(c));
  return candidates;
}

// ---- decode GEMVs with the residual add and the RMSNorm folded in ---------------------------------------
// Decode only (1..8 tokens): the residual GEMV at the O and down projections, the norm GEMVs at QKV and
// gate|up. Their baseline is the first listed version (v7, v8, v4). Bytes: activations, weights and norm
// weight read, the residual read (and written back by the residual op), outputs written; the norm ops also
// count the partial sums they read (v7's partial count, as the engine passes it), the residual op leaves out
// the few it writes.
constexpr float kResidualMeanSquare = 16.0f / 3.0f;  // of uniform values in [-4, 4]

// Σ residual² per token as a residual GEMV would leave it: all of it in partial 0, zeros up to the count.
std::vector<float> norm_partials_for(int64_t m, int64_t k) {
  std::vector<float> p(size_t(m * kernels::kMaxNormPartials), 0.0f);
  for (int64_t t = 0; t < m; ++t) p[size_t(t * kernels::kMaxNormPartials)] = float(k) * kResidualMeanSquare;
  return p;
}

std::vector<Shape<GemvResidualArgs>> gemv_residual_shapes() {
  std::vector<Shape<GemvResidualArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    if (tc.regime != "decode") continue;
    for (const Projection& p : {kProjections[1], kProjections[3]}) {  // o, down
      const int64_t m = tc.tokens, n = p.n, k = p.k;
      auto s = make_shape<GemvResidualArgs>(
          tc.regime,
          std::string(p.name) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k),
          {{"projection", p.name}, {"m", m}, {"n", n}, {"k", k}});
      s.bytes = 2.0 * (double(m * k) + double(n * k) + 2.0 * double(m * n));
      s.flops = 2.0 * double(m) * double(n) * double(k);
      s.headline = tc.headline;
      s.buffers = {random_bf16("x", m * k, -2, 2), random_bf16("w", n * k, -0.05f, 0.05f),
                   random_bf16("residual", m * n, -4, 4, Role::kInOut),  // (m, n) updated in place
                   scratch("norm_partials", size_t(m * kernels::kMaxNormPartials) * 4, false)};
      s.bind = [m, n, k](const std::vector<void*>& ptr) {
        return GemvResidualArgs{
            as<bf16>(ptr[0]), as<bf16>(ptr[1]), as<bf16>(ptr[2]), as<float>(ptr[3]), m, n, k};
      };
      shapes.push_back(std::move(s));
    }
  }
  return shapes;
}

std::vector<Shape<NormGemvArgs>> norm_gemv_shapes() {
  std::vector<Shape<NormGemvArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    if (tc.regime != "decode") continue;
    const Projection& p = kProjections[0];  // qkv
    const int64_t m = tc.tokens, n = p.n, k = p.k, count = kernels::gemv_residual_partials(m, k);
    auto s = make_shape<NormGemvArgs>(
        tc.regime,
        std::string(p.name) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k),
        {{"projection", p.name}, {"m", m}, {"n", n}, {"k", k}, {"partial_count", count}});
    s.bytes = 2.0 * (double(m * k) + double(k) + double(n * k) + double(m * n)) + 4.0 * double(m * count);
    s.flops = 2.0 * double(m) * double(n) * double(k);
    s.headline = tc.headline;
    s.buffers = {random_bf16("residual", m * k, -4, 4), host_values("norm_partials", norm_partials_for(m, k)),
                 random_bf16("norm_weight", k, 0.5f, 1.5f), random_bf16("w", n * k, -0.05f, 0.05f),
                 output("y", m * n)};
    s.bind = [m, n, k, count](const std::vector<void*>& ptr) {
      return NormGemvArgs{as<bf16>(ptr[0]),
                          as<float>(ptr[1]),
                          count,
                          as<bf16>(ptr[2]),
                          kEps,
                          as<bf16>(ptr[3]),
                          as<bf16>(ptr[4]),
                          m,
                          n,
                          k};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<Shape<NormGateUpSwigluArgs>> norm_gate_up_swiglu_shapes() {
  std::vector<Shape<NormGateUpSwigluArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    if (tc.regime != "decode") continue;
    const int64_t m = tc.tokens, k = kHidden, count = kernels::gemv_residual_partials(m, k);
    auto s = make_shape<NormGateUpSwigluArgs>(
        tc.regime, std::to_string(m) + "x" + std::to_string(2 * kInter) + "x" + std::to_string(k),
        {{"m", m}, {"inter", kInter}, {"k", k}, {"partial_count", count}});
    s.bytes = 2.0 * (double(m * k) + double(k) + double(2 * kInter * k) + double(m * kInter)) +
              4.0 * double(m * count);
    s.flops = 2.0 * double(m) * double(2 * kInter) * double(k);
    s.headline = tc.headline;
    s.buffers = {random_bf16("residual", m * k, -4, 4), host_values("norm_partials", norm_partials_for(m, k)),
                 random_bf16("norm_weight", k, 0.5f, 1.5f),
                 random_bf16("w_gate_up", 2 * kInter * k, -0.05f, 0.05f), output("out", m * kInter)};
    s.bind = [m, k, count](const std::vector<void*>& ptr) {
      return NormGateUpSwigluArgs{as<bf16>(ptr[0]), as<float>(ptr[1]), count, as<bf16>(ptr[2]), kEps,
                                  as<bf16>(ptr[3]), as<bf16>(ptr[4]),  m,     kInter,           k};
    };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<Shape<AddArgs>> add_shapes() {
  std::vector<Shape<AddArgs>> shapes;
  for (const TokenCount& tc : token_counts()) {
    const int64_t n = tc.tokens * kHidden;
    auto s = make_shape<AddArgs>(
        tc.regime, "n=" + std::to_string(n) + " (" + std::to_string(tc.tokens) + " x hidden)", {{"n", n}});
    s.bytes = 2.0 * 3.0 * double(n);
    s.headline = tc.headline;
    s.buffers = {random_bf16("h", n, -8, 8, Role::kInOut), random_bf16("delta", n, -2, 2)};
    s.bind = [n](const std::vector<void*>& p) { return AddArgs{as<bf16>(p[0]), as<bf16>(p[1]), n}; };
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<Shape<SampleArgs>> sample_shapes() {
  std::vector<Shape<SampleArgs>> shapes;
  struct Mode {
    const char* name;
    float temperature, top_p;
    int32_t top_k;
    bool penalties;
  };
  const Mode modes[] = {{"greedy", 0.0f, 1.0f, 0, false},
                        {"T0.6 k20 p0.95", 0.6f, 0.95f, 20, false},  // Qwen3's recommended setting
                        {"penalties T0.7 p0.8", 0.7f, 0.8f, 0, true}};
  for (const Mode& mode : modes)
    for (const int64_t rows : {1, 2, 4, 8}) {
      auto s = make_shape<SampleArgs>("decode", std::string(mode.name) + " rows=" + std::to_string(rows),
                                      {{"rows", rows}, {"vocab", kVocab}, {"mode", mode.name}});
      s.bytes = 2.0 * double(rows * kVocab) + (mode.penalties ? 5.0 * double(rows * kVocab) : 0.0) +
                double(rows) * double(sizeof(DeviceSampling) + 8 + 8 + 4);
      s.headline = rows == 1 && !mode.penalties;
      std::vector<DeviceSampling> params(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        DeviceSampling& d = params[size_t(r)];
        d.temperature = mode.temperature;
        d.top_k = mode.top_k;
        d.top_p = mode.top_p;
        d.min_p = 0.0f;
        d.repetition_penalty = mode.penalties ? 1.1f : 1.0f;
        d.presence_penalty = mode.penalties ? 0.5f : 0.0f;
        d.frequency_penalty = mode.penalties ? 0.2f : 0.0f;
        d.seed = uint64_t(1000 + r);
      }
      // A history of 512 tokens per row: counts of generated ids, and prompt flags.
      std::vector<int32_t> counts(mode.penalties ? static_cast<size_t>(rows * kVocab) : 1, 0);
      std::vector<uint8_t> in_prompt(mode.penalties ? static_cast<size_t>(rows * kVocab) : 1, 0);
      if (mode.penalties)
        for (int64_t r = 0; r < rows; ++r)
          for (const int32_t id : random_ints(512, 0, int32_t(kVocab - 1), 41 + uint64_t(r))) {
            counts[size_t(r * kVocab + id)] += 1;
            in_prompt[size_t(r * kVocab + (id * 7) % kVocab)] = 1;
          }
      const bool penalties = mode.penalties;
      s.buffers = {
          random_bf16("logits", rows * kVocab, -10, 10),
          host_values("params", params),
          host_values("token_counts", counts),
          host_values("in_prompt", in_prompt),
          host_values("step", std::vector<uint64_t>(static_cast<size_t>(rows), 0), Role::kInOut),
          output("out_tokens", rows, 4),
          scratch("workspace",
                  size_t(std::max<int64_t>(kernels::sample_workspace_floats(rows, kVocab), 1)) * 4, true)};
      s.bind = [rows, penalties](const std::vector<void*>& p) {
        return SampleArgs{as<bf16>(p[0]),
                          as<DeviceSampling>(p[1]),
                          penalties ? as<int32_t>(p[2]) : nullptr,
                          penalties ? as<uint8_t>(p[3]) : nullptr,
                          as<uint64_t>(p[4]),
                          as<int32_t>(p[5]),
                          rows,
                          kVocab,
                          as<float>(p[6])};
      };
      shapes.push_back(std::move(s));
    }
  return shapes;
}

// ---- results ----------------------------------------------------------------------------------------------
json row_json(const Row& r, const Peaks& peaks) {
  json j = {{"op", r.op},
            {"regime", r.regime},
            {"shape", r.shape},
            {"params", r.params},
            {"version", r.version},
            {"status", r.status},
            {"bytes", r.bytes},
            {"flops", r.flops},
            {"headline", r.headline},
            {"baseline", r.baseline},
            {"composite", r.composite},
            {"cublas", r.cublas},
            {"kernels_per_launch", r.kernels_per_launch}};
  if (!r.note.empty()) j["note"] = r.note;
  if (!r.ok()) return j;
  bool memory_bound = true;
  j["median_us"] = r.us.median;
  j["min_us"] = r.us.min;
  j["max_us"] = r.us.max;
  j["runs"] = r.us.runs;
  j["launches_per_run"] = r.launches_per_run;
  j["rotated_sets"] = r.sets;
  j["rotation_bytes"] = r.rotation_bytes;
  j["timing"] = r.timing;
  j["GB_s"] = r.gb_s();
  j["TFLOP_s"] = r.tflops();
  j["pct_of_peak"] = percent_of_peak(r, peaks, &memory_bound);
  j["bound"] = memory_bound ? "memory" : "compute";
  j["speedup_vs_baseline"] = r.speedup_vs_baseline > 0 ? json(r.speedup_vs_baseline) : json(nullptr);
  j["speedup_vs_cublas"] = r.speedup_vs_cublas > 0 ? json(r.speedup_vs_cublas) : json(nullptr);
  return j;
}

json document(const Context& ctx, bool complete, const std::string& fatal_message) {
  json j;
  j["kind"] = "bench_runner";
  j["timestamp"] = ctx.started;
  j["git_commit"] = ctx.commit;
  j["gpu"] = ctx.gpu.name;
  j["sm_count"] = ctx.gpu.sm_count;
  j["l2_bytes"] = ctx.gpu.l2_bytes;
  j["driver_version"] = ctx.gpu.driver_version;
  j["runtime_version"] = ctx.gpu.runtime_version;
  j["peaks"] = {{"read_GB_s", ctx.peaks.read_GB_s},
                {"bf16_tflops", ctx.peaks.bf16_tflops},
                {"source", ctx.peaks.source}};
  j["options"] = {{"kernels", ctx.options.kernels},
                  {"regime", ctx.options.regime},
                  {"versions", ctx.options.versions},
                  {"repeat", ctx.options.repeat},
                  {"sample_ms", ctx.options.sample_ms},
                  {"rotation_factor", ctx.options.rotation_factor},
                  {"pdl", ctx.options.pdl},
                  {"time_budget_s", ctx.options.time_budget_s}};
  j["method"] =
      "median of per-launch times over timed runs (CUDA events around a CUDA-graph replay of many "
      "launches rotating over input sets that together exceed rotation_factor x L2, or over fewer "
      "(rotation_bytes) for a kernel more than 20x slower than the memory time of its inputs); bytes: "
      "each input read once, each output written once; pct_of_peak: max(GB_s / read peak, TFLOP_s / bf16 "
      "peak); composites are timed on the fused op's byte count";
  j["complete"] = complete;
  if (!fatal_message.empty()) j["fatal"] = fatal_message;
  j["elapsed_s"] = ctx.elapsed_s();
  j["results"] = json::array();
  for (const Row& r : ctx.rows) j["results"].push_back(row_json(r, ctx.peaks));
  return j;
}

void write_document(const Context& ctx, bool complete, const std::string& fatal_message) {
  if (!ctx.options.write_json) return;
  const std::string tmp = ctx.json_path + ".tmp";
  {
    std::ofstream file(tmp);
    file << document(ctx, complete, fatal_message).dump(1) << "\n";
    if (!file) {
      std::fprintf(stderr, "error: cannot write %s\n", tmp.c_str());
      std::exit(1);
    }
  }
  std::filesystem::rename(tmp, ctx.json_path);
}

void write_json(Context& ctx) {
  write_document(ctx, false, "");
}

[[noreturn]] void fatal(Context& ctx, const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: the CUDA context is unusable after %s\n", message.c_str());
  write_document(ctx, false, message);
  if (ctx.options.write_json) std::fprintf(stderr, "partial results: %s\n", ctx.json_path.c_str());
  std::exit(1);
}

void print_summary(const Context& ctx) {
  std::printf(
      "\nSUMMARY best version per headline shape (%%peak: roofline fraction, m = memory-bound, "
      "c = compute-bound; vs_base: over the op's baseline)\n");
  std::printf("%-18s %-7s %-30s %-26s %10s %9s %7s %9s %10s\n", "op", "regime", "shape", "best", "median_us",
              "%peak", "vs_base", "vs_cublas", "base_us");
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Row*>> groups;
  for (const Row& r : ctx.rows) {
    if (!r.headline) continue;
    const std::string key = r.op + "|" + r.regime + "|" + r.shape;
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&r);
  }
  for (const std::string& key : order) {
    const Row *best = nullptr, *base = nullptr;
    for (const Row* r : groups[key]) {
      if (r->baseline && r->ok()) base = r;
      if (!r->ok() || r->cublas || r->composite) continue;
      if (!best || r->us.median < best->us.median) best = r;
    }
    const Row& any = *groups[key].front();
    if (!best) {
      std::printf("%-18s %-7s %-30s %s\n", any.op.c_str(), any.regime.c_str(), any.shape.c_str(),
                  "no version ran");
      continue;
    }
    bool memory_bound = true;
    const double pct = percent_of_peak(*best, ctx.peaks, &memory_bound);
    char pct_text[32];
    std::snprintf(pct_text, sizeof pct_text, "%.1f%% %s", pct, memory_bound ? "m" : "c");
    char base_text[32] = "-";
    if (base) std::snprintf(base_text, sizeof base_text, "%.2f", base->us.median);
    std::printf("%-18s %-7s %-30s %-26s %10.2f %9s %7s %9s %10s\n", best->op.c_str(), best->regime.c_str(),
                best->shape.c_str(), best->version.c_str(), best->us.median, pct_text,
                speedup_text(best->speedup_vs_baseline).c_str(),
                speedup_text(best->speedup_vs_cublas).c_str(), base_text);
  }
}

// ---- setup ------------------------------------------------------------------------------------------------
std::string git_commit() {
  if (const char* env = std::getenv("QWEN3_GIT_COMMIT"); env && *env) return env;
  for (const std::string& dir : {std::string(QWEN3_SOURCE_DIR), std::string(".")}) {
    const std::string command = "git -C '" + dir + "' describe --always --dirty --abbrev=12 2>/dev/null";
    if (FILE* pipe = popen(command.c_str(), "r")) {
      char buffer[128] = {};
      const bool got = std::fgets(buffer, sizeof buffer, pipe) != nullptr;
      pclose(pipe);
      std::string text = got ? buffer : "";
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
      if (!text.empty()) return text;
    }
  }
  return "unknown (no git checkout here; set QWEN3_GIT_COMMIT)";
}

// The newest peaks-*.json measured on this GPU model: --peaks FILE, else the newest in the output folder, the
// source tree's bench/results or ./bench/results (core/peaks.h).
Peaks load_peaks(const Options& o, const GpuInfo& gpu) {
  namespace fs = std::filesystem;
  // Peaks from a file's JSON; none where its fields are missing or not numbers.
  auto from_json = [](const fs::path& path, const json& j) -> std::optional<Peaks> {
    try {
      Peaks p;
      p.read_GB_s = j.at("read_GB_s").get<double>();
      p.bf16_tflops = j.at("bf16_tflops").get<double>();
      p.source = path.string() + " (" + j.value("gpu", std::string("?")) + ", " +
                 j.value("timestamp", std::string("?")) + ")";
      return p;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  if (!o.peaks_file.empty()) {
    try {
      std::ifstream file(o.peaks_file);
      if (auto p = from_json(o.peaks_file, json::parse(file))) return *p;
      throw std::runtime_error("read_GB_s and bf16_tflops must be numbers");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: cannot read peaks file %s: %s\n", o.peaks_file.c_str(), e.what());
      std::exit(2);
    }
  }
  for (const auto& [file, j] : measured_peaks({fs::path(o.out_dir), fs::path(QWEN3_SOURCE_DIR) / "bench" / "results",
                                                fs::path("bench") / "results"},
                                               gpu.name))
    if (auto p = from_json(file, j)) return *p;
  return Peaks{};
}

}  // namespace
}  // namespace qwen3::bench

int main(int argc, char** argv) {
  using namespace qwen3::bench;
  const std::vector<std::string> all_ops = {
      "embedding", "rmsnorm",   "add_rmsnorm", "gemm",           "rope", "qk_norm_rope_cache",
      "kv_write",  "attention", "qkv_attention", "silu_mul", "gate_up_swiglu", "add", "sample",
      "gemv_residual", "norm_gemv", "norm_gate_up_swiglu"};
  CLI::App app{"bench_runner: every kernel version at Qwen3-8B shapes, decode and prefill"};
  Context ctx;
  Options& o = ctx.options;
  o.out_dir = QWEN3_SOURCE_DIR "/bench/results";
  std::vector<std::string> kernels_list;
  bool list = false;
  app.add_option(
         "--kernels", kernels_list,
         "ops to run (comma-separated): " +
             [&] {
               std::string names;
               for (const auto& n : all_ops) names += (names.empty() ? "" : ", ") + n;
               return names;
             }())
      ->delimiter(',')
      ->check(CLI::IsMember(all_ops));
  app.add_option("--regime", o.regime, "decode, prefill or all")
      ->check(CLI::IsMember({"decode", "prefill", "all"}))
      ->capture_default_str();
  app.add_option("--versions", o.versions,
                 "only versions whose name contains one of these (comma-separated); the baseline and cuBLAS "
                 "always run")
      ->delimiter(',');
  app.add_option("--repeat", o.repeat, "timed runs per case (median reported)")
      ->check(CLI::Range(3, 1000))
      ->capture_default_str();
  app.add_option("--out", o.out_dir, "folder for runner-<UTC>.json")->capture_default_str();
  app.add_option("--peaks", o.peaks_file, "peaks JSON to use (default: the newest for this GPU)");
  app.add_option("--time-budget-s", o.time_budget_s,
                 "stop starting new shapes after this many seconds (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--sample-ms", o.sample_ms, "target duration of one timed run")
      ->check(CLI::Range(0.1, 100.0))
      ->capture_default_str();
  std::string pdl = "on";
  app.add_option("--pdl", pdl,
                 "programmatic dependent launch between consecutive launches (the engine's fast path)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_flag("!--no-json", o.write_json, "print the table only");
  app.add_flag("--list", list, "list every op's versions and exit");
  CLI11_PARSE(app, argc, argv);
  o.kernels = std::set<std::string>(kernels_list.begin(), kernels_list.end());
  o.pdl = pdl == "on";

  if (list) {
    auto show = [](const char* op, const auto& versions) {
      for (const auto& v : versions) std::printf("%-20s %-26s %s\n", op, v.name, v.summary);
    };
    show("embedding", qwen3::kernels::embedding_versions());
    show("rmsnorm", qwen3::kernels::rmsnorm_versions());
    show("add_rmsnorm", qwen3::kernels::add_rmsnorm_versions());
    show("gemm", qwen3::kernels::gemm_versions());
    show("rope", qwen3::kernels::rope_versions());
    show("qk_norm_rope_cache", qwen3::kernels::qk_norm_rope_cache_versions());
    show("kv_write", qwen3::kernels::kv_write_versions());
    show("attention", qwen3::kernels::attention_versions());
    show("qkv_attention", qwen3::kernels::qkv_attention_versions());
    show("silu_mul", qwen3::kernels::silu_mul_versions());
    show("gate_up_swiglu", qwen3::kernels::gate_up_swiglu_versions());
    show("add", qwen3::kernels::add_versions());
    show("sample", qwen3::kernels::sample_versions());
    show("gemv_residual", qwen3::kernels::gemv_residual_versions());
    show("norm_gemv", qwen3::kernels::norm_gemv_versions());
    show("norm_gate_up_swiglu", qwen3::kernels::norm_gate_up_swiglu_versions());
    return 0;
  }

  ctx.gpu = gpu_info();
  qwen3::kernels::set_programmatic_dependent_launch(o.pdl);
  o.pdl = qwen3::kernels::programmatic_dependent_launch();  // off below sm_90
  ctx.peaks = load_peaks(o, ctx.gpu);
  ctx.commit = git_commit();
  ctx.started = utc_time(false);
  ctx.deadline_s = o.time_budget_s;
  BENCH_CHECK(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
  if (o.write_json) {
    std::filesystem::create_directories(o.out_dir);
    ctx.json_path = (std::filesystem::path(o.out_dir) / ("runner-" + utc_time(true) + ".json")).string();
  }
  std::printf("gpu: %s (%d SMs, %.0f MB L2) | commit %s\n", ctx.gpu.name.c_str(), ctx.gpu.sm_count,
              double(ctx.gpu.l2_bytes) / 1e6, ctx.commit.c_str());
  std::printf("peaks: read %.0f GB/s, bf16 %.0f TFLOP/s from %s\n", ctx.peaks.read_GB_s,
              ctx.peaks.bf16_tflops, ctx.peaks.source.c_str());
  std::printf(
      "method: median of %d runs; a run is a CUDA-graph replay of launches rotating over input sets "
      "> %.0fx L2, PDL %s; bytes = each input read once + each output written once; %%peak = max(GB/s / "
      "read peak, TFLOP/s / bf16 peak)\n\n",
      o.repeat, o.rotation_factor, o.pdl ? "on" : "off");
  print_header();

  const auto embedding = embedding_shapes();
  const auto rmsnorm = rmsnorm_shapes();
  const auto add_rmsnorm = add_rmsnorm_shapes();
  const auto gemm = gemm_shapes();
  const auto rope = rope_shapes();
  const auto qk = qk_norm_rope_cache_shapes();
  const auto kv_write = kv_write_shapes();
  const auto attention = attention_shapes();
  const auto qkv_attention = qkv_attention_shapes();
  const auto silu_mul = silu_mul_shapes();
  const auto gate_up = gate_up_swiglu_shapes();
  const auto add = add_shapes();
  const auto sample = sample_shapes();
  const auto gemv_residual = gemv_residual_shapes();
  const auto norm_gemv = norm_gemv_shapes();
  const auto norm_gate_up = norm_gate_up_swiglu_shapes();
  for (const char* regime : {"decode", "prefill"}) {
    if (o.regime != "all" && o.regime != regime) continue;
    // The ops of a decode step in the order the engine runs them.
    run_op(ctx, "embedding", regime, registry_candidates(qwen3::kernels::embedding_versions()), embedding);
    run_op(ctx, "rmsnorm", regime, registry_candidates(qwen3::kernels::rmsnorm_versions()), rmsnorm);
    run_op(ctx, "gemm", regime, gemm_candidates(), gemm);
    run_op(ctx, "rope", regime, registry_candidates(qwen3::kernels::rope_versions()), rope);
    run_op(ctx, "qk_norm_rope_cache", regime, qk_norm_rope_cache_candidates(), qk);
    run_op(ctx, "kv_write", regime, registry_candidates(qwen3::kernels::kv_write_versions()), kv_write);
    run_op(ctx, "attention", regime, registry_candidates(qwen3::kernels::attention_versions()), attention);
    run_op(ctx, "qkv_attention", regime, registry_candidates(qwen3::kernels::qkv_attention_versions()),
           qkv_attention);
    run_op(ctx, "add_rmsnorm", regime, registry_candidates(qwen3::kernels::add_rmsnorm_versions()),
           add_rmsnorm);
    run_op(ctx, "silu_mul", regime, registry_candidates(qwen3::kernels::silu_mul_versions()), silu_mul);
    run_op(ctx, "gate_up_swiglu", regime, gate_up_swiglu_candidates(), gate_up);
    run_op(ctx, "add", regime, registry_candidates(qwen3::kernels::add_versions()), add);
    run_op(ctx, "sample", regime, registry_candidates(qwen3::kernels::sample_versions()), sample);
    // The fused decode GEMVs (decode shapes only).
    run_op(ctx, "norm_gemv", regime, registry_candidates(qwen3::kernels::norm_gemv_versions()), norm_gemv);
    run_op(ctx, "gemv_residual", regime, registry_candidates(qwen3::kernels::gemv_residual_versions()),
           gemv_residual);
    run_op(ctx, "norm_gate_up_swiglu", regime,
           registry_candidates(qwen3::kernels::norm_gate_up_swiglu_versions()), norm_gate_up);
  }
  print_summary(ctx);
  write_document(ctx, true, "");
  size_t problems = 0;
  for (const Row& r : ctx.rows) problems += !r.ok() && r.status != "unsupported";
  if (o.write_json) std::printf("\nwrote %s (%zu results)\n", ctx.json_path.c_str(), ctx.rows.size());
  if (problems)
    std::printf("%zu cases did not run cleanly (errors, unwritten outputs or the time budget)\n", problems);
  BENCH_CHECK(cudaStreamDestroy(ctx.stream));
  return ctx.failed ? 1 : 0;
}
