// A non-owning view of a tensor stored elsewhere (usually an mmap'd safetensors file). Shapes follow PyTorch:
// a linear weight is (out_features, in_features), row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace qwen3 {

struct TensorView {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  uint64_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  int64_t cols() const { return shape.size() < 2 ? (shape.empty() ? 1 : shape[0]) : shape[1]; }
};

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace qwen3
