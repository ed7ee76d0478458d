// libFuzzer target: any byte string as a whole safetensors file. The parser must either return a header whose
// every entry lies inside the file, or throw FormatError; never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto header = qwen3::parse_safetensors({reinterpret_cast<const std::byte*>(data), size});
    for (const auto& entry : header.entries)
      if (header.data_offset() + entry.end > size) std::abort();  // a lie got through
  } catch (const qwen3::FormatError&) {
  }
  return 0;
}
