#include "cli/backend_factory.h"

#include "core/error.h"
#include "model/cpu_backend.h"
#ifdef QWEN3_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

namespace qwen3 {

bool cuda_backend_compiled() {
#ifdef QWEN3_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_device_available() {
#ifdef QWEN3_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name, const Checkpoint& checkpoint, int64_t context) {
  std::string chosen = name;
  if (chosen == "auto") chosen = cuda_device_available() ? "cuda" : "cpu";
  if (chosen == "cpu") return std::make_unique<CpuBackend>(checkpoint, context);
  if (chosen == "cuda") {
#ifdef QWEN3_HAVE_CUDA
    if (!cuda_device_available()) throw InputError("--backend cuda: no CUDA device is available");
    return make_cuda_backend(checkpoint, context);
#else
    throw InputError("--backend cuda: this build has no CUDA backend (configure with -DQWEN3_CUDA=ON)");
#endif
  }
  throw InputError("unknown backend '" + name + "' (expected auto, cpu or cuda)");
}

}  // namespace qwen3
