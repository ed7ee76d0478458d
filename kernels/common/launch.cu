#include <atomic>
#include <stdexcept>
#include <string>

#include "kernels/common/launch.cuh"

namespace qwen3::kernels {
namespace {
std::atomic<bool> g_pdl{false};
std::atomic<int> g_smem_carveout{-1};
}  // namespace

void set_programmatic_dependent_launch(bool enabled) {
  int device = 0, major = 0;
  if (enabled && cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess)
    enabled = major >= 9;
  g_pdl.store(enabled);
}

bool programmatic_dependent_launch() { return g_pdl.load(std::memory_order_relaxed); }

void set_smem_carveout(int percent) {
  if (percent < -1 || percent > 100)
    throw std::invalid_argument("shared-memory carveout " + std::to_string(percent) + ": not -1 or a percent 0-100");
  g_smem_carveout.store(percent);
}

int smem_carveout() { return g_smem_carveout.load(std::memory_order_relaxed); }

int device_sm_count() {
  static const int sms = [] {
    int device = 0, count = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  }();
  return sms;
}

int device_optin_smem_bytes() {
  static const int bytes = [] {
    int device = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return optin;
  }();
  return bytes;
}

int device_compute_major() {
  static const int major = [] {
    int device = 0, value = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return value;
  }();
  return major;
}

}  // namespace qwen3::kernels
