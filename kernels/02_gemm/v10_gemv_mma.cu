// v10_gemv_mma: the batched decode GEMV (2-8 tokens) on tensor cores. The FMA GEMVs (v2, v4, v5) are issue bound
// from batch 4: each weight element costs a bf16->fp32 conversion and one FMA per token, and the runner put them at
// 45-67% of the read peak at batch 4 and 32-53% at batch 8, where cuBLAS stays at 59-96%.
//
// mma.sync m16n8k16 fits a decode batch exactly: A = 16 weight rows x 16 k, B = 16 k x 8 tokens (the batch,
// zero-padded), C = 16 rows x 8 tokens in fp32. The dot product does not care in which order k is summed, so
// the fragments are filled straight from 16-byte loads instead of ldmatrix: thread (gid = lane / 4, tig =
// lane % 4) loads 8 consecutive k of weight rows gid and gid + 8 and of token gid, starting at k = 32 s + 8 tig,
// and the same element slots of A and B always hold the same real k (elements 0-3 of each vector feed one mma,
// 4-7 the next). No conversion, no FMA loop: two mma per 32 k of 16 rows.
//
// Work split: a CTA of 8 warps owns kTiles x 16 rows; warp w takes the k range [w k / 8, (w + 1) k / 8) of all
// of them (split-K), its weight loads double-buffered (two 32-k steps ahead); the first group is issued before the
// PDL wait. The 8 warps' partial sums meet in shared memory and are added in a fixed order (deterministic).
// PRECOND: k % 256 == 0, x and w 16-byte aligned, 1 <= m <= 8.
//
// v4_gate_up_swiglu_mma (the gate_up_swiglu op, kSwiglu): the same kernel with its two row tiles the gate_proj and
// up_proj rows of the same 16 features, and SwiGLU in the epilogue: bf16(bf16(silu(g)) * u) of the bf16-rounded
// sums, v0_silu_mul's arithmetic on the values this GEMM would have written, so the same bits as v10 followed by
// v0_silu_mul, without the (m, 2 * inter) round trip and the extra launch. Why: at batch 4-8 the engine ran those
// two launches a layer (session 15's profile of the batch-4 step: silu_mul ~4.8 us a layer beside gate|up's 57).
#include <cuda_runtime.h>

#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kStepK = 32;  // k per warp step: 4 threads (tig) x 8 elements
constexpr int kUnroll = 2;  // steps per load group

// kSwiglu: a.w is (2 n, k), gate rows then up rows, a.n the features; tile 0 takes gate rows row0.., tile 1 the up
// rows of the same features, and y (m, n) gets their SwiGLU.
// kDepth: 32-k steps per load group (v11: 4 where one tile, twice the bytes in flight).
template <int kTiles, bool kSwiglu = false, int kDepth = kUnroll>
__global__ void __launch_bounds__(kThreads) gemv_mma_kernel(GemmArgs a) {
  static_assert(!kSwiglu || kTiles == 2, "SwiGLU pairs a gate tile with an up tile");
  __shared__ float partial[kWarps][kTiles][16][8];  // (warp, tile, row, token)
  pdl_launch_dependents();
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int gid = lane / 4, tig = lane % 4;
  const int64_t row0 = int64_t(blockIdx.x) * (kSwiglu ? 16 : kTiles * 16);
  const int64_t k_per_warp = a.k / kWarps;
  const int64_t k_begin = warp * k_per_warp, k_end = k_begin + k_per_warp;
  const uint64_t policy = make_evict_first_policy();

  // Rows gid and gid + 8 of each tile (clamped: rows past n compute garbage that is never stored).
  const bf16* w_row[kTiles][2];
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (kSwiglu)
        w_row[t][h] = a.w + (t * a.n + min(row0 + h * 8 + gid, a.n - 1)) * a.k + tig * 8;
      else
        w_row[t][h] = a.w + min(row0 + t * 16 + h * 8 + gid, a.n - 1) * a.k + tig * 8;
    }
  const bool token_valid = gid < a.m;
  const bf16* x_row = a.x + (token_valid ? gid : 0) * a.k + tig * 8;

  float acc[kTiles][4];
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;

  auto load_w = [&](uint4(&buf)[kDepth][kTiles][2], int64_t kb) {
#pragma unroll
    for (int u = 0; u < kDepth; ++u)
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) buf[u][t][h] = load_stream_16B(w_row[t][h] + kb + u * kStepK, policy);
  };
  // One 32-k step: weight rows gid, gid + 8 of each tile (w[t][0], w[t][1]) against the tokens' x at k = kb.
  auto mma_step = [&](const uint4(&w)[kTiles][2], int64_t kb) {
    const uint4 xv = token_valid ? *reinterpret_cast<const uint4*>(x_row + kb) : make_uint4(0, 0, 0, 0);
    const uint32_t b_lo[2] = {xv.x, xv.y}, b_hi[2] = {xv.z, xv.w};
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const uint4& r0 = w[t][0];
      const uint4& r8 = w[t][1];
      const uint32_t a_lo[4] = {r0.x, r8.x, r0.y, r8.y}, a_hi[4] = {r0.z, r8.z, r0.w, r8.w};
      mma_bf16_16816(acc[t], a_lo, b_lo);
      mma_bf16_16816(acc[t], a_hi, b_hi);
    }
  };
  auto compute = [&](const uint4(&buf)[kDepth][kTiles][2], int64_t kb) {
#pragma unroll
    for (int u = 0; u < kDepth; ++u) mma_step(buf[u], kb + u * kStepK);
  };

  constexpr int64_t kGroupK = int64_t(kDepth) * kStepK;
  uint4 cur[kDepth][kTiles][2], nxt[kDepth][kTiles][2];
  int64_t kb = k_begin;
  const bool have_group = kb + kGroupK <= k_end;
  if (have_group) load_w(cur, kb);
  pdl_wait();  // x comes from the previous kernel
  if (have_group) {
    for (;;) {
      const int64_t next = kb + kGroupK;
      const bool have_next = next + kGroupK <= k_end;
      if (have_next) load_w(nxt, next);
      compute(cur, kb);
      kb = next;
      if (!have_next) break;
#pragma unroll
      for (int u = 0; u < kDepth; ++u)
#pragma unroll
        for (int t = 0; t < kTiles; ++t)
#pragma unroll
          for (int h = 0; h < 2; ++h) cur[u][t][h] = nxt[u][t][h];
    }
  }
  for (; kb < k_end; kb += kStepK) {  // a last single step (k / 8 an odd multiple of 32)
    uint4 one[kTiles][2];
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) one[t][h] = load_stream_16B(w_row[t][h] + kb, policy);
    mma_step(one, kb);
  }

  // C fragment: acc[t][0..1] = (row gid, tokens 2 tig, 2 tig + 1), acc[t][2..3] = (row gid + 8, same tokens).
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    partial[warp][t][gid][2 * tig] = acc[t][0];
    partial[warp][t][gid][2 * tig + 1] = acc[t][1];
    partial[warp][t][gid + 8][2 * tig] = acc[t][2];
    partial[warp][t][gid + 8][2 * tig + 1] = acc[t][3];
  }
  __syncthreads();
  const int64_t ldy = a.ldy > 0 ? a.ldy : a.n;  // GemmArgs::y_stride(), which is host-only
  if constexpr (kSwiglu) {
    for (int o = threadIdx.x; o < 16 * 8; o += kThreads) {
      const int row = o / 8, token = o % 8;
      const int64_t r = row0 + row;
      if (token >= a.m || r >= a.n) continue;
      float g = 0.0f, u = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        g += partial[w][0][row][token];
        u += partial[w][1][row][token];
      }
      g = bf16_round(g);  // (the bf16 gate and up this GEMM would write; then v0_silu_mul's arithmetic)
      u = bf16_round(u);
      a.y[token * ldy + r] = __float2bfloat16_rn(bf16_round(g / (1.0f + expf(-g))) * u);
    }
  } else {
    for (int o = threadIdx.x; o < kTiles * 16 * 8; o += kThreads) {
      const int t = o / 128, row = (o / 8) % 16, token = o % 8;
      const int64_t r = row0 + t * 16 + row;
      if (token >= a.m || r >= a.n) continue;
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += partial[w][t][row][token];
      a.y[token * ldy + r] = __float2bfloat16_rn(sum);
    }
  }
}

