// Kernel launches through one helper, so every kernel can take part in programmatic dependent launch (PDL, sm_90):
// with PDL on, a kernel is launched while its predecessor in the stream still runs; its CTAs start, may do work
// that does not depend on the predecessor (a GEMV's first weight loads), then wait in pdl_wait() until the
// predecessor has finished and its writes are visible. That hides the launch latency and the tail between kernels.
//
// Contract for every kernel launched with launch(): call pdl_launch_dependents() and pdl_wait() before touching
// any memory another kernel writes (reads and writes alike). Before pdl_wait(), only read data nothing writes
// (weights). Both are no-ops on sm_89 and when the kernel was launched without PDL.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/common/check.h"

namespace qwen3::kernels {

// Process-wide switch (off by default). Turning it on takes effect only on devices of compute capability >= 9.0.
void set_programmatic_dependent_launch(bool enabled);
bool programmatic_dependent_launch();

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <class... KernelParams, class... Args>
void launch(void (*kernel)(KernelParams...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
            Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (programmatic_dependent_launch()) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace qwen3::kernels
