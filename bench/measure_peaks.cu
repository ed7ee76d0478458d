// measure_peaks: the ceilings every "% of peak" column is measured against, read on the GPU at hand.
//   * streaming read: 16-byte loads over an ~8 GB buffer, grid-stride, several loads in flight per thread,
//   the
//     values folded into a sum the compiler must keep (best of a few grid sizes);
//   * device-to-device copy through cudaMemcpyAsync and through a 16-byte copy kernel (bytes read + written);
//   * cuBLAS bf16 GEMM 8192^3 with fp32 accumulation (the tensor-core rate), and a decode-shaped cuBLAS GEMV
//     (49152 x 4096, M = 1) for comparison with our own GEMV;
//   * a plain fp32 FMA kernel.
// Each is timed with CUDA events after warm-up, median of --repeat runs (>= 10), on random non-zero data.
// Prints a short table and writes <out>/peaks-<UTC>.json (read by bench_runner for its "% of peak").
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_common.cuh"

namespace qwen3::bench {
namespace {

void check_cublas(cublasStatus_t status, const char* what, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "error: cuBLAS status %d in %s at line %d\n", int(status), what, line);
  std::exit(1);
}
#define CUBLAS_CHECK(call) check_cublas((call), #call, __LINE__)

constexpr int kLoadsInFlight = 4;  // independent 16-byte loads per thread per iteration

// Sums every 32-bit word of the buffer: the loads cannot be dropped, and the sum costs far less than the
// loads.
__global__ void read_kernel(const uint4* __restrict__ data, size_t vectors, unsigned long long* sink) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  uint32_t sum = 0;
  for (; i + (kLoadsInFlight - 1) * stride < vectors; i += kLoadsInFlight * stride) {
    uint4 v[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) v[u] = data[i + u * stride];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) sum += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  for (; i < vectors; i += stride) {
    const uint4 v = data[i];
    sum += v.x + v.y + v.z + v.w;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(sink, (unsigned long long)sum);
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t vectors) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + (kLoadsInFlight - 1) * stride < vectors; i += kLoadsInFlight * stride) {
    uint4 v[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) dst[i + u * stride] = v[u];
  }
  for (; i < vectors; i += stride) dst[i] = src[i];
}

constexpr int kFmaChains = 8;  // independent dependency chains hide the FMA latency
constexpr int kFmaIterations = 4096;

// Each thread runs kFmaChains chains of kFmaIterations dependent FMAs with runtime operands.
__global__ void fma_kernel(float multiplier, float addend, float* sink) {
  float x[kFmaChains];
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) x[c] = float(threadIdx.x + c);
  for (int it = 0; it < kFmaIterations; ++it) {
#pragma unroll
    for (int c = 0; c < kFmaChains; ++c) x[c] = fmaf(x[c], multiplier, addend);
  }
  float sum = 0;
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) sum += x[c];
  if (sum == 1234.5f) sink[0] = sum;  // practically never true, but the compiler cannot know
}

struct Measurement {
  std::string what, unit, config;
  Stats stats;    // of the rate, per run
  double amount;  // bytes or flops per run
};

// Runs `launch` warmup times, then `repeat` times each between events; returns rates amount / time.
Measurement measure(const std::string& what, const std::string& unit, double amount, double scale, int warmup,
                    int repeat, cudaStream_t stream, const std::function<void()>& launch) {
  for (int i = 0; i < warmup; ++i) launch();
  BENCH_CHECK(cudaStreamSynchronize(stream));
  BENCH_CHECK(cudaGetLastError());
  EventPair events;
  std::vector<double> rates;
  for (int i = 0; i < repeat; ++i) {
    events.start(stream);
    launch();
    events.stop(stream);
    rates.push_back(amount / (double(events.elapsed_ms()) * 1e-3) / scale);
  }
  BENCH_CHECK(cudaGetLastError());
  return {what, unit, "", stats_of(rates), amount};
}

// y (m, n) = x (m, k) · w (n, k)ᵀ in row-major bf16, fp32 accumulation: the column-major view is yᵀ = w · xᵀ.
void cublas_gemm(cublasHandle_t handle, const void* x, const void* w, void* y, int m, int n, int k) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, x,
                            CUDA_R_16BF, k, &beta, y, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

}  // namespace
}  // namespace qwen3::bench

