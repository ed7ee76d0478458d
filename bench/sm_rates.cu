// sm_rates: how fast each SM streams its own share of weight rows, and which SMs share a GPC.
//
// Why: every launch of the decode step gives each SM (one CTA per SM) the same bytes, and a launch ends with its
// slowest CTA. In the step the CTAs' ends spread: the MLP's last CTA ends ~1.8 us after the mean, the QKV GEMV's
// ~1.3 us (mlp-trace files, ITERATIONS.md session 12), and at context 8192 ~8 of the attention launch's 128 CTAs
// take ~3 us longer than the others in every layer, on neighbouring block indices (so, plausibly, neighbouring
// SMs). If some SMs stream slower every time (a GPC with more SMs sharing its path to L2, say), a split of the
// bytes by SM would take the tail off; if the slow SMs change from launch to launch, it would not. This tool
// measures that, with nothing else running:
//   1. the GPC map: clusters of 16, 8, 4 and 2 CTAs (one CTA per SM: a cluster runs on one GPC) record their SMs;
//      SMs that ever share a cluster share a GPC (union-find over every cluster seen);
//   2. per-SM stream time: one CTA per SM streams its own contiguous 2.29 MB (the MLP's share of 302 MB) through
//      gemv_ring's ring (3 x 64 KB in flight, the MLP's depth) and dot products, over --launches launches rotating
//      over --layers copies; each CTA stamps %smid, its start and its end (%globaltimer).
// It prints per GPC its SMs and their mean stream time, the spread of the per-SM means, how well the per-SM means
// of the even launches predict those of the odd ones (correlation: near 1 means the slow SMs are the same every
// time), and a launch's span against its mean CTA.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <vector>

#include "bench/bench_common.cuh"
#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/common/ptx.cuh"

