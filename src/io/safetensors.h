// The safetensors format, read strictly: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// ({name: {dtype, shape, data_offsets: [begin, end)}}, optional "__metadata__": {string: string}), then the data.
// Everything is validated before any tensor is touched, so a lying header can never make us read outside the file:
// header size limit, JSON validity, duplicate keys, known dtypes, offsets contiguous from 0 and non-overlapping,
// end - begin == numel * dtype size with overflow-checked arithmetic, and file size == 8 + N + last end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "io/mapped_file.h"

namespace qwen3 {

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the start of the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;  // N
  std::vector<SafetensorsEntry> entries;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset() const { return 8 + header_bytes; }
};

// Parses and validates the header of a complete file image. Throws FormatError naming the problem.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file);

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);  // throws FormatError (message names the file)

  const SafetensorsHeader& header() const { return header_; }
  const std::filesystem::path& path() const { return map_.path(); }
  // All tensors by name. Views point into the mapping (or, for a tensor whose offset is not a multiple of its
  // element size, into an aligned copy owned by this object), valid while the object lives.
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  MappedFile map_;
  SafetensorsHeader header_;
  std::map<std::string, TensorView> tensors_;
  std::vector<std::unique_ptr<std::byte[]>> aligned_copies_;
};

}  // namespace qwen3
