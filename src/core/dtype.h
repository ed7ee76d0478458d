// Element types of checkpoint tensors and their conversions to float.
// The names are the safetensors spellings; the conversions are exact (bf16/f16/fp8 -> f32 loses nothing) and
// f32 -> bf16 rounds to nearest even, as torch does.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace qwen3 {

enum class DType : uint8_t { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

std::optional<DType> parse_dtype(std::string_view name);
std::string_view dtype_name(DType dtype);
size_t dtype_size(DType dtype);

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float bf16_to_f32(uint16_t bf16) { return bits_to_f32(uint32_t(bf16) << 16); }

// Round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits = f32_to_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

inline float bf16_round(float f) { return bf16_to_f32(f32_to_bf16(f)); }

float f16_to_f32(uint16_t h);
// OCP FP8 E4M3 (the "fn" variant torch uses: no infinities, 0x7f/0xff are NaN).
float f8e4m3_to_f32(uint8_t v);
float f8e5m2_to_f32(uint8_t v);

}  // namespace qwen3