namespace qwen3::bench {
namespace {

using kernels::bf16;
using kernels::kWarpSize;
using kernels::gemv_ring::kThreads;  // 512: a 4096-wide bf16 row is one 16-byte piece a thread
constexpr int kGroup = 8;            // rows a ring stage: 64 KB
constexpr int kStages = 3;
constexpr int64_t kHidden = 4096;
using StreamRing = kernels::gemv_ring::Ring<1, kGroup, kStages, kStages>;  // the MLP's ring: 192 KB in flight

// Ids %smid may take here: the SM count with room for gaps. An id past it ends the program (check_sm_id).
int sm_id_bound(int sms) { return 2 * sms; }

void check_sm_id(uint32_t id, int bound) {
  if (id < uint32_t(bound)) return;
  std::fprintf(stderr, "error: %%smid %u is past the %d ids this tool keeps room for\n", id, bound);
  std::exit(1);
}

__device__ __forceinline__ uint32_t sm_id() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Each CTA of a cluster writes its SM at [blockIdx.x]; the dynamic shared memory (the caller's size) keeps one
// CTA per SM, and the spin keeps the cluster's CTAs resident together for a while.
__global__ void cluster_probe(uint32_t* sm_of_cta) {
  extern __shared__ unsigned char keep_one_per_sm[];
  if (threadIdx.x == 0) {
    keep_one_per_sm[0] = 0;
    sm_of_cta[blockIdx.x] = sm_id();
    const uint64_t until = kernels::global_timer_ns() + 20000;
    while (kernels::global_timer_ns() < until) {
    }
  }
}

// CTA c streams rows [c rows, (c + 1) rows) of `weights` through the ring, as the MLP's gate|up phase walks its
// rows, and stamps (smid, start, end) at stamps[3 c ..]. The dot products go to sink so that nothing is elided.
__global__ void __launch_bounds__(kThreads, 1) stream_rows(const bf16* weights, int64_t rows, float* sink,
                                                           uint64_t* stamps) {
  using Ring = StreamRing;
  extern __shared__ __align__(16) unsigned char smem[];
  const uint64_t start = kernels::global_timer_ns();
  const Ring ring{reinterpret_cast<uint4*>(smem), kHidden / 8, kernels::make_evict_first_policy()};
  const bf16* base = weights + int64_t(blockIdx.x) * rows * kHidden;
  const auto row_ptr = [&](int64_t r) { return reinterpret_cast<const uint4*>(base + r * kHidden); };
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  for (int g = 0; g < kStages; ++g) ring.issue(g, g * kGroup, rows, row_ptr);
  float x[1][8];
#pragma unroll
  for (int e = 0; e < 8; ++e) x[0][e] = 1.0f + 0.001f * float(threadIdx.x * 8 + e);
  float total = 0.0f;
  for (int64_t g = 0; g < groups; ++g) {
    uint4 w[kGroup][1];
    ring.read(g, g * kGroup, rows, w);
    total += kernels::gemv_ring::dot_group<1, kGroup>(w, x);
    asm volatile("" ::: "memory");  // this group's shared loads stay before the copies that reuse its stage
    ring.issue(g + kStages, (g + kStages) * kGroup, rows, row_ptr);
  }
  kernels::cp_async_wait<0>();
  __syncthreads();
  if (threadIdx.x % kWarpSize == 0) sink[blockIdx.x * (kThreads / kWarpSize) + threadIdx.x / kWarpSize] = total;
  if (threadIdx.x == 0) {
    stamps[3 * blockIdx.x] = sm_id();
    stamps[3 * blockIdx.x + 1] = start;
    stamps[3 * blockIdx.x + 2] = kernels::global_timer_ns();
  }
}

// Union-find over SM ids.
int find(std::vector<int>& parent, int a) {
  while (parent[size_t(a)] != a) a = parent[size_t(a)] = parent[size_t(parent[size_t(a)])];
  return a;
}

// The GPC of every SM id in [0, sm_ids), as the smallest SM id of its group; -1 for ids never seen.
std::vector<int> gpc_map(int sms, int sm_ids) {
  std::vector<int> parent(static_cast<size_t>(sm_ids));
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<bool> seen(static_cast<size_t>(sm_ids), false);
  uint32_t* sm_of_cta = nullptr;
  BENCH_CHECK(cudaMalloc(&sm_of_cta, size_t(sms) * sizeof(uint32_t)));
  const size_t smem = 120 * 1024;  // two do not fit an SM
  BENCH_CHECK(cudaFuncSetAttribute(cluster_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  BENCH_CHECK(cudaFuncSetAttribute(cluster_probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (const int size : {16, 8, 4, 2}) {
    const int ctas = sms / size * size;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(ctas));
    config.blockDim = dim3(32);
    config.dynamicSmemBytes = smem;
    cudaLaunchAttribute cluster[1];
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim = {unsigned(size), 1, 1};
    config.attrs = cluster;
    config.numAttrs = 1;
    int fit = 0;
    if (cudaOccupancyMaxActiveClusters(&fit, cluster_probe, &config) != cudaSuccess || fit == 0) {
      (void)cudaGetLastError();
      std::printf("clusters of %d: none fit, skipped\n", size);
      continue;
    }
    std::printf("clusters of %d: %d fit at once (%d SMs)\n", size, fit, fit * size);
    for (int pass = 0; pass < 8; ++pass) {
      BENCH_CHECK(cudaLaunchKernelEx(&config, cluster_probe, sm_of_cta));
      std::vector<uint32_t> sm(static_cast<size_t>(ctas), 0);
      BENCH_CHECK(cudaMemcpy(sm.data(), sm_of_cta, sm.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
      for (int c = 0; c < ctas; ++c) {
        check_sm_id(sm[size_t(c)], sm_ids);
        seen[sm[size_t(c)]] = true;
        const int a = find(parent, int(sm[size_t(c)])), b = find(parent, int(sm[size_t(c - c % size)]));
        parent[size_t(std::max(a, b))] = std::min(a, b);
      }
    }
  }
  BENCH_CHECK(cudaFree(sm_of_cta));
  std::vector<int> gpc(static_cast<size_t>(sm_ids), -1);
  for (int s = 0; s < sm_ids; ++s)
    if (seen[size_t(s)]) gpc[size_t(s)] = find(parent, s);
  return gpc;
}

double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = double(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (a[i] - ma) * (b[i] - mb);
    va += (a[i] - ma) * (a[i] - ma);
    vb += (b[i] - mb) * (b[i] - mb);
  }
  return cov / std::sqrt(va * vb);
}

int run(int argc, char** argv) {
  CLI::App app{"sm_rates: per-SM streaming time of one CTA per SM, and the SMs of each GPC"};
  int layers = 36, launches = 360;
  int64_t mb_per_launch = 302;
  app.add_option("--layers", layers, "copies rotated over (keep the total past the L2)")->check(CLI::Range(1, 256));
  app.add_option("--launches", launches, "timed launches (the per-SM means are over these)")
      ->check(CLI::Range(4, 100000));
  app.add_option("--mb", mb_per_launch, "MB a launch streams, split evenly over the SMs (the MLP: 302)")
      ->check(CLI::Range(int64_t(16), int64_t(4096)));
  CLI11_PARSE(app, argc, argv);
  const GpuInfo gpu = gpu_info();
  const int sms = gpu.sm_count;
  if (gpu.cc_major < 9) {
    std::printf("sm_rates needs thread-block clusters (sm_90); this is sm_%d\n", gpu.cc_major * 10);
    return 1;
  }
  const int sm_ids = sm_id_bound(sms);
  const std::vector<int> gpc = gpc_map(sms, sm_ids);

  const int64_t rows = mb_per_launch * 1000000 / (kHidden * 2) / sms;  // rows a CTA
  const size_t copy_bytes = size_t(rows) * size_t(sms) * size_t(kHidden) * 2;
  std::vector<bf16*> copies(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    BENCH_CHECK(cudaMalloc(&copies[size_t(l)], copy_bytes));
    fill_random_bf16(copies[size_t(l)], copy_bytes / 2, uint64_t(l + 1), -0.05f, 0.05f, nullptr);
  }
  float* sink = nullptr;
  uint64_t* stamps = nullptr;
  BENCH_CHECK(cudaMalloc(&sink, size_t(sms) * (kThreads / kWarpSize) * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&stamps, size_t(launches) * sms * 3 * sizeof(uint64_t)));
  const size_t smem = StreamRing::kBytes;
  BENCH_CHECK(cudaFuncSetAttribute(stream_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  current_case() = "stream_rows";
  for (int i = 0; i < layers; ++i)  // warm-up
    stream_rows<<<sms, kThreads, smem>>>(copies[size_t(i % layers)], rows, sink, stamps);
  for (int i = 0; i < launches; ++i)
    stream_rows<<<sms, kThreads, smem>>>(copies[size_t(i % layers)], rows, sink, stamps + size_t(i) * sms * 3);
  BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<uint64_t> host(size_t(launches) * sms * 3);
  BENCH_CHECK(cudaMemcpy(host.data(), stamps, host.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));

  // Per SM id: stream times (end - start) of the even and the odd launches; per launch: span and mean.
  std::vector<std::vector<double>> even(static_cast<size_t>(sm_ids)), odd(static_cast<size_t>(sm_ids));
  std::vector<double> spans, means, tails;
  for (int i = 0; i < launches; ++i) {
    const uint64_t* s = host.data() + size_t(i) * sms * 3;
    uint64_t first = UINT64_MAX, last = 0;
    double sum = 0, mean_end = 0;
    for (int c = 0; c < sms; ++c) {
      check_sm_id(uint32_t(s[3 * c]), sm_ids);
      const int sm = int(s[3 * c]);
      const double us = double(s[3 * c + 2] - s[3 * c + 1]) / 1e3;
      (i % 2 ? odd : even)[size_t(sm)].push_back(us);
      first = std::min(first, s[3 * c + 1]);
      last = std::max(last, s[3 * c + 2]);
      sum += us;
      mean_end += double(s[3 * c + 2]);
    }
    spans.push_back(double(last - first) / 1e3);
    means.push_back(sum / sms);
    tails.push_back((double(last) - mean_end / sms) / 1e3);
  }
  const auto avg = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  };
  std::vector<double> even_means, odd_means, all_means;
  std::vector<int> ids;
  for (int sm = 0; sm < sm_ids; ++sm) {
    if (even[size_t(sm)].empty() || odd[size_t(sm)].empty()) continue;
    ids.push_back(sm);
    even_means.push_back(avg(even[size_t(sm)]));
    odd_means.push_back(avg(odd[size_t(sm)]));
    all_means.push_back(0.5 * (even_means.back() + odd_means.back()));
  }
  std::printf("%s, %d SMs; %lld rows (%.2f MB) a CTA, %d launches over %d copies\n", gpu.name.c_str(), sms,
              static_cast<long long>(rows), double(rows) * kHidden * 2 / 1e6, launches, layers);
  std::printf("a launch: span (first start -> last end) %.2f us, mean CTA %.2f us, last end - mean end %.2f us\n",
              avg(spans), avg(means), avg(tails));
  const auto [lo, hi] = std::minmax_element(all_means.begin(), all_means.end());
  std::printf("per-SM mean stream time: %.2f .. %.2f us (%.1f%% apart); even vs odd launches: correlation %.3f\n",
              *lo, *hi, (*hi / *lo - 1) * 100, correlation(even_means, odd_means));
  // Per GPC: its SMs and their mean time.
  std::map<int, std::vector<size_t>> members;
  for (size_t i = 0; i < ids.size(); ++i) members[gpc[size_t(ids[i])]].push_back(i);
  std::printf("%-6s %4s %10s %10s %10s  SMs\n", "GPC", "SMs", "mean us", "min us", "max us");
  for (const auto& [g, idx] : members) {
    double sum = 0, mn = 1e30, mx = 0;
    for (const size_t i : idx) {
      sum += all_means[i];
      mn = std::min(mn, all_means[i]);
      mx = std::max(mx, all_means[i]);
    }
    std::printf("%-6d %4zu %10.2f %10.2f %10.2f ", g, idx.size(), sum / double(idx.size()), mn, mx);
    for (const size_t i : idx) std::printf(" %d", ids[i]);
    std::printf("\n");
  }
  std::printf("per SM (id: mean us):");
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s %d:%.2f", i % 12 ? "" : "\n ", ids[i], all_means[i]);
  std::printf("\n");
  for (bf16* p : copies) BENCH_CHECK(cudaFree(p));
  BENCH_CHECK(cudaFree(sink));
  BENCH_CHECK(cudaFree(stamps));
  return 0;
}

}  // namespace
}  // namespace qwen3::bench

int main(int argc, char** argv) { return qwen3::bench::run(argc, argv); }
