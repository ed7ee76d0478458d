// v12_gemv_ring_tokens: the decode GEMV of one or two tokens (batch-2 decode's QKV and o projections) on the lean
// shared-memory ring of norm_mlp v14 (gemv_ring.cuh).
//
// Why: at batch 2 the decode layer ran the QKV and o projections on v2_gemv_stream, which waits for its input
// before it loads a weight byte: in the step 17.2 and 14.1 us a launch against 11.1 and 7.4 us of bytes (eager
// profile, ITERATIONS.md session 18). Here one CTA per SM owns a contiguous block of rows and streams them through a
// 192 KB ring, every group of it issued before the PDL wait, so a CTA's first 192 KB are on their way while the
// previous kernel finishes. Each thread copies and reads back its own 16-byte piece of every row (no barrier guards
// the ring); each piece is converted once and multiplied by both tokens' inputs; the 16 warps' sums of a row meet
// in shared memory at the end.
//
// Layout: 512 threads, a row of k = 4096 one 16-byte piece a thread; groups of 4 rows, 6 stages, all in flight (a
// thread's next group is issued into the stage it has just multiplied). y rows ldy apart, rounded once to bf16.
// Other shapes (k != 4096, more than two tokens, or warp sums that do not fit beside the ring) run v2.
// PRECOND: 16-byte aligned x, w, y rows.
//
// norm_gemv v19_gemv_norm_ring_tokens is the same GEMV with its input normed in the prologue from the residual and
// the MLP's delta still owed to it (NormGemvArgs::residual_delta, (copies, m, k)): x_t = rmsnorm(bf16(h_t +
// bf16(Σ copies))), each CTA summing h_t'² itself. Why: the batched layer then need not add the delta and norm h in a
// launch of its own after the MLP (add_delta_rmsnorm); the o projection's add takes the delta in instead. Measured
// slower (a batch-2 step 0.975x, ITERATIONS.md session 18): its CTAs load h and the delta copies, 80 KB, after the
// PDL wait behind their queued ring copies, where v12 loads the 16 KB normed input. Off by default.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/common/check.h"
#include "kernels/common/dtype.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/kernels.h"

namespace qwen3::kernels {

bool gemm_v2_supports(const GemmArgs& a);
void launch_gemm_v2(const GemmArgs& a, cudaStream_t stream);
bool gemv_norm_v10_supports(const NormGemvArgs& a);
void launch_gemv_norm_v10(const NormGemvArgs& a, cudaStream_t stream);

namespace {

using gemv_ring::kThreads;
using gemv_ring::kWarps;
constexpr int kK = 4096, kGroup = 4, kStages = 6, kMaxTokens = 2;
constexpr size_t kRingBytes = size_t(kStages) * kGroup * kThreads * 16;  // 192 KB

// Rows [first_row(c), first_row(c + 1)) of CTA c: contiguous blocks of near-equal size.
__host__ __device__ __forceinline__ int64_t first_row(int64_t c, int64_t ctas, int64_t n) { return c * n / ctas; }

int64_t ctas_for() { return device_sm_count(); }

// The warp sums (tokens, kWarps, most rows a CTA takes of n) beside the ring.
size_t smem_for(int64_t tokens, int64_t n) {
  const int64_t ctas = ctas_for(), most = (n + ctas - 1) / ctas;
  return kRingBytes + size_t(tokens * kWarps * most) * sizeof(float);
}

// The GEMV body shared by both kernels: y (kTokens, n) rows ldy apart = x · wᵀ over this CTA's block of rows of w
// (n, kK). before_wait() runs after the CTA's first ring groups are issued and before the PDL wait (weights only);
// input(x) after it fills this thread's 8 columns of each token's input.
template <int kTokens, class BeforeWait, class Input>
__device__ __forceinline__ void ring_gemv(const bf16* w, int64_t n, bf16* y, int64_t ldy, BeforeWait&& before_wait,
                                          Input&& input) {
  static_assert(kK / 8 == kThreads, "one 16-byte piece of a row a thread");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  pdl_launch_dependents();
  const int64_t row0 = first_row(blockIdx.x, gridDim.x, n);
  const int rows = int(first_row(blockIdx.x + 1, gridDim.x, n) - row0);
  const int most = int((n + gridDim.x - 1) / gridDim.x);
  const int groups = (rows + kGroup - 1) / kGroup;
  uint4* const ring = reinterpret_cast<uint4*>(smem_raw) + threadIdx.x;  // this thread's piece of stage 0, row 0
  float* dots = reinterpret_cast<float*>(smem_raw + kRingBytes);         // (kTokens, kWarps, most)
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const uint64_t policy = make_evict_first_policy();
  const bf16* const rows_src = w + row0 * kK + threadIdx.x * 8;  // this thread's piece of the block's first row
  // Group g into stage `stage`: rows [4g, min(4g + 4, rows)). Past the last group an empty cp.async group keeps
  // the count.
  const auto issue = [&](int g, int stage) {
    if (g < groups)
      gemv_ring::copy_rows<kGroup, kK>(ring + stage * (kGroup * kThreads), rows_src + int64_t(g) * kGroup * kK,
                                       min(kGroup, rows - g * kGroup), policy);
    cp_async_commit();
  };
  for (int g = 0; g < kStages; ++g) issue(g, g);  // weights: before the wait
  before_wait();
  pdl_wait();  // the input comes from the previous kernel
  float x[kTokens][8];
  input(x);
  for (int g = 0, stage = 0; g < groups; ++g, stage = stage == kStages - 1 ? 0 : stage + 1) {
    const int first = g * kGroup;
    cp_async_wait<kStages - 1>();
    uint4 wg[kGroup][1];
    gemv_ring::read_rows<kGroup>(ring + stage * (kGroup * kThreads), min(kGroup, rows - first), wg);
    const float total = gemv_ring::dot_group_tokens<kTokens, kGroup>(wg, x);
    const int sum = warp_sum_transposed_index<kGroup * kTokens>(lane);  // this lane's (token, row) of the group
    const int token = sum / kGroup, row = first + sum % kGroup;
    if (lane % (kWarpSize / (kGroup * kTokens)) == 0 && row < rows) dots[(token * kWarps + warp) * most + row] = total;
    asm volatile("" ::: "memory");  // this group's shared loads stay before the copies that reuse its stage
    issue(g + kStages, stage);      // into the stage this group came from: its pieces are multiplied
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp's sums are in
  for (int i = threadIdx.x; i < kTokens * rows; i += kThreads) {
    const int t = i / rows, r = i % rows;
    float sum = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) sum += dots[(t * kWarps + wi) * most + r];
    y[t * ldy + row0 + r] = __float2bfloat16_rn(sum);
  }
}

template <int kTokens>
__global__ void __launch_bounds__(kThreads, 1) gemv_ring_tokens_kernel(GemmArgs a) {
  ring_gemv<kTokens>(a.w, a.n, a.y, a.ldy > 0 ? a.ldy : a.n, [] {}, [&](float (&x)[kTokens][8]) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t)
      bf16x8_to_float(reinterpret_cast<const Bf16x8*>(a.x + t * a.k)[threadIdx.x], x[t]);
  });
}

