// Every worked example of quants.md (verified there against ggml): golden bytes and values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "unit/quant/quant_test_util.h"

namespace sluice::quant {
namespace {

using testing::bits;

// §3.5 / §6.2 input: x[j] = (j - 12) * 0.25, j = 0..31.
std::vector<float> example_input() {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 12) * 0.25f;
  return x;
}

TEST(Examples, Q4_0Section3_5) {
  const std::vector<float> x = example_input();
  uint8_t blk[18];
  quantize_ref(DType::Q4_0, x.data(), blk, 32);
  const uint8_t want[18] = {0xC0, 0xB8, 0x6D, 0x6D, 0x5C, 0x5C, 0x5B, 0x4B, 0x4B,
                            0x3A, 0x3A, 0x39, 0x29, 0x28, 0x18, 0x18, 0x07, 0x07};
  EXPECT_EQ(0, std::memcmp(blk, want, 18));
  EXPECT_EQ(f16_to_f32(load_u16(blk)), -0.59375f);

  const int q[32] = {13, 13, 12, 12, 11, 11, 11, 10, 10, 9, 9, 8, 8, 8, 7, 7,
                     6,  6,  5,  5,  5,  4,  4,  3,  3,  3, 2, 2, 1, 1, 0, 0};
  float y[32];
  dequantize_ref(DType::Q4_0, want, y, 32);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(q[j] - 8) * -0.59375f) << j;  // value compare: q=8 gives -0.0
  }
  EXPECT_EQ(y[0], -2.96875f);
  EXPECT_EQ(y[4], -1.78125f);
  EXPECT_EQ(y[11], 0.0f);
  EXPECT_TRUE(std::signbit(y[11])) << "0 * negative d is -0.0 (§3.5)";
  EXPECT_EQ(y[31], 4.75f);
}

TEST(Examples, Q8_0Section6_2) {
  const std::vector<float> x = example_input();
  uint8_t blk[34];
  quantize_ref(DType::Q8_0, x.data(), blk, 32);
  EXPECT_EQ(blk[0], 0xCA);
  EXPECT_EQ(blk[1], 0x28);
  EXPECT_EQ(f16_to_f32(load_u16(blk)), 0.0374145508f);
  const int qs[32] = {-80, -74, -67, -60, -53, -47, -40, -33, -27, -20, -13, -7,  0,   7,   13,  20,
                      27,  33,  40,  47,  53,  60,  67,  74,  80,  87,  94,  100, 107, 114, 120, 127};
  for (int j = 0; j < 32; ++j) EXPECT_EQ(static_cast<int8_t>(blk[2 + j]), qs[j]) << j;
  float y[32];
  dequantize_ref(DType::Q8_0, blk, y, 32);
  EXPECT_EQ(y[31], 127 * 0.0374145508f);
  EXPECT_NEAR(y[31], 4.7516, 1e-4);
}

// §7.1: sc/m values, their 12 packed bytes, and back.
constexpr uint8_t kSc[8] = {1, 2, 3, 63, 17, 40, 5, 62};
constexpr uint8_t kM[8] = {0, 10, 20, 30, 33, 63, 7, 48};
constexpr uint8_t kPacked[12] = {0x41, 0x82, 0x03, 0xFF, 0x80, 0xCA, 0x14, 0xDE, 0x11, 0xF8, 0x75, 0x0E};

TEST(Examples, KScalePackingSection7_1) {
  uint8_t packed[12];
  pack_scale_min_k4(kSc, kM, packed);
  EXPECT_EQ(0, std::memcmp(packed, kPacked, 12));
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, kPacked, &sc, &m);
    EXPECT_EQ(sc, kSc[j]) << j;
    EXPECT_EQ(m, kM[j]) << j;
  }
}

TEST(Examples, KScalePackingRoundTripsAllValues) {
  std::mt19937_64 rng(77);
  for (int it = 0; it < 2000; ++it) {
    uint8_t sc[8], m[8], packed[12];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(rng() & 63);
      m[j] = static_cast<uint8_t>(rng() & 63);
    }
    pack_scale_min_k4(sc, m, packed);
    for (int j = 0; j < 8; ++j) {
      uint8_t s2, m2;
      get_scale_min_k4(j, packed, &s2, &m2);
      ASSERT_EQ(s2, sc[j]);
      ASSERT_EQ(m2, m[j]);
    }
  }
}

