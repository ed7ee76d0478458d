#include "core/dtype.h"

#include <array>
#include <cmath>

namespace qwen3 {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 15> kDTypes{{
    {DType::BOOL, "BOOL", 1},
    {DType::U8, "U8", 1},
    {DType::I8, "I8", 1},
    {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::F8_E4M3, "F8_E4M3", 1},
    {DType::I16, "I16", 2},
    {DType::U16, "U16", 2},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::I32, "I32", 4},
    {DType::U32, "U32", 4},
    {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},
    {DType::I64, "I64", 8},
    {DType::U64, "U64", 8},
}};

}  // namespace

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

std::string_view dtype_name(DType dtype) { return kDTypes[size_t(dtype)].name; }
size_t dtype_size(DType dtype) { return kDTypes[size_t(dtype)].size; }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    float value = std::ldexp(float(mantissa), -24);
    return sign ? -value : value;
  }
  if (exponent == 31) return bits_to_f32(sign | 0x7f800000u | (mantissa << 13));
  return bits_to_f32(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

float f8e4m3_to_f32(uint8_t v) {
  const bool negative = v & 0x80;
  const int exponent = (v >> 3) & 0xf;
  const int mantissa = v & 0x7;
  float value;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0)
    value = std::ldexp(float(mantissa), -9);  // subnormal: m/8 * 2^-6
  else
    value = std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
  return negative ? -value : value;
}

float f8e5m2_to_f32(uint8_t v) { return f16_to_f32(uint16_t(v) << 8); }

}  // namespace qwen3
