// ring_stream: how fast one CTA per SM streams weight rows through gemv_ring's cp.async ring, by the order in which
// the CTAs walk the bytes and by the bytes a CTA keeps in flight.
//
// Why: in the decode step the one-launch MLP (norm_mlp v5_mlp_split_down_full_ring) streams its 302 MB at ~3.9 TB/s
// from its first PDL release to its last CTA's end (~86% of the 4.53 TB/s measured peak; mlp-trace files, ITERATIONS.md
// session 11), although every CTA keeps 192 KB in flight: more than measure_peaks' grid-stride read holds (at most
// 4 x 512 threads x 4 x 16 B = 128 KB an SM) when it reaches the peak. The two differ in the order of the addresses:
// measure_peaks' threads sweep the buffer together, while each MLP CTA walks its own contiguous rows (its features'
// gate, up and down_projᵀ rows, 132 blocks ~750 KB apart). This tool runs the MLP's ring and dot products
// (gemv_ring::Ring, dot_group; 512 threads, one 16-byte piece of each 8 KB row a thread) over the same bytes in
// different orders, with nothing else running:
//   * blocked: CTA c takes rows [c R, (c + 1) R) of one buffer, in groups of kGroup rows (the MLP's walk);
//   * interleaved: CTA c takes group g at global group g * ctas + c, so at any moment the CTAs read neighbouring
//     64 KB blocks;
//   * mlp: the MLP's own walk over Qwen3-8B-sized gate|up (2 intermediate x hidden) and down_projᵀ (intermediate x
//     hidden) matrices, the features split as norm_mlp splits them, a group never straddling gate|up and down;
//   * mlp-interleaved: the same rows a CTA, laid out group-interleaved in one buffer;
// each with 2 or 3 groups of 64 KB in flight (v2's and v5's rings), the grid-stride read of measure_peaks over the
// same buffer as the same-run peak, and the engine's MLP kernels themselves (norm_mlp v5, v9) on the same
// matrices: the difference to "mlp" is what the kernel does besides streaming (its norm, SwiGLU, reductions).
// Every variant rotates over --layers copies (far past the 60 MB L2) and is
// timed with CUDA events over --repeat passes (median, launch gaps included: 36 launches a pass, as in a step).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_common.cuh"
#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/registry.h"