TEST(Examples, Q4_KSection7_2) {
  BlockQ4_K b{};
  b.d = 0x3800;     // 0.5
  b.dmin = 0x3400;  // 0.25
  std::memcpy(b.scales, kPacked, 12);
  b.qs[0] = 0x3A;
  b.qs[104] = 0x0F;
  float y[256];
  dequantize_ref(DType::Q4_K, &b, y, 256);
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[32], 0.5f);
  EXPECT_EQ(y[200], 35.75f);
  EXPECT_EQ(y[232], -12.0f);
}

TEST(Examples, Q5_KSection7_3) {
  BlockQ5_K b{};
  b.d = 0x3800;
  b.dmin = 0x3400;
  std::memcpy(b.scales, kPacked, 12);
  b.qs[0] = 0x3A;
  b.qh[0] = 0x03;
  float y[256];
  dequantize_ref(DType::Q5_K, &b, y, 256);
  EXPECT_EQ(y[0], 13.0f);
  EXPECT_EQ(y[32], 16.5f);
  EXPECT_EQ(y[64], -5.0f);
}

// §8.6: elements 0, 32, 64, 96 set through ql[0], ql[32], qh[0]; element 200 in the second half.
TEST(Examples, Q6_KSection8_6) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  b.scales[0] = 2;
  b.scales[2] = -3;
  b.scales[4] = 1;
  b.scales[6] = 4;
  // Codes L = q + 32 for q = 5, -7, 31, -32 at elements 0, 32, 64, 96.
  const int L[4] = {37, 25, 63, 0};
  b.ql[0] = static_cast<uint8_t>((L[0] & 15) | (L[2] & 15) << 4);
  b.ql[32] = static_cast<uint8_t>((L[1] & 15) | (L[3] & 15) << 4);
  b.qh[0] = static_cast<uint8_t>((L[0] >> 4) | (L[1] >> 4) << 2 | (L[2] >> 4) << 4 | (L[3] >> 4) << 6);
  EXPECT_EQ(b.ql[0], 0xF5);
  EXPECT_EQ(b.ql[32], 0x09);
  EXPECT_EQ(b.qh[0], 0x36);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(&b)[192 + 2], 0xFD);  // scales[2] = -3
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(&b)[208], 0x00);      // d at bytes 208-209
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(&b)[209], 0x38);
  // Second half: element 200 = high nibble of ql[72], bits 4-5 of qh[40], scales[12].
  b.ql[72] = 0xA0;
  b.qh[40] = 0x10;
  b.scales[12] = -1;

  float y[256];
  dequantize_ref(DType::Q6_K, &b, y, 256);
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[32], 10.5f);
  EXPECT_EQ(y[64], 15.5f);
  EXPECT_EQ(y[96], -64.0f);
  EXPECT_EQ(y[1], -32.0f);  // all-zero code is -32: 0.5 * 2 * -32
  EXPECT_EQ(y[33], 48.0f);  // group 2: 0.5 * -3 * -32
  EXPECT_EQ(y[16], 0.0f);   // group 1 has scale 0
  EXPECT_EQ(y[200], 3.0f);
  EXPECT_EQ(y[201], 16.0f);  // group 12, code -32: 0.5 * -1 * -32
}

// §9.4: Q8_K of x[i] = ((i mod 32) - 12) * 0.25.
TEST(Examples, Q8_KSection9_4) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 32 - 12) * 0.25f;
  BlockQ8_K b;
  quantize_row_q8_k_ref(x.data(), &b, 256);
  EXPECT_EQ(b.d, -0.0374015756f);
  EXPECT_EQ(b.d, 1 / (-127.0f / 4.75f));  // d = 1/iscale (here also equal to -max/127)
  const int head[15] = {80, 74, 67, 60, 53, 47, 40, 33, 27, 20, 13, 7, 0, -7, -13};
  for (int i = 0; i < 15; ++i) EXPECT_EQ(b.qs[i], head[i]) << i;
  EXPECT_EQ(b.qs[255], -127);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(b.bsums[g], g % 2 == 0 ? 481 : -1230) << g;

  // Ties go to even: max 127 gives d = -1, iscale = -1.
  std::vector<float> t(256, 0.0f);
  t[0] = 127.0f;
  t[1] = 0.5f;
  t[2] = 1.5f;
  t[3] = -2.5f;
  quantize_row_q8_k_ref(t.data(), &b, 256);
  EXPECT_EQ(b.d, -1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 0);
  EXPECT_EQ(b.qs[2], -2);
  EXPECT_EQ(b.qs[3], 2);
}

}  // namespace
}  // namespace sluice::quant