template <int kTiles, int kDepth = kUnroll>
void launch_tiles(const GemmArgs& a, cudaStream_t stream) {
  const unsigned blocks = unsigned((a.n + kTiles * 16 - 1) / (kTiles * 16));
  launch(gemv_mma_kernel<kTiles, false, kDepth>, dim3(blocks), dim3(kThreads), 0, stream, a);
}

}  // namespace

bool gemm_v10_supports(const GemmArgs& a) { return a.m >= 1 && a.m <= 8 && a.k % 256 == 0 && a.n >= 1; }

// v11_gemv_mma_deep: v10 whose one-tile CTAs (the shapes with fewer than 32 x 2 x SMs rows: Qwen3-8B's o, qkv and
// down projections) keep four 32-k steps a load group in flight instead of two: session 15's profile of the batch-4
// step had those GEMMs at 2.2-2.9 TB/s (gate|up, two tiles a CTA, 3.5).
bool gemm_v11_supports(const GemmArgs& a) { return gemm_v10_supports(a); }

void launch_gemm_v11(const GemmArgs& a, cudaStream_t stream) {
  if (a.n / 32 >= 2 * device_sm_count()) {
    launch_tiles<2>(a, stream);
  } else {
    launch_tiles<1, 4>(a, stream);
  }
  CUDA_CHECK_LAUNCH();
}

namespace {
// v4_gate_up_swiglu_mma's GEMM in the kernel's kSwiglu terms: n the features, y (m, inter).
GemmArgs swiglu_gemm(const GateUpSwigluArgs& a) { return {a.x, a.w_gate_up, a.out, a.m, a.inter, a.k, a.inter}; }
}  // namespace

bool gate_up_swiglu_v4_supports(const GateUpSwigluArgs& a) { return gemm_v10_supports(swiglu_gemm(a)); }

// One CTA per 16 features (their gate and up rows: v10's two-tile CTA).
void launch_gate_up_swiglu_v4(const GateUpSwigluArgs& a, cudaStream_t stream) {
  launch(gemv_mma_kernel<2, true>, dim3(unsigned((a.inter + 15) / 16)), dim3(kThreads), 0, stream, swiglu_gemm(a));
  CUDA_CHECK_LAUNCH();
}

// 32 rows per CTA (each activation load feeds two row tiles) where that still gives two CTAs per SM; else 16.
void launch_gemm_v10(const GemmArgs& a, cudaStream_t stream) {
  if (a.n / 32 >= 2 * device_sm_count()) {
    launch_tiles<2>(a, stream);
  } else {
    launch_tiles<1>(a, stream);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace qwen3::kernels