namespace qwen3::bench {
namespace {

using kernels::bf16;
using kernels::kWarpSize;
using kernels::gemv_ring::kThreads;  // 512: a 4096-wide bf16 row is one 16-byte piece a thread
constexpr int kGroup = 8;            // rows a ring stage: 64 KB
constexpr int64_t kHidden = 4096;    // row width (bf16)

enum class Order { kBlocked, kInterleaved, kMlp, kMlpInterleaved };

using kernels::norm_mlp_feature_begin;  // CTA c's features: [begin(c), begin(c + 1)), as norm_mlp splits them

struct Walk {
  Order order;
  const bf16* a;     // blocked / interleaved / mlp-interleaved: the buffer; mlp: gate|up (2 inter, hidden)
  const bf16* b;     // mlp: down_projᵀ (inter, hidden)
  int64_t rows;      // blocked / interleaved: rows a CTA
  int64_t inter;     // mlp, mlp-interleaved: intermediate size
  int64_t groups_a;  // mlp-interleaved: the most groups a CTA has (the layout's stride is groups_a * ctas)
};

// The MLP kernel's work besides streaming, added one piece at a time (kAdds, a bit mask; Walk::mlp only):
constexpr int kAddNorm = 1;     // x from the hidden state and 132 partials loaded after the ring's first copies
constexpr int kAddSwiglu = 2;   // a block barrier, the warp sums of the gate|up rows through shared memory, SwiGLU
constexpr int kAddDown = 4;     // the down_projᵀ rows accumulated into registers (add_scaled_row), not dot products
constexpr int kAddReduce = 8;   // those sums added into a 4-copy fp32 delta with red.global.add.v4.f32

struct Extras {
  const bf16* residual;  // (hidden)
  const float* partials;  // (132)
  float* delta;           // (4, hidden)
};

// One CTA per SM streams its rows through the ring (kInFlight groups in flight: kStages - 1 as v2, kStages as v5)
// and multiplies each by x, as the MLP's gate|up phase does; the sums go to sink so that nothing is elided.
template <int kStages, int kInFlight, int kAdds = 0>
__global__ void __launch_bounds__(kThreads, 1) ring_stream_kernel(Walk walk, float* sink, Extras extras) {
  using Ring = kernels::gemv_ring::Ring<1, kGroup, kStages, kInFlight>;
  extern __shared__ __align__(16) unsigned char smem[];
  const Ring ring{reinterpret_cast<uint4*>(smem), kHidden / 8, kernels::make_evict_first_policy()};
  const int64_t c = blockIdx.x, ctas = gridDim.x;
  // Rows of this CTA in two runs (a group never straddles them): [0, run_a) and [run_a, run_a + run_b).
  int64_t run_a = walk.rows, run_b = 0, f0 = 0;
  if (walk.order == Order::kMlp || walk.order == Order::kMlpInterleaved) {
    f0 = norm_mlp_feature_begin(c, ctas, walk.inter);
    const int64_t features = norm_mlp_feature_begin(c + 1, ctas, walk.inter) - f0;
    run_a = 2 * features;
    run_b = features;
  }
  const int64_t groups_a = (run_a + kGroup - 1) / kGroup, groups = groups_a + (run_b + kGroup - 1) / kGroup;
  const auto group_first = [&](int64_t g) { return g < groups_a ? g * kGroup : run_a + (g - groups_a) * kGroup; };
  const auto group_end = [&](int64_t g) { return g < groups_a ? run_a : run_a + run_b; };
  const auto row_ptr = [&](int64_t r) {
    const bf16* p = nullptr;
    switch (walk.order) {
      case Order::kBlocked:
        p = walk.a + (c * walk.rows + r) * kHidden;
        break;
      case Order::kInterleaved:
        p = walk.a + ((r / kGroup * ctas + c) * kGroup + r % kGroup) * kHidden;
        break;
      case Order::kMlp: {
        const int64_t features = run_b;
        p = r < features ? walk.a + (f0 + r) * kHidden                                  // gate rows
            : r < run_a  ? walk.a + (walk.inter + f0 + r - features) * kHidden         // up rows
                         : walk.b + (f0 + r - run_a) * kHidden;                        // down_projᵀ rows
        break;
      }
      case Order::kMlpInterleaved: {
        const int64_t g = r < run_a ? r / kGroup : groups_a + (r - run_a) / kGroup;
        const int64_t j = r < run_a ? r % kGroup : (r - run_a) % kGroup;
        p = walk.a + ((g * ctas + c) * kGroup + j) * kHidden;
        break;
      }
    }
    return reinterpret_cast<const uint4*>(p);
  };
  const auto issue = [&](int64_t g) {
    if (g < groups)
      ring.issue(g, group_first(g), group_end(g), row_ptr);
    else
      ring.issue(g, 0, 0, row_ptr);
  };
  for (int g = 0; g < kInFlight; ++g) issue(g);
  float x[1][8];
  if constexpr ((kAdds & kAddNorm) != 0) {
    const uint4 norm_w = make_uint4(0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u);  // bf16 1.0
    const uint4 norm_ws[1] = {norm_w};
    kernels::gemv_ring::normed_from_partials<1>(extras.residual, extras.partials, 132, norm_ws, 1e-6f, kHidden, x);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) x[0][e] = 1.0f + 0.001f * float(threadIdx.x * 8 + e);
  }
  float* dots = reinterpret_cast<float*>(smem + Ring::kBytes);  // (16 warps, run_b): kAddSwiglu's warp sums
  float* act = dots + (kThreads / kWarpSize) * 2 * 96;            // (run_b)
  float down[1][8] = {};
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  float total = 0.0f;
  for (int64_t g = 0; g < groups; ++g) {
    uint4 w[kGroup][1];
    const int64_t first = group_first(g);
    ring.read(g, first, group_end(g), w);
    if (kInFlight < kStages) issue(g + kStages - 1);
    if ((kAdds & kAddSwiglu) != 0 && g == groups_a) {
      __syncthreads();
      for (int64_t i = threadIdx.x; i < run_b; i += kThreads) {
        float gs = 0.0f, us = 0.0f;
        for (int ww = 0; ww < kThreads / kWarpSize; ++ww) {
          gs += dots[ww * 2 * 96 + i];
          us += dots[ww * 2 * 96 + run_b + i];
        }
        act[i] = gs / (1.0f + expf(-gs)) * us;
      }
      __syncthreads();
    }
    if ((kAdds & kAddDown) != 0 && g >= groups_a) {
#pragma unroll
      for (int j = 0; j < kGroup; ++j) {
        const float a = first + j < group_end(g) ? act[first + j - run_a] : 0.0f;
        float wf[8];
        kernels::bf16x8_to_float(reinterpret_cast<const kernels::Bf16x8&>(w[j][0]), wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) down[0][e] += wf[e] * a;
      }
    } else {
      const float t = kernels::gemv_ring::dot_group<1, kGroup>(w, x);
      total += t;
      if ((kAdds & kAddSwiglu) != 0 && g < groups_a) {
        const int64_t row = first + kernels::warp_sum_transposed_index<kGroup>(lane);
        if (lane % (kWarpSize / kGroup) == 0 && row < run_a) dots[warp * 2 * 96 + row] = t;
      }
    }
    if (kInFlight == kStages) {
      asm volatile("" ::: "memory");  // this group's shared loads stay before the copies that reuse its stage
      issue(g + kStages);
    }
  }
  kernels::cp_async_wait<0>();
  if constexpr ((kAdds & kAddReduce) != 0) {
    float* dst = extras.delta + (blockIdx.x % 4) * kHidden + threadIdx.x * 8;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "f"(down[0][0]), "f"(down[0][1]),
                 "f"(down[0][2]), "f"(down[0][3]) : "memory");
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(dst + 4), "f"(down[0][4]), "f"(down[0][5]),
                 "f"(down[0][6]), "f"(down[0][7]) : "memory");
#else
#pragma unroll
    for (int e = 0; e < 8; ++e) atomicAdd(dst + e, down[0][e]);  // sm_89: no vector reductions
#endif
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) total += down[0][e];
  }
  if (threadIdx.x % kWarpSize == 0) sink[blockIdx.x * (kThreads / kWarpSize) + threadIdx.x / kWarpSize] = total;
}

