// Narrowing F32 to BF16 and F16 rounds to the nearest value, ties to even
// (PyTorch's conversion), checked against the neighbours of each result in
// double; widening is exact.
#include "ssm/tensor/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace ssm {
namespace {

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

double widen(uint16_t h, bool bf16) {
  float f;
  if (bf16)
    bf16_to_f32(&h, &f, 1);
  else
    f16_to_f32(&h, &f, 1);
  return f;
}

uint16_t narrow(float f, bool bf16) {
  uint16_t h;
  if (bf16)
    f32_to_bf16(&f, &h, 1);
  else
    f32_to_f16(&f, &h, 1);
  return h;
}

// As IEEE rounding sees a code: infinity is the next power of two past the
// largest finite value (values from the midpoint to it overflow).
double value_of(uint16_t h, bool bf16) {
  const double v = widen(h, bf16);
  return std::isinf(v) ? std::copysign(std::ldexp(1.0, bf16 ? 128 : 16), v) : v;
}

// h is the nearest code to v among its neighbours (same sign), and on a tie
// the one with the even last bit.
void expect_nearest(float v, bool bf16) {
  const uint16_t h = narrow(v, bf16);
  const double got = std::fabs(value_of(h, bf16) - v);
  for (const int step : {-1, 1}) {
    const uint16_t n = static_cast<uint16_t>(h + step);
    if ((n & 0x7fff) == 0x7fff || ((n ^ h) & 0x8000)) continue;  // out of the sign's range
    const double other = value_of(n, bf16);
    if (std::isnan(other)) continue;
    const double d = std::fabs(other - v);
    EXPECT_LE(got, d) << (bf16 ? "bf16 " : "f16 ") << v << " -> " << h;
    if (got == d) {
      EXPECT_EQ(h & 1, 0) << (bf16 ? "bf16 tie " : "f16 tie ") << v;
    }
  }
}

TEST(Convert, NarrowingRoundsToNearestEvenOverEveryRange) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::uniform_int_distribution<uint32_t> exponent(1, 254), half_exponent(103, 142);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t sign = (bits(rng) & 1u) << 31, mantissa = bits(rng) & 0x7fffffu;
    expect_nearest(float_of(sign | exponent(rng) << 23 | mantissa), true);
    // 2^-24 (the smallest half) to 2^15 (below the largest).
    expect_nearest(float_of(sign | half_exponent(rng) << 23 | mantissa), false);
  }
  for (int i = 0; i < 20000; ++i) {  // the F16 subnormals and the edge to normals
    const float v = std::ldexp(static_cast<float>(bits(rng) % 4096) / 4096.f, -13) *
                    (i % 2 ? 1.f : -1.f);
    expect_nearest(v, false);
  }
}

TEST(Convert, TiesGoToTheEvenNeighbour) {
  // Halfway between 1 and the next code: stays at 1 (even); halfway between
  // the next and the one after: goes up to the even one.
  EXPECT_EQ(narrow(1.f + 0x1p-8f, true), 0x3f80);
  EXPECT_EQ(narrow(1.f + 3 * 0x1p-8f, true), 0x3f82);
  EXPECT_EQ(narrow(1.f + 0x1p-11f, false), 0x3c00);
  EXPECT_EQ(narrow(1.f + 3 * 0x1p-11f, false), 0x3c02);
  EXPECT_EQ(narrow(0x1p-25f, false), 0x0000);      // half the smallest subnormal: to 0
  EXPECT_EQ(narrow(3 * 0x1p-25f, false), 0x0002);  // 1.5 of it: to 2 (even)
}

TEST(Convert, OverflowInfinitiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(narrow(65504.f, false), 0x7bff);
  EXPECT_EQ(narrow(65519.f, false), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(narrow(65520.f, false), 0x7c00);  // the midpoint rounds to even: infinity
  EXPECT_EQ(narrow(-1e6f, false), 0xfc00);
  EXPECT_EQ(narrow(inf, false), 0x7c00);
  EXPECT_EQ(narrow(-inf, true), 0xff80);
  EXPECT_EQ(narrow(std::numeric_limits<float>::max(), true), 0x7f80);  // rounds up past the top
  EXPECT_TRUE(std::isnan(widen(narrow(nan, true), true)));
  EXPECT_TRUE(std::isnan(widen(narrow(nan, false), false)));
  // A NaN whose payload sits only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(widen(narrow(float_of(0x7f800001u), true), true)));
  EXPECT_TRUE(std::isnan(widen(narrow(float_of(0x7f800001u), false), false)));
  EXPECT_EQ(narrow(-0.f, true), 0x8000);
  EXPECT_EQ(narrow(-0.f, false), 0x8000);
}

TEST(Convert, EveryHalfWidensAndNarrowsBackToItself) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    for (const bool bf16 : {true, false}) {
      const float f = static_cast<float>(widen(static_cast<uint16_t>(h), bf16));
      if (std::isnan(f)) continue;
      EXPECT_EQ(narrow(f, bf16), h) << (bf16 ? "bf16 " : "f16 ") << h;
    }
  }
}

}  // namespace
}  // namespace ssm
