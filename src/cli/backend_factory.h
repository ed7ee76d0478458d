// Chooses and builds a compute backend. The CUDA engine is linked only when the project is built with it.
#pragma once

#include <memory>
#include <string>

#include "io/checkpoint.h"
#include "model/backend.h"

namespace qwen3 {

bool cuda_backend_compiled();
bool cuda_device_available();
// name: "auto" (cuda when compiled and a GPU is present, else cpu), "cpu" or "cuda".
std::unique_ptr<Backend> make_backend(const std::string& name, const Checkpoint& checkpoint, int64_t context);

}  // namespace qwen3
