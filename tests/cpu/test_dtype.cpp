#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"

namespace qwen3 {
namespace {

TEST(DType, NamesAndSizesRoundTrip) {
  for (auto name : {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
                    "I64", "U64"}) {
    auto dtype = parse_dtype(name);
    ASSERT_TRUE(dtype.has_value()) << name;
    EXPECT_EQ(dtype_name(*dtype), name);
  }
  EXPECT_FALSE(parse_dtype("bf16").has_value());
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F64), 8u);
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway too, and rounds up to the even 1 + 2^-6.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int i = 0; i < 1000; ++i) {
    const float x = dist(rng);
    const float r = bf16_round(x);
    EXPECT_LE(std::abs(r - x), std::abs(x) * std::ldexp(1.0f, -8));
  }
}

TEST(DType, HalfAndFp8Decode) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);   // exponent 7, mantissa 0
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);  // the largest finite E4M3
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(f8e4m3_to_f32(0x7f)));
  EXPECT_EQ(f8e5m2_to_f32(0x3c), 1.0f);
}

}  // namespace
}  // namespace qwen3
