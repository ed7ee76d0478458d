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

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "kernels/common/check.h"

namespace qwen3::kernels {

// Process-wide switch (off by default). Turning it on takes effect only on devices of compute capability >= 9.0.
void set_programmatic_dependent_launch(bool enabled);
bool programmatic_dependent_launch();

// Process-wide: the shared-memory carveout (percent of the SM's unified L1 / shared memory, 0-100) that launch()
// and launch_clustered() ask for each kernel they launch, through cudaFuncAttributePreferredSharedMemoryCarveout;
// -1 (the default): none asked, the driver picks a split per kernel from its needs. Why: an SM holds CTAs of two
// kernels at once only under one split and changes its split only once it is empty; so a kernel whose CTAs should
// become resident beside the previous kernel's needs the same split as it. Traced (ITERATIONS.md session 26):
// norm_mlp v18 became resident beside qkv_attention_o at 83 KB on all 132 SMs with 100, on none without.
// A kernel keeps the last carveout asked for it in the process: setting -1 after a percent asks for none, it does not
// undo the percent. PRECOND: -1 <= percent <= 100.
void set_smem_carveout(int percent);
int smem_carveout();

// The current device at first use, asked once per process (the engine and the tests use one device per process):
// its SM count (throws CudaError if it cannot be read) and its compute-capability major (0 if it cannot be read).
int device_sm_count();
int device_compute_major();
// Its opt-in shared memory per block (throws CudaError if it cannot be read).
int device_optin_smem_bytes();

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

// Asks for smem_carveout() for `kernel`, where it is set (>= 0).
template <class... KernelParams>
void apply_smem_carveout(void (*kernel)(KernelParams...)) {
  if (const int percent = smem_carveout(); percent >= 0)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent));
}

template <class... KernelParams, class... Args>
void launch(void (*kernel)(KernelParams...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
            Args&&... args) {
  apply_smem_carveout(kernel);
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

// The configuration of a launch whose grid's x dimension is grouped into clusters of cluster_x CTAs (1: none),
// with PDL where `pdl`; `attribute` holds the attributes the configuration points to.
inline cudaLaunchConfig_t clustered_config(dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                                           unsigned cluster_x, bool pdl, cudaLaunchAttribute (&attribute)[2]) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  unsigned count = 0;
  if (cluster_x > 1) {
    attribute[count].id = cudaLaunchAttributeClusterDimension;
    attribute[count].val.clusterDim.x = cluster_x;
    attribute[count].val.clusterDim.y = 1;
    attribute[count].val.clusterDim.z = 1;
    ++count;
  }
  if (pdl) {
    attribute[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  config.attrs = count ? attribute : nullptr;
  config.numAttrs = count;
  return config;
}

// launch() with the grid's x dimension grouped into thread-block clusters of cluster_x CTAs (sm_90: the CTAs of
// a cluster run at the same time on one GPC and can read each other's shared memory). cluster_x == 1 launches
// without clusters. PRECOND: grid.x % cluster_x == 0; cluster_x <= 8 (the portable limit); sm_90 if > 1.
template <class... KernelParams, class... Args>
void launch_clustered(void (*kernel)(KernelParams...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                      unsigned cluster_x, Args&&... args) {
  apply_smem_carveout(kernel);
  cudaLaunchAttribute attribute[2];
  const cudaLaunchConfig_t config =
      clustered_config(grid, block, smem_bytes, stream, cluster_x, programmatic_dependent_launch(), attribute);
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// How many clusters of cluster_x CTAs of `kernel` (block threads, smem_bytes of dynamic shared memory) the device
// keeps resident at once (cudaOccupancyMaxActiveClusters). PRECOND: sm_90; the kernel's dynamic shared-memory
// attribute already allows smem_bytes.
template <class... KernelParams>
int max_active_clusters(void (*kernel)(KernelParams...), dim3 grid, dim3 block, size_t smem_bytes,
                        unsigned cluster_x) {
  cudaLaunchAttribute attribute[2];
  const cudaLaunchConfig_t config = clustered_config(grid, block, smem_bytes, nullptr, cluster_x, false, attribute);
  int clusters = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  return clusters;
}

// max_active_clusters asked once per kernel, block, shared-memory size and cluster size, then remembered: the answer
// does not change while the process runs. PRECOND: as max_active_clusters'.
template <class... KernelParams>
int resident_clusters(void (*kernel)(KernelParams...), dim3 block, size_t smem_bytes, unsigned cluster_x) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, unsigned, size_t, unsigned>, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), block.x * block.y * block.z, smem_bytes,
                                   cluster_x);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  const int clusters = max_active_clusters(kernel, dim3(cluster_x), block, smem_bytes, cluster_x);
  known.emplace(key, clusters);
  return clusters;
}

}  // namespace qwen3::kernels
