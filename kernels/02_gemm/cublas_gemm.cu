// The cuBLAS baseline: bf16 inputs, fp32 accumulation (CUBLAS_COMPUTE_32F), bf16 output. Row-major
// y (m, n) = x (m, k) · w (n, k)ᵀ is column-major yᵀ (n, m) = w (n, k) · xᵀ: cuBLAS sees op(A) = wᵀ stored
// column-major (k, n) -> transposed, B = xᵀ (k, m) column-major = x row-major.
#include <cublas_v2.h>

#include <stdexcept>
#include <string>

#include "kernels/common/check.h"
#include "kernels/kernels.h"

namespace qwen3::kernels {

void launch_gemm_cublas(const GemmArgs& a, cudaStream_t stream) {
  thread_local cublasHandle_t handle = [] {
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    return h;
  }();
  cublasSetStream(handle, stream);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status =
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(a.n), int(a.m), int(a.k), &alpha, a.w, CUDA_R_16BF,
                   int(a.k), a.x, CUDA_R_16BF, int(a.k), &beta, a.y, CUDA_R_16BF, int(a.y_stride()), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cublasGemmEx failed with status " + std::to_string(int(status)));
}

}  // namespace qwen3::kernels
