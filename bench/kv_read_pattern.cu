// kv_read_pattern: how fast the decode attention's K/V reads can be, by cache layout, with no attention around them.
//
// Why: at context 8192 the attention phase of qkv_attention_o reads 32 MB of K/V a layer at ~2.4 TB/s (traces,
// ITERATIONS.md session 9), whether its loads go through a CTA-wide ring (v2) or straight into registers from
// every warp (v6), with 64-128 KB in flight an SM. This tool reads the same bytes in the same CTA grid (one CTA a
// (split, kv head), 16 splits of 512 keys for Qwen3-8B's 8 kv heads) and nothing else, so what it measures is the
// ceiling of the access pattern itself:
//   * position-major, the engine's cache layout [position][kv_head][head_dim]: a CTA reads 256 bytes of every
//     2 KB row (its kv head's piece), K then V;
//   * head-major, [kv_head][position][head_dim]: the same bytes, each CTA's K and V contiguous (128 KB each);
//   * and a plain contiguous stream of the same total, one CTA per 1/128 of the buffer.
// Every variant rotates over --layers copies (36 x 64 MB for 8192 keys: far past the L2), so the bytes come from
// HBM as in a decode step, and is timed with CUDA events over --repeat passes (median). Prints GB/s per variant
// and bytes in flight a CTA (4, 16 or 32 16-byte loads a thread), each through L1 (ld.global.nc) or past it
// (.L1::no_allocate).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/bench_common.cuh"
#include "kernels/common/ptx.cuh"

