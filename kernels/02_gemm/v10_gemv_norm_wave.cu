// v10_gemv_norm_wave: v8_gemv_norm sized to run in one wave. At batch 1 v8 gives every warp one weight row: the
// QKV projection of Qwen3-8B (6144 rows) needs 768 CTAs of 8 warps, but at 62 registers an H200 SM holds 4 of
// them (528 on the GPU, Nsight Compute: theoretical occupancy 50%), so 240 CTAs ran as a second, 45%-full wave.
// Here, where one row per warp would not fit in one wave, each warp takes two rows with half the unroll (the
// same 16-byte loads in flight per warp, half the CTAs). Other batch sizes: v8's shapes.
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "kernels/02_gemm/gemv_fused.cuh"
#include "kernels/common/batch_dispatch.h"
#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {
namespace {

using gemv_fused::kThreads;
using gemv_fused::kWarpsPerBlock;

template <int kRows>
unsigned blocks_for(const NormGemvArgs& a) {
  return unsigned((a.n + kWarpsPerBlock * kRows - 1) / (kWarpsPerBlock * kRows));
}

template <int kTokens, int kRows, int kUnroll, int kEarlyGroups>
void launch_shape(const NormGemvArgs& a, cudaStream_t stream) {
  const auto kernel = gemv_fused::norm_gemv_kernel<kTokens, kRows, kUnroll, kEarlyGroups>;
  const size_t smem = size_t(kTokens) * size_t(a.k) * sizeof(bf16);
  if (smem > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch(kernel, dim3(blocks_for<kRows>(a)), dim3(kThreads), smem, stream, a);
}

// CTAs of the one-row-per-warp batch-1 kernel that are resident at once on the whole GPU, per shared-memory size.
int64_t resident_one_row_ctas(size_t smem) {
  static std::mutex mutex;
  static std::map<size_t, int64_t> resident;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = resident.find(smem);
  if (it == resident.end()) {
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_fused::norm_gemv_kernel<1, 1, 4, 1>,
                                                             kThreads, smem));
    it = resident.emplace(smem, int64_t(device_sm_count()) * per_sm).first;
  }
  return it->second;
}

template <int kEarlyGroups>
void launch_wave(const NormGemvArgs& a, cudaStream_t stream) {
  if (a.m == 1) {
    if (int64_t(blocks_for<1>(a)) <= resident_one_row_ctas(size_t(a.k) * sizeof(bf16)))
      launch_shape<1, 1, 4, kEarlyGroups>(a, stream);
    else
      launch_shape<1, 2, 2, kEarlyGroups>(a, stream);
  } else {
    dispatch_batch_tokens(a.m, "gemv_norm v10/v11", [&](auto tokens) {
      constexpr int kTokens = decltype(tokens)::value;
      launch_shape<kTokens, gemv_rows_for(kTokens), gemv_unroll_for(kTokens), kEarlyGroups>(a, stream);
    });
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool gemv_norm_v10_supports(const NormGemvArgs& a) {
  return a.m >= 1 && a.m <= 8 && a.k % 8 == 0 && a.m * a.k * 2 <= 200 * 1024 &&
         reinterpret_cast<uintptr_t>(a.residual_delta) % 16 == 0 && a.delta_copies >= 1;  // (float4 loads)
}

void launch_gemv_norm_v10(const NormGemvArgs& a, cudaStream_t stream) { launch_wave<1>(a, stream); }

// v11_gemv_norm_early: v10 with both weight buffers of each warp loaded before the PDL wait (gemv_fused.cuh
// warp_rows, kEarlyGroups = 2), so twice the bytes are in flight while the previous kernel drains. Same shapes.
bool gemv_norm_v11_supports(const NormGemvArgs& a) { return gemv_norm_v10_supports(a); }

void launch_gemv_norm_v11(const NormGemvArgs& a, cudaStream_t stream) { launch_wave<2>(a, stream); }

}  // namespace qwen3::kernels