// v19: token t's input normed from bf16(h_t + bf16(Σ_j delta copy j of token t)), the copies (copies, m, k) summed
// in order, h_t'² summed by the CTA in a fixed order (gemv_ring::normed_by_block_sum: every CTA gets the same bits).
template <int kTokens>
__global__ void __launch_bounds__(kThreads, 1) norm_gemv_ring_tokens_kernel(NormGemvArgs a) {
  __shared__ float warp_sq[kWarps];
  uint4 norm_w[1];
  ring_gemv<kTokens>(
      a.w, a.n, a.y, a.n, [&] { gemv_ring::load_norm_weight<1>(a.norm_weight, kK, norm_w); },
      [&](float (&x)[kTokens][8]) {
#pragma unroll
        for (int t = 0; t < kTokens; ++t)
          gemv_ring::normed_with_delta<1, kThreads>(a.residual + t * kK, a.residual_delta + t * kK, a.delta_copies,
                                                    norm_w, a.eps, kK, warp_sq,
                                                    reinterpret_cast<float(&)[1][8]>(x[t]), kTokens);
      });
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The ring takes m tokens over n rows of k: k is kK, at most kMaxTokens tokens, and the warp sums fit beside it.
bool ring_fits(int64_t m, int64_t n, int64_t k) {
  return k == kK && m >= 1 && m <= kMaxTokens && n >= 1 && smem_for(m, n) <= size_t(device_optin_smem_bytes());
}

// kernel<1> or kernel<kMaxTokens> by a.m, one CTA per SM with the ring and its warp sums. PRECOND: ring_fits.
template <class Args>
void launch_ring(void (*one_token)(Args), void (*tokens)(Args), const Args& a, cudaStream_t stream) {
  const size_t smem = smem_for(a.m, a.n);
  const auto kernel = a.m == 1 ? one_token : tokens;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch(kernel, dim3(unsigned(ctas_for())), dim3(kThreads), smem, stream, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool gemm_v12_supports(const GemmArgs& a) { return gemm_v2_supports(a); }

void launch_gemm_v12(const GemmArgs& a, cudaStream_t stream) {
  if (!ring_fits(a.m, a.n, a.k) || !aligned16(a.x) || !aligned16(a.w)) return launch_gemm_v2(a, stream);
  launch_ring(gemv_ring_tokens_kernel<1>, gemv_ring_tokens_kernel<kMaxTokens>, a, stream);
}

// v19_gemv_norm_ring_tokens: the ring where the input is the delta form at 1-2 tokens and k 4096; other args v10.
bool gemv_norm_v19_supports(const NormGemvArgs& a) { return gemv_norm_v10_supports(a); }

void launch_gemv_norm_v19(const NormGemvArgs& a, cudaStream_t stream) {
  if (!ring_fits(a.m, a.n, a.k) || a.residual_delta == nullptr || a.delta_copies < 1 || !aligned16(a.residual) ||
      !aligned16(a.norm_weight) || !aligned16(a.w))
    return launch_gemv_norm_v10(a, stream);
  launch_ring(norm_gemv_ring_tokens_kernel<1>, norm_gemv_ring_tokens_kernel<kMaxTokens>, a, stream);
}

}  // namespace qwen3::kernels
