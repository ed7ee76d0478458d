#include <atomic>

#include "kernels/common/launch.cuh"

namespace qwen3::kernels {
namespace {
std::atomic<bool> g_pdl{false};
}

void set_programmatic_dependent_launch(bool enabled) {
  int device = 0, major = 0;
  if (enabled && cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess)
    enabled = major >= 9;
  g_pdl.store(enabled);
}

bool programmatic_dependent_launch() { return g_pdl.load(std::memory_order_relaxed); }

}  // namespace qwen3::kernels
