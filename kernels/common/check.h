// CUDA error checking for host code. Every runtime call is checked; a failure throws with the call and location,
// so the CLI prints one clear line instead of crashing later on garbage.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace qwen3 {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void cuda_check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess)
    throw CudaError(std::string("CUDA error: ") + cudaGetErrorString(status) + " (" + what + " at " + file + ":" +
                    std::to_string(line) + ")");
}

}  // namespace qwen3

#define CUDA_CHECK(call) ::qwen3::cuda_check((call), #call, __FILE__, __LINE__)

// After a kernel launch: catches bad launch configurations at once (the kernel itself runs asynchronously).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