int main(int argc, char** argv) {
  using namespace qwen3::bench;
  CLI::App app{
      "measure_peaks: the streaming-read, copy, bf16 tensor-core and fp32 ceilings of the current GPU"};
  std::string out_dir = QWEN3_SOURCE_DIR "/bench/results";
  double read_gb = 8.0;
  int repeat = 20;
  bool write_json = true;
  app.add_option("--out", out_dir, "folder for peaks-<UTC>.json")->capture_default_str();
  app.add_option("--read-gb", read_gb, "size of the streaming-read buffer in GB (1e9 bytes)")
      ->check(CLI::Range(0.5, 64.0))
      ->capture_default_str();
  app.add_option("--repeat", repeat, "timed runs per measurement (median reported)")
      ->check(CLI::Range(10, 1000))
      ->capture_default_str();
  app.add_flag("!--no-json", write_json, "print the table only");
  CLI11_PARSE(app, argc, argv);

  const GpuInfo gpu = gpu_info();
  cudaStream_t stream = nullptr;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("gpu: %s (sm_%d%d, %d SMs, %.0f MB L2, %.1f GB, max SM clock %d MHz, datasheet %.0f GB/s)\n",
              gpu.name.c_str(), gpu.cc_major, gpu.cc_minor, gpu.sm_count, double(gpu.l2_bytes) / 1e6,
              double(gpu.memory_bytes) / 1e9, gpu.sm_clock_mhz, gpu.datasheet_GB_s);

  std::vector<Measurement> results;
  const int warmup = 3;

  // ---- streaming read and copies over one buffer of read_gb (16-byte vectors) -----------------------------
  const size_t read_vectors = size_t(read_gb * 1e9) / 16;
  uint4* buffer = nullptr;            // (read_vectors) random non-zero words
  uint4* copy_destination = nullptr;  // (read_vectors / 2)
  unsigned long long* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&buffer, read_vectors * 16));
  BENCH_CHECK(cudaMalloc(&copy_destination, read_vectors / 2 * 16));
  BENCH_CHECK(cudaMalloc(&sink, sizeof(unsigned long long)));
  fill_random_u32(buffer, read_vectors * 4, 0x5eed, stream);
  BENCH_CHECK(cudaMemsetAsync(sink, 0, sizeof(unsigned long long), stream));

  Measurement best_read{};
  for (const int blocks_per_sm : {2, 4, 8}) {
    const unsigned blocks = unsigned(gpu.sm_count * blocks_per_sm), threads = 512;
    Measurement m = measure("streaming read", "GB/s", double(read_vectors) * 16, 1e9, warmup, repeat, stream,
                            [&] { read_kernel<<<blocks, threads, 0, stream>>>(buffer, read_vectors, sink); });
    m.config = std::to_string(blocks_per_sm) + " x 512-thread blocks per SM, " +
               std::to_string(kLoadsInFlight) + " x 16 B loads in flight per thread";
    if (m.stats.median > best_read.stats.median) best_read = m;
  }
  best_read.what = "streaming read, 16 B loads, " + std::to_string(int(read_gb + 0.5)) + " GB";
  results.push_back(best_read);

  const size_t half = read_vectors / 2;
  Measurement memcpy_copy = measure(
      "copy, cudaMemcpyAsync D2D (read + write)", "GB/s", 2.0 * double(half) * 16, 1e9, warmup, repeat,
      stream, [&] {
        BENCH_CHECK(cudaMemcpyAsync(copy_destination, buffer, half * 16, cudaMemcpyDeviceToDevice, stream));
      });
  results.push_back(memcpy_copy);
  Measurement kernel_copy = measure(
      "copy, 16 B kernel (read + write)", "GB/s", 2.0 * double(half) * 16, 1e9, warmup, repeat, stream,
      [&] { copy_kernel<<<unsigned(gpu.sm_count * 4), 512, 0, stream>>>(buffer, copy_destination, half); });
  results.push_back(kernel_copy);
  BENCH_CHECK(cudaFree(copy_destination));
  BENCH_CHECK(cudaFree(buffer));

  // ---- cuBLAS: bf16 GEMM 8192^3 and a decode-shaped GEMV --------------------------------------------------
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  int cublas_version = 0;
  CUBLAS_CHECK(cublasGetVersion(handle, &cublas_version));
  {
    const int size = 8192;
    void *x = nullptr, *w = nullptr, *y = nullptr;  // (8192, 8192) bf16 each
    BENCH_CHECK(cudaMalloc(&x, size_t(size) * size * 2));
    BENCH_CHECK(cudaMalloc(&w, size_t(size) * size * 2));
    BENCH_CHECK(cudaMalloc(&y, size_t(size) * size * 2));
    fill_random_bf16(x, size_t(size) * size, 1, -1.0f, 1.0f, stream);
    fill_random_bf16(w, size_t(size) * size, 2, -1.0f, 1.0f, stream);
    results.push_back(measure("cuBLAS bf16 GEMM 8192^3, fp32 accumulation", "TFLOP/s",
                              2.0 * size * double(size) * size, 1e12, warmup, repeat, stream,
                              [&] { cublas_gemm(handle, x, w, y, size, size, size); }));
    BENCH_CHECK(cudaFree(x));
    BENCH_CHECK(cudaFree(w));
    BENCH_CHECK(cudaFree(y));
  }
  {
    const int n = 49152, k = 4096;
    void *x = nullptr, *w = nullptr, *y = nullptr;  // x (1, k), w (n, k), y (1, n)
    BENCH_CHECK(cudaMalloc(&x, size_t(k) * 2));
    BENCH_CHECK(cudaMalloc(&w, size_t(n) * k * 2));
    BENCH_CHECK(cudaMalloc(&y, size_t(n) * 2));
    fill_random_bf16(x, size_t(k), 3, -1.0f, 1.0f, stream);
    fill_random_bf16(w, size_t(n) * k, 4, -0.05f, 0.05f, stream);
    results.push_back(measure("cuBLAS bf16 GEMV 49152 x 4096 (M = 1)", "GB/s", 2.0 * (double(n) * k + k + n),
                              1e9, warmup, repeat, stream, [&] { cublas_gemm(handle, x, w, y, 1, n, k); }));
    BENCH_CHECK(cudaFree(x));
    BENCH_CHECK(cudaFree(w));
    BENCH_CHECK(cudaFree(y));
  }
  CUBLAS_CHECK(cublasDestroy(handle));

  // ---- fp32 FMA -------------------------------------------------------------------------------------------
  {
    float* fma_sink = nullptr;
    BENCH_CHECK(cudaMalloc(&fma_sink, sizeof(float)));
    const unsigned blocks = unsigned(gpu.sm_count * 8), threads = 256;
    const double flops = 2.0 * double(blocks) * threads * kFmaChains * kFmaIterations;
    results.push_back(measure("fp32 FMA kernel", "TFLOP/s", flops, 1e12, warmup, repeat, stream,
                              [&] { fma_kernel<<<blocks, threads, 0, stream>>>(0.999f, 0.001f, fma_sink); }));
    BENCH_CHECK(cudaFree(fma_sink));
  }
  BENCH_CHECK(cudaFree(sink));
  BENCH_CHECK(cudaStreamDestroy(stream));

  // ---- report ---------------------------------------------------------------------------------------------
  std::printf("%-46s %9s %9s %9s %-8s %5s\n", "measurement", "median", "min", "max", "unit", "runs");
  for (const Measurement& m : results)
    std::printf("%-46s %9.1f %9.1f %9.1f %-8s %5d\n", m.what.c_str(), m.stats.median, m.stats.min,
                m.stats.max, m.unit.c_str(), m.stats.runs);
  std::printf("read: %s\n", best_read.config.c_str());

  if (write_json) {
    nlohmann::json j;
    j["kind"] = "peaks";
    j["timestamp"] = utc_time(false);
    j["gpu"] = gpu.name;
    j["compute_capability"] = std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor);
    j["sm_count"] = gpu.sm_count;
    j["l2_bytes"] = gpu.l2_bytes;
    j["memory_bytes"] = gpu.memory_bytes;
    j["sm_clock_max_mhz"] = gpu.sm_clock_mhz;
    j["datasheet_GB_s"] = gpu.datasheet_GB_s;
    j["driver_version"] = gpu.driver_version;
    j["runtime_version"] = gpu.runtime_version;
    j["cublas_version"] = cublas_version;
    j["read_GB_s"] = results[0].stats.median;
    j["copy_GB_s"] = results[1].stats.median;
    j["copy_kernel_GB_s"] = results[2].stats.median;
    j["bf16_tflops"] = results[3].stats.median;
    j["cublas_gemv_GB_s"] = results[4].stats.median;
    j["fp32_tflops"] = results[5].stats.median;
    j["read_config"] = best_read.config;
    j["method"] = "CUDA events, " + std::to_string(warmup) + " warm-up runs, median of " +
                  std::to_string(repeat) + " runs, random non-zero data; copies count bytes read + written";
    for (const Measurement& m : results)
      j["details"].push_back({{"what", m.what},
                              {"unit", m.unit},
                              {"median", m.stats.median},
                              {"min", m.stats.min},
                              {"max", m.stats.max},
                              {"runs", m.stats.runs},
                              {"amount_per_run", m.amount}});
    std::filesystem::create_directories(out_dir);
    const std::filesystem::path path = std::filesystem::path(out_dir) / ("peaks-" + utc_time(true) + ".json");
    std::ofstream file(path);
    file << j.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}
