// f16 / bf16 conversions (base/fp16.h), which every scale in every block goes through.
// Decoding is checked exhaustively against an ldexp formula, encoding against a nearest-value
// search over the f16 table, and at hand-picked ties.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "base/fp16.h"
#include "unit/quant/quant_test_util.h"

namespace sluice {
namespace {

using quant::testing::bits;

// binary16 value of h from its fields: (1024 + man) * 2^(exp - 25), subnormals man * 2^-24.
float f16_formula(uint16_t h) {
  const int exp = (h >> 10) & 31, man = h & 1023;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exp == 31) return man == 0 ? sign * INFINITY : NAN;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -24);
  return sign * std::ldexp(static_cast<float>(1024 + man), exp - 25);
}

TEST(F16, DecodeAllPatternsMatchesFormula) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    const float want = f16_formula(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(bits(got) >> 31, h >> 15) << "NaN keeps its sign, " << std::hex << h;
    } else {
      ASSERT_EQ(bits(got), bits(want)) << std::hex << h;  // also separates -0 from +0
    }
  }
}

TEST(F16, RoundTripAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    const uint16_t back = f32_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_to_f32(back))) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// Independent encoder: nearest finite f16 by bisection over the (monotonic) positive patterns
// 0x0000..0x7BFF, ties to the even pattern; beyond 65504 + half an ulp (65520) -> Inf.
uint16_t f16_nearest(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7C00;
  uint32_t lo = 0, hi = 0x7BFF;  // invariant: value(lo) <= a; find the last pattern <= a
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (f16_to_f32(static_cast<uint16_t>(mid)) <= a) lo = mid;
    else hi = mid - 1;
  }
  if (lo == 0x7BFF) return sign | 0x7BFF;  // a in [65504, 65520)
  const double below = f16_to_f32(static_cast<uint16_t>(lo));
  const double above = f16_to_f32(static_cast<uint16_t>(lo + 1));
  const double da = a - below, db = above - a;
  const uint32_t r = da < db ? lo : db < da ? lo + 1 : ((lo & 1) ? lo + 1 : lo);
  return static_cast<uint16_t>(sign | r);
}

TEST(F16, EncodeRandomMatchesNearestSearch) {
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 200000; ++i) {
    // Exponents spread over the whole f16 range and a little beyond, both signs.
    const uint32_t exp = 100 + static_cast<uint32_t>(rng() % 50);  // 2^-27 .. 2^22
    const uint32_t u = static_cast<uint32_t>(rng() & 0x807FFFFFu) | exp << 23;
    const float f = bits_f32(u);
    ASSERT_EQ(f32_to_f16(f), f16_nearest(f)) << std::hex << u;
  }
}

TEST(F16, EncodeTiesRoundToEven) {
  const struct {
    float in;
    uint16_t out;
  } cases[] = {
      {1.0f + 0x1p-11f, 0x3C00},      // halfway 1 .. 1+2^-10: even is 1
      {1.0f + 3 * 0x1p-11f, 0x3C02},  // halfway 1+2^-10 .. 1+2^-9: even is ...02
      {-(1.0f + 3 * 0x1p-11f), 0xBC02},
      {2048.0f + 1.0f, 0x6800},  // ulp 2 at 2048: 2049 -> 2048
      {2048.0f + 3.0f, 0x6802},  // 2051 -> 2052
      {0x1p-25f, 0x0000},        // halfway 0 .. smallest subnormal: to 0
      {-0x1p-25f, 0x8000},
      {3 * 0x1p-25f, 0x0002},         // halfway 2^-24 .. 2^-23: even (2 * 2^-24)
      {5 * 0x1p-25f, 0x0002},         // halfway 2*2^-24 .. 3*2^-24: even
      {0x1p-14f - 0x1p-25f, 0x0400},  // halfway largest subnormal .. smallest normal
      {65504.0f + 16.0f, 0x7C00},     // halfway 65504 .. 65536: overflows to Inf
      {65504.0f + 15.99f, 0x7BFF},
      {-65520.0f, 0xFC00},
      {0x1p-25f * 1.0000001f, 0x0001},  // just above the 0 tie
  };
  for (const auto& c : cases) EXPECT_EQ(f32_to_f16(c.in), c.out) << c.in;
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7C00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xFC00);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(bits_f32(0x7F800001u)))));  // sNaN with a low payload
}

TEST(BF16, RoundTripAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits(f), h << 16);
    const uint16_t back = f32_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_EQ(back, h | 0x40) << "NaN is made quiet, " << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(BF16, EncodeRoundsToNearestEven) {
  const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3F808000u, 0x3F80},                         // tie, even stays
      {0x3F818000u, 0x3F82},                         // tie, odd rounds up
      {0x3F808001u, 0x3F81},                         // above the tie
      {0x3F807FFFu, 0x3F80},                         // below the tie
      {0xBF818000u, 0xBF82},                         // sign independent
      {0x7F7F8000u, 0x7F80},                         // tie at the top of the range: odd -> Inf
      {0x7F7F7FFFu, 0x7F7F}, {0x00008000u, 0x0000},  // subnormal tie, even
      {0x00018000u, 0x0002}, {0x7F800000u, 0x7F80},  // Inf
      {0x7F800001u, 0x7FC0},                         // signalling NaN with only low payload bits -> quiet, not Inf
      {0xFF810000u, 0xFFC1}, {0x7FC00000u, 0x7FC0},
  };
  for (const auto& c : cases) EXPECT_EQ(f32_to_bf16(bits_f32(c.in)), c.out) << std::hex << c.in;
}

}  // namespace
}  // namespace sluice