namespace qwen3::bench {
namespace {

constexpr int kThreads = 256;

enum class Layout { kPositionMajor, kHeadMajor, kContiguous };

// CTA c = split * kv_heads + head reads keys [split * keys, (split + 1) * keys) of its head: K rows then V rows,
// 16 bytes a thread per load, kInFlight loads issued before any is used. A row is head_dim * 2 = 256 bytes:
// 16 threads a row, 16 rows per 256-thread pass.
template <int kInFlight, bool kNoL1>
__global__ void __launch_bounds__(kThreads) read_kv(const uint4* __restrict__ k, const uint4* __restrict__ v,
                                                    Layout layout, int kv_heads, int keys, int positions,
                                                    unsigned long long* sink) {
  const int head = blockIdx.x % kv_heads, split = blockIdx.x / kv_heads;
  constexpr int kRowVecs = 16;  // 16-byte pieces of a 256-byte row
  const int vecs = keys * kRowVecs;  // this CTA's pieces of K (and as many of V)
  const auto index = [&](int i) -> size_t {
    const int key = split * keys + i / kRowVecs, piece = i % kRowVecs;
    switch (layout) {
      case Layout::kPositionMajor:
        return (size_t(key) * kv_heads + head) * kRowVecs + piece;
      case Layout::kHeadMajor:
        return (size_t(head) * positions + key) * kRowVecs + piece;
      default:  // each CTA a contiguous 1/gridDim.x of the buffer
        return size_t(blockIdx.x) * vecs + i;
    }
  };
  uint32_t sum = 0;
  for (const uint4* base : {k, v}) {
    for (int i0 = threadIdx.x; i0 < vecs; i0 += kInFlight * kThreads) {
      uint4 w[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int i = i0 + u * kThreads;
        const uint4* p = base + index(i);
        w[u] = i >= vecs ? make_uint4(0, 0, 0, 0) : kNoL1 ? kernels::load_nc_no_l1_16B(p) : __ldg(p);
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) sum += w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
    }
  }
  if (sum == 0x9e3779b9u) atomicAdd(sink, 1ull);  // keeps the loads; practically never taken
}

template <int kInFlight, bool kNoL1>
float time_variant(const std::vector<const uint4*>& ks, const std::vector<const uint4*>& vs, Layout layout,
                   int kv_heads, int splits, int keys, int positions, unsigned long long* sink, int repeat,
                   int smem_bytes) {
  const dim3 grid(unsigned(kv_heads * splits));
  BENCH_CHECK(cudaFuncSetAttribute(read_kv<kInFlight, kNoL1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   smem_bytes));
  // Every layer once untimed, then `repeat` timed passes over them: ms a launch.
  return median_ms_per_launch(int(ks.size()), repeat, [&](int l) {
    read_kv<kInFlight, kNoL1><<<grid, kThreads, size_t(smem_bytes)>>>(ks[size_t(l)], vs[size_t(l)], layout,
                                                                      kv_heads, keys, positions, sink);
  });
}

int run(int argc, char** argv) {
  CLI::App app{"kv_read_pattern: the decode attention's K/V read rate by cache layout"};
  int positions = 8192, kv_heads = 8, splits = 16, layers = 36, repeat = 20, smem_kb = 160;
  app.add_option("--positions", positions, "keys in the cache (the context)")->check(CLI::Range(512, 1 << 20));
  app.add_option("--kv-heads", kv_heads, "kv heads (head_dim 128)")->check(CLI::Range(1, 64));
  app.add_option("--splits", splits, "CTAs a kv head (keys split evenly)")->check(CLI::Range(1, 64));
  app.add_option("--layers", layers, "cache copies rotated over (keep the total past the L2)")
      ->check(CLI::Range(1, 256));
  app.add_option("--repeat", repeat, "timed passes over every layer (median)")->check(CLI::Range(3, 1000));
  app.add_option("--smem-kb", smem_kb, "dynamic shared memory a CTA asks for (unused; it shrinks L1 as "
                                      "qkv_attention_o's 160 KB does)")
      ->check(CLI::Range(0, 227));
  CLI11_PARSE(app, argc, argv);
  if (positions % splits != 0) {
    std::fprintf(stderr, "error: --positions must be a multiple of --splits\n");
    return 2;
  }
  const int keys = positions / splits;
  const size_t vecs = size_t(positions) * kv_heads * 16;  // 16-byte pieces of one K (or V) cache
  std::vector<uint4*> buffers;
  std::vector<const uint4*> ks, vs;
  for (int l = 0; l < 2 * layers; ++l) {
    uint4* b = nullptr;
    BENCH_CHECK(cudaMalloc(&b, vecs * sizeof(uint4)));
    fill_random_u32(b, vecs * 4, uint64_t(l + 1), nullptr);
    buffers.push_back(b);
    (l % 2 ? vs : ks).push_back(b);
  }
  unsigned long long* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&sink, sizeof(unsigned long long)));
  BENCH_CHECK(cudaDeviceSynchronize());
  const double bytes = 2.0 * double(vecs) * sizeof(uint4);  // K and V of one layer
  std::printf("K+V %.1f MB a layer, %d CTAs (%d kv heads x %d splits of %d keys), %d layers rotated, %d KB smem\n",
              bytes / 1e6, kv_heads * splits, kv_heads, splits, keys, layers, smem_kb);
  const struct {
    const char* name;
    Layout layout;
  } layouts[] = {{"position-major (engine)", Layout::kPositionMajor},
                 {"head-major", Layout::kHeadMajor},
                 {"contiguous per CTA", Layout::kContiguous}};
  const auto row = [&](const char* name, Layout layout, auto no_l1) {
    constexpr bool kNoL1 = decltype(no_l1)::value;
    const int smem = smem_kb * 1024;
    const float t4 = time_variant<4, kNoL1>(ks, vs, layout, kv_heads, splits, keys, positions, sink, repeat, smem);
    const float t16 = time_variant<16, kNoL1>(ks, vs, layout, kv_heads, splits, keys, positions, sink, repeat, smem);
    const float t32 = time_variant<32, kNoL1>(ks, vs, layout, kv_heads, splits, keys, positions, sink, repeat, smem);
    std::printf("%-24s %-9s 16 / 64 / 128 KB in flight a CTA: %6.2f / %6.2f / %6.2f us = %5.0f / %5.0f / %5.0f GB/s\n",
                name, kNoL1 ? "no L1" : "via L1", t4 * 1e3, t16 * 1e3, t32 * 1e3, bytes / t4 / 1e6,
                bytes / t16 / 1e6, bytes / t32 / 1e6);
  };
  for (const auto& l : layouts) {
    row(l.name, l.layout, std::true_type{});
    row(l.name, l.layout, std::false_type{});
  }
  for (uint4* b : buffers) BENCH_CHECK(cudaFree(b));
  BENCH_CHECK(cudaFree(sink));
  return 0;
}

}  // namespace
}  // namespace qwen3::bench

int main(int argc, char** argv) { return qwen3::bench::run(argc, argv); }
