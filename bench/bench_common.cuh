// What measure_peaks and bench_runner share: checked CUDA calls that end the program loudly, the device
// description recorded with every result, random device fills (never time on zeros), the poison check, event
// timing and medians. Included by exactly one translation unit per program.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

namespace qwen3::bench {

// What is being measured, named in the error message if a CUDA call fails.
inline std::string& current_case() {
  static std::string name;
  return name;
}

// Any CUDA failure ends the program: a benchmark that carries on after an error reports garbage.
inline void check_cuda(cudaError_t status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  std::fflush(stdout);
  std::fprintf(stderr, "error: CUDA %s (%s) in %s at %s:%d%s%s\n", cudaGetErrorName(status),
               cudaGetErrorString(status), what, file, line,
               current_case().empty() ? "" : " while measuring ", current_case().c_str());
  std::exit(1);
}
#define BENCH_CHECK(call) ::qwen3::bench::check_cuda((call), #call, __FILE__, __LINE__)

struct GpuInfo {
  std::string name;
  int device = 0, sm_count = 0, cc_major = 0, cc_minor = 0;
  int64_t l2_bytes = 0, memory_bytes = 0;
  int sm_clock_mhz = 0;       // maximum (boost) clock; clocks are left as found
  double datasheet_GB_s = 0;  // 2 x memory clock x bus width, for reference only
  int driver_version = 0, runtime_version = 0;
};

inline GpuInfo gpu_info() {
  GpuInfo info;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::fprintf(stderr, "error: no CUDA device (%s)\n", cudaGetErrorString(status));
    std::exit(1);
  }
  BENCH_CHECK(cudaGetDevice(&info.device));
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, info.device));
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.l2_bytes = prop.l2CacheSize;
  info.memory_bytes = int64_t(prop.totalGlobalMem);
  int clock_khz = 0, memory_clock_khz = 0, bus_bits = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, info.device));
  BENCH_CHECK(cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, info.device));
  BENCH_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, info.device));
  info.sm_clock_mhz = clock_khz / 1000;
  info.datasheet_GB_s = 2.0 * double(memory_clock_khz) * 1e3 * double(bus_bits) / 8.0 / 1e9;
  BENCH_CHECK(cudaDriverGetVersion(&info.driver_version));
  BENCH_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  return info;
}

// UTC time: "20261129T153012Z" for file names, ISO 8601 for JSON.
inline std::string utc_time(bool for_file_name) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, for_file_name ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

// Writes a tool's JSON to `out`, or where that is empty to bench/results/<stem>-<UTC time>.json; 0 when written,
// else 1 with the reason on stderr (the tool's exit status).
inline int write_results(std::string out, const std::string& stem, const std::string& json) {
  if (out.empty()) out = std::string(QWEN3_SOURCE_DIR) + "/bench/results/" + stem + "-" + utc_time(true) + ".json";
  FILE* f = std::fopen(out.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "error: cannot write %s\n", out.c_str());
    return 1;
  }
  std::fputs(json.c_str(), f);
  std::fclose(f);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

// ---- random device data -----------------------------------------------------------------------------------
__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

namespace detail {

// bf16 uniform in [lo, hi) with the zero bit pattern replaced, so no element is exactly 0.
__global__ void fill_random_bf16_kernel(uint16_t* data, size_t count, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const float u = float(splitmix64(seed ^ splitmix64(i)) >> 40) * 0x1.0p-24f;
    const float value = lo + (hi - lo) * u;
    uint32_t bits = __float_as_uint(value);
    bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
    uint16_t b = uint16_t(bits >> 16);
    if ((b & 0x7fff) == 0) b = 0x3c00;  // 2^-7 instead of +-0
    data[i] = b;
  }
}

__global__ void fill_random_u32_kernel(uint32_t* data, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t v = uint32_t(splitmix64(seed ^ splitmix64(i)));
    data[i] = v ? v : 1u;
  }
}

// Counts elements whose bytes are all 0xFF (the poison pattern): 2-byte or 4-byte elements.
template <class T>
__global__ void count_poison_kernel(const T* data, size_t count, unsigned long long* found) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    mine += data[i] == T(~T(0));
  if (mine) atomicAdd(found, mine);
}

inline unsigned grid_for(size_t count) {
  return unsigned(std::min<size_t>((count + 255) / 256, 132 * 32));
}

}  // namespace detail

inline void fill_random_bf16(void* data, size_t count, uint64_t seed, float lo, float hi,
                             cudaStream_t stream) {
  if (count == 0) return;
  detail::fill_random_bf16_kernel<<<detail::grid_for(count), 256, 0, stream>>>(static_cast<uint16_t*>(data),
                                                                               count, seed, lo, hi);
  BENCH_CHECK(cudaGetLastError());
}

inline void fill_random_u32(void* data, size_t count, uint64_t seed, cudaStream_t stream) {
  if (count == 0) return;
  detail::fill_random_u32_kernel<<<detail::grid_for(count), 256, 0, stream>>>(static_cast<uint32_t*>(data),
                                                                              count, seed);
  BENCH_CHECK(cudaGetLastError());
}

// Adds the number of still-poisoned elements of data (bytes / elem_bytes elements) to *found (device).
inline void count_poison(const void* data, size_t bytes, int elem_bytes, unsigned long long* found,
                         cudaStream_t stream) {
  if (bytes == 0) return;
  if (elem_bytes == 4) {
    const size_t count = bytes / 4;
    detail::count_poison_kernel<<<detail::grid_for(count), 256, 0, stream>>>(
        static_cast<const uint32_t*>(data), count, found);
  } else {
    const size_t count = bytes / 2;
    detail::count_poison_kernel<<<detail::grid_for(count), 256, 0, stream>>>(
        static_cast<const uint16_t*>(data), count, found);
  }
  BENCH_CHECK(cudaGetLastError());
}

// ---- timing -----------------------------------------------------------------------------------------------
class EventPair {
 public:
  EventPair() {
    BENCH_CHECK(cudaEventCreate(&start_));
    BENCH_CHECK(cudaEventCreate(&stop_));
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  void start(cudaStream_t stream) { BENCH_CHECK(cudaEventRecord(start_, stream)); }
  void stop(cudaStream_t stream) { BENCH_CHECK(cudaEventRecord(stop_, stream)); }
  float elapsed_ms() {
    BENCH_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// ms a launch: launch(i) for i in [0, launches) back to back on the default stream, once untimed (warm-up), then
// `repeat` timed passes; the sorted passes' element repeat / 2 (the upper median), divided by `launches`. For tools
// that rotate one kernel over copies of its data larger than the L2 (kv_read_pattern, ring_stream).
template <class Launch>
float median_ms_per_launch(int launches, int repeat, Launch&& launch) {
  for (int i = 0; i < launches; ++i) launch(i);
  BENCH_CHECK(cudaGetLastError());
  EventPair events;
  std::vector<float> ms(static_cast<size_t>(repeat), 0.0f);
  for (float& pass : ms) {
    events.start(nullptr);
    for (int i = 0; i < launches; ++i) launch(i);
    events.stop(nullptr);
    pass = events.elapsed_ms();
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] / float(launches);
}

struct Stats {
  double median = 0, min = 0, max = 0;
  int runs = 0;
};

inline Stats stats_of(std::vector<double> values) {
  Stats s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  s.min = values.front();
  s.max = values.back();
  s.runs = int(n);
  return s;
}

}  // namespace qwen3::bench