// measure_peaks' streaming read: grid-stride 16-byte loads, 4 in flight a thread.
__global__ void __launch_bounds__(512) grid_stride_read(const uint4* __restrict__ data, size_t vectors,
                                                        unsigned long long* sink) {
  constexpr int kLoads = 4;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  uint32_t sum = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < vectors; i += kLoads * stride) {
    uint4 w[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const size_t j = i + u * stride;
      w[u] = j < vectors ? __ldg(data + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) sum += w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
  }
  if (sum == 0x9e3779b9u) atomicAdd(sink, 1ull);  // keeps the loads; practically never taken
}

int run(int argc, char** argv) {
  CLI::App app{"ring_stream: one CTA per SM streaming rows through gemv_ring's ring, by address order"};
  int layers = 36, repeat = 20;
  int64_t inter = 12288;
  app.add_option("--layers", layers, "copies rotated over (keep the total past the L2)")->check(CLI::Range(1, 256));
  app.add_option("--repeat", repeat, "timed passes over every copy (median)")->check(CLI::Range(3, 1000));
  app.add_option("--intermediate", inter, "the MLP's intermediate size (hidden is 4096)")
      ->check(CLI::Range(int64_t(1024), int64_t(1) << 16));
  CLI11_PARSE(app, argc, argv);
  const GpuInfo gpu = gpu_info();
  const int ctas = gpu.sm_count;
  // One layer's MLP rows: gate|up (2 inter) and down_projᵀ (inter); blocked and interleaved read as many rows.
  const int64_t rows_per_cta = 3 * inter / ctas;
  int64_t max_groups = 0;  // the most groups a CTA has in the MLP's walk
  for (int64_t c = 0; c < ctas; ++c) {
    const int64_t f = norm_mlp_feature_begin(c + 1, ctas, inter) - norm_mlp_feature_begin(c, ctas, inter);
    max_groups = std::max(max_groups, (2 * f + kGroup - 1) / kGroup + (f + kGroup - 1) / kGroup);
  }
  const size_t mlp_rows = size_t(3 * inter);
  const size_t interleaved_rows = size_t(max_groups * ctas * kGroup);  // with the padding of short CTAs' groups
  const size_t row_bytes = size_t(kHidden) * 2;
  const size_t copies = static_cast<size_t>(layers);
  std::vector<bf16*> gate_up(copies), down_t(copies), mixed(copies);
  for (int l = 0; l < layers; ++l) {
    BENCH_CHECK(cudaMalloc(&gate_up[size_t(l)], size_t(2 * inter) * row_bytes));
    BENCH_CHECK(cudaMalloc(&down_t[size_t(l)], size_t(inter) * row_bytes));
    BENCH_CHECK(cudaMalloc(&mixed[size_t(l)], interleaved_rows * row_bytes));
    // Weights of a real layer's size: uniform bits would hold NaN and infinities, and the MLP kernels measured up
    // to 1.3x slower on them (why was not looked into).
    fill_random_bf16(gate_up[size_t(l)], size_t(2 * inter * kHidden), uint64_t(3 * l + 1), -0.05f, 0.05f, nullptr);
    fill_random_bf16(down_t[size_t(l)], size_t(inter * kHidden), uint64_t(3 * l + 2), -0.05f, 0.05f, nullptr);
    fill_random_u32(mixed[size_t(l)], interleaved_rows * row_bytes / 4, uint64_t(3 * l + 3), nullptr);
  }
  float* sink = nullptr;
  unsigned long long* read_sink = nullptr;
  BENCH_CHECK(cudaMalloc(&sink, size_t(ctas) * (kThreads / kWarpSize) * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&read_sink, sizeof(unsigned long long)));
  BENCH_CHECK(cudaDeviceSynchronize());
  // The hidden state, norm weight, partials and delta of the MLP kernels and of the ablation below.
  bf16 *residual = nullptr, *norm_weight = nullptr;
  float *partials = nullptr, *delta = nullptr;
  constexpr int kPartials = 132, kCopies = 4;
  BENCH_CHECK(cudaMalloc(&residual, size_t(kHidden) * 2));
  BENCH_CHECK(cudaMalloc(&norm_weight, size_t(kHidden) * 2));
  BENCH_CHECK(cudaMalloc(&partials, kPartials * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&delta, size_t(kCopies) * kHidden * sizeof(float)));
  fill_random_bf16(residual, size_t(kHidden), 11, -1.0f, 1.0f, nullptr);
  fill_random_bf16(norm_weight, size_t(kHidden), 12, 0.5f, 1.5f, nullptr);
  const std::vector<float> sums(kPartials, float(kHidden) / 3.0f / kPartials);  // Σ h² of uniform(-1, 1)
  BENCH_CHECK(cudaMemcpy(partials, sums.data(), sums.size() * sizeof(float), cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemset(delta, 0, size_t(kCopies) * kHidden * sizeof(float)));
  const Extras extras{residual, partials, delta};
  const double mlp_bytes = double(mlp_rows) * double(row_bytes);
  std::printf("%s, %d SMs; MLP rows of intermediate %lld: %.1f MB a layer, %d layers rotated, median of %d passes\n",
              gpu.name.c_str(), ctas, static_cast<long long>(inter), mlp_bytes / 1e6, layers, repeat);
  std::printf("%-40s %10s %10s %8s\n", "variant", "us/launch", "GB/s", "bytes");

  const auto report = [&](const std::string& name, float ms, double bytes) {
    std::printf("%-40s %10.2f %10.1f %7.1fM\n", name.c_str(), ms * 1e3, bytes / (ms * 1e-3) / 1e9, bytes / 1e6);
  };
  const auto ring_variant = [&](auto stages_tag, auto in_flight_tag, Order order, const char* name,
                                auto adds_tag) {
    constexpr int kStages = decltype(stages_tag)::value, kInFlight = decltype(in_flight_tag)::value;
    constexpr int kAdds = decltype(adds_tag)::value;
    const auto kernel = ring_stream_kernel<kStages, kInFlight, (kAdds < 0 ? 0 : kAdds)>;
    // The ablation's kernels (kAdds >= 0 given) take the MLP's shared memory: the ring, 16 warps' sums of 192
    // rows and 96 activations.
    const size_t smem = size_t(kStages) * kGroup * kThreads * 16 +
                        (kAdds >= 0 && order == Order::kMlp ? size_t(16 * 2 * 96 + 96) * sizeof(float) : 0);
    BENCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    current_case() = name;
    BENCH_CHECK(cudaMemset(delta, 0, size_t(kCopies) * kHidden * sizeof(float)));
    const float ms = median_ms_per_launch(layers, repeat, [&](int l) {
      Walk w{order, nullptr, nullptr, rows_per_cta, inter, max_groups};
      switch (order) {
        case Order::kBlocked:
        case Order::kInterleaved:  // rows_per_cta * ctas rows, within the padded interleaved buffer
          w.a = mixed[size_t(l)];
          break;
        case Order::kMlp:
          w.a = gate_up[size_t(l)];
          w.b = down_t[size_t(l)];
          break;
        case Order::kMlpInterleaved:
          w.a = mixed[size_t(l)];
          break;
      }
      kernel<<<ctas, kThreads, smem>>>(w, sink, extras);
    });
    const double bytes = order == Order::kMlp || order == Order::kMlpInterleaved
                             ? mlp_bytes
                             : double(rows_per_cta) * double(ctas) * double(row_bytes);
    report(std::string(name) + (kInFlight == 2 ? ", 128 KB in flight" : ", 192 KB in flight"), ms, bytes);
  };
  using None = std::integral_constant<int, -1>;
  using Two = std::integral_constant<int, 2>;
  using Three = std::integral_constant<int, 3>;
  for (const auto& [order, name] : {std::pair{Order::kMlp, "mlp (the MLP's walk)"},
                                    std::pair{Order::kMlpInterleaved, "mlp-interleaved"},
                                    std::pair{Order::kBlocked, "blocked"},
                                    std::pair{Order::kInterleaved, "interleaved"}}) {
    ring_variant(Three{}, Three{}, order, name, None{});
    ring_variant(Three{}, Two{}, order, name, None{});
  }
  // The MLP's walk with its other work added a piece at a time (kAdd*), 192 KB in flight.
  std::printf("the MLP's walk, 192 KB in flight, with the MLP kernel's other work:\n");
  ring_variant(Three{}, Three{}, Order::kMlp, "  nothing else (its shared memory size)",
               std::integral_constant<int, 0>{});
  ring_variant(Three{}, Three{}, Order::kMlp, "  + norm", std::integral_constant<int, kAddNorm>{});
  ring_variant(Three{}, Three{}, Order::kMlp, "  + SwiGLU point", std::integral_constant<int, kAddSwiglu>{});
  ring_variant(Three{}, Three{}, Order::kMlp, "  + down rows", std::integral_constant<int, kAddDown>{});
  ring_variant(Three{}, Three{}, Order::kMlp, "  + reductions", std::integral_constant<int, kAddReduce>{});
  ring_variant(Three{}, Three{}, Order::kMlp, "  + norm + SwiGLU + down",
               std::integral_constant<int, kAddNorm | kAddSwiglu | kAddDown>{});
  ring_variant(Three{}, Three{}, Order::kMlp, "  + all four",
               std::integral_constant<int, kAddNorm | kAddSwiglu | kAddDown | kAddReduce>{});
  // The engine's one-launch MLP on the same matrices (no PDL: launched back to back, as the ring variants are).
  {
    // The delta accumulates over the launches (from zero; values stay finite with these weights).
    for (const char* name : {"v5_mlp_split_down_full_ring", "v9_mlp_split_down_l2_first", "v10_mlp_split_down_lean"}) {
      const auto& version = kernels::find_version(kernels::norm_mlp_versions(), name);
      current_case() = name;
      BENCH_CHECK(cudaMemset(delta, 0, size_t(kCopies) * kHidden * sizeof(float)));
      const float ms = median_ms_per_launch(layers, repeat, [&](int l) {
        kernels::NormMlpArgs a{residual, partials,          kPartials, norm_weight, 1e-6f,
                               gate_up[size_t(l)], down_t[size_t(l)], delta,     kHidden,     inter};
        a.delta_copies = kCopies;
        a.l2_lead_bytes = 96 << 10;
        version.launch(a, nullptr);
      });
      report(std::string("norm_mlp ") + name, ms, mlp_bytes);
    }
  }
  current_case() = "grid-stride read";
  const size_t vectors = interleaved_rows * row_bytes / 16;
  for (const int blocks_per_sm : {2, 4}) {
    const float ms = median_ms_per_launch(layers, repeat, [&](int l) {
      grid_stride_read<<<unsigned(ctas * blocks_per_sm), 512>>>(reinterpret_cast<const uint4*>(mixed[size_t(l)]),
                                                                vectors, read_sink);
    });
    report("grid-stride read, " + std::to_string(blocks_per_sm) + " x 512 threads an SM", ms, double(vectors) * 16);
  }
  BENCH_CHECK(cudaFree(residual));
  BENCH_CHECK(cudaFree(norm_weight));
  BENCH_CHECK(cudaFree(partials));
  BENCH_CHECK(cudaFree(delta));
  for (int l = 0; l < layers; ++l) {
    BENCH_CHECK(cudaFree(gate_up[size_t(l)]));
    BENCH_CHECK(cudaFree(down_t[size_t(l)]));
    BENCH_CHECK(cudaFree(mixed[size_t(l)]));
  }
  return 0;
}

}  // namespace
}  // namespace qwen3::bench

int main(int argc, char** argv) { return qwen3::bench::run(argc, argv); }
