// A read-only memory mapping of a whole file (RAII). Weights are read straight from the mapping: no copy, and the
// kernel pages them in on first touch.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace qwen3 {

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);  // throws FormatError
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace qwen3
