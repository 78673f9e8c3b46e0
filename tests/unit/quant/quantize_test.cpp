// Reference quantizers other than Q6_K (q6_k_quantize_test.cpp): quantize(dequantize(q)) == q
// on q = quantize(x), rounding rules at ties, all-zero blocks, Q8_K invariants.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "unit/quant/quant_test_util.h"

namespace sluice::quant {
namespace {

// Number of blocks b where quantize(dequantize(q_b)) != q_b, for q = quantize(x).
int64_t count_non_fixed_points(DType t, const std::vector<float>& x) {
  const DTypeInfo& info = dtype_info(t);
  const auto n = static_cast<int64_t>(x.size());
  const size_t bytes = dtype_row_bytes(t, static_cast<uint64_t>(n));
  std::vector<uint8_t> q(bytes), q2(bytes);
  std::vector<float> y(x.size());
  quantize_ref(t, x.data(), q.data(), n);
  dequantize_ref(t, q.data(), y.data(), n);
  quantize_ref(t, y.data(), q2.data(), n);
  int64_t bad = 0;
  for (int64_t b = 0; b < n / info.block_elems; ++b) {
    const int64_t off = b * info.block_bytes;
    if (std::memcmp(q.data() + off, q2.data() + off, info.block_bytes) != 0) ++bad;
  }
  return bad;
}

class FixedPoint : public ::testing::TestWithParam<DType> {};

TEST_P(FixedPoint, QuantizeOfDequantizeIsIdentity) {
  const DType t = GetParam();
  const int be = static_cast<int>(dtype_info(t).block_elems);
  const int64_t blocks = be == 1 ? 65536 : be == 32 ? 8192 : 2048;
  const uint64_t seed = 0xF1C5 + static_cast<uint32_t>(t);
  const std::vector<float> x = testing::random_input(blocks, be == 1 ? 32 : be, seed);
  EXPECT_EQ(count_non_fixed_points(t, std::vector<float>(x.begin(), x.begin() + blocks * be)), 0);
}

INSTANTIATE_TEST_SUITE_P(Quantizers, FixedPoint,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

// 32 values: v at index 0 (sets the block scale), then the listed values, then zeros.
std::vector<float> block_with(float v0, std::initializer_list<float> rest) {
  std::vector<float> x(32, 0.0f);
  x[0] = v0;
  int i = 1;
  for (float v : rest) x[i++] = v;
  return x;
}

// Codes of a legacy block, in element order (nibbles plus the Q5 high bit).
std::vector<int> legacy_codes(DType t, const uint8_t* blk) {
  const int qs_off = t == DType::Q4_0 ? 2 : t == DType::Q4_1 ? 4 : t == DType::Q5_0 ? 6 : 8;
  uint32_t qh = 0;
  if (t == DType::Q5_0 || t == DType::Q5_1) std::memcpy(&qh, blk + qs_off - 4, 4);
  std::vector<int> q(32);
  for (int e = 0; e < 32; ++e) {
    const uint8_t b = blk[qs_off + e % 16];
    q[e] = (e < 16 ? b & 15 : b >> 4) | static_cast<int>(((qh >> e) & 1) << 4);
  }
  return q;
}

// Ties: with d = 1 (id = 1) the legacy 4/5-bit quantizers round x/d half UP (trunc(x + 8.5)),
// Q8_0 rounds half AWAY from zero (roundf).
TEST(LegacyQuantize, TiesRoundHalfUp) {
  uint8_t blk[24];
  // Q4_0: max = -8 gives d = 1; codes are round_half_up(x) + 8.
  auto x = block_with(-8.0f, {2.5f, -2.5f, 0.5f, -0.5f, 7.5f});
  quantize_ref(DType::Q4_0, x.data(), blk, 32);
  EXPECT_EQ(load_u16(blk), 0x3C00);
  auto q = legacy_codes(DType::Q4_0, blk);
  // 7.5 -> t = 16 -> clamped to 15
  EXPECT_EQ(std::vector<int>(q.begin(), q.begin() + 6), (std::vector<int>{0, 11, 6, 9, 8, 15}));
  // Q5_0: max = -16 gives d = 1; codes are round_half_up(x) + 16.
  x = block_with(-16.0f, {2.5f, -2.5f, 15.5f});
  quantize_ref(DType::Q5_0, x.data(), blk, 32);
  q = legacy_codes(DType::Q5_0, blk);
  EXPECT_EQ(std::vector<int>(q.begin(), q.begin() + 4), (std::vector<int>{0, 19, 14, 31}));
  // Q4_1: min 0, max 15 gives d = 1, m = 0; codes are round_half_up(x - min).
  x = block_with(15.0f, {2.5f, 3.5f, 0.5f});
  quantize_ref(DType::Q4_1, x.data(), blk, 32);
  q = legacy_codes(DType::Q4_1, blk);
  EXPECT_EQ(std::vector<int>(q.begin(), q.begin() + 4), (std::vector<int>{15, 3, 4, 1}));
  // Q5_1: min 0, max 31.
  x = block_with(31.0f, {2.5f, 30.5f});
  quantize_ref(DType::Q5_1, x.data(), blk, 32);
  q = legacy_codes(DType::Q5_1, blk);
  EXPECT_EQ(std::vector<int>(q.begin(), q.begin() + 3), (std::vector<int>{31, 3, 31}));
}

TEST(LegacyQuantize, Q8_0TiesRoundAwayFromZero) {
  uint8_t blk[34];
  const auto x = block_with(127.0f, {2.5f, -2.5f, 0.5f, -0.5f, -127.0f});
  quantize_ref(DType::Q8_0, x.data(), blk, 32);
  EXPECT_EQ(load_u16(blk), 0x3C00);
  const int want[6] = {127, 3, -3, 1, -1, -127};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<int8_t>(blk[2 + i]), want[i]) << i;
}

TEST(LegacyQuantize, AllZeroBlocks) {
  const std::vector<float> x(32, 0.0f);
  uint8_t blk[34];
  // Q4_0/Q5_0: d = max / -8 = 0 / -8 = -0.0 (f16 0x8000), as in ggml and gguf-py.
  const struct {
    DType t;
    uint16_t d;
    int code;
  } cases[] = {{DType::Q4_0, 0x8000, 8}, {DType::Q4_1, 0, 0}, {DType::Q5_0, 0x8000, 16}, {DType::Q5_1, 0, 0}};
  for (const auto& c : cases) {
    quantize_ref(c.t, x.data(), blk, 32);
    EXPECT_EQ(load_u16(blk), c.d) << dtype_name(c.t);
    if (c.t == DType::Q4_1 || c.t == DType::Q5_1) {
      EXPECT_EQ(load_u16(blk + 2), 0) << "m = +0";
    }
    for (int q : legacy_codes(c.t, blk)) EXPECT_EQ(q, c.code) << dtype_name(c.t);
  }
  quantize_ref(DType::Q8_0, x.data(), blk, 32);
  for (uint8_t b : blk) EXPECT_EQ(b, 0);
  // Q6_K and Q8_K: all-zero blocks, bsums included.
  const std::vector<float> z(256, 0.0f);
  BlockQ6_K b6;
  quantize_ref(DType::Q6_K, z.data(), &b6, 256);
  const BlockQ6_K zero6{};
  EXPECT_EQ(std::memcmp(&b6, &zero6, sizeof b6), 0);
  BlockQ8_K b8;
  std::memset(&b8, 0x5A, sizeof b8);
  quantize_row_q8_k_ref(z.data(), &b8, 256);
  const BlockQ8_K zero8{};
  EXPECT_EQ(std::memcmp(&b8, &zero8, sizeof b8), 0);
}

// Q8_K: codes in [-127, 127], bsums are the sums of 16 codes, |d*q - x| <= |d|/2, d is
// -max/127 in f32 (sign opposite to the max-|x| element).
TEST(Q8_KQuantize, Invariants) {
  const int64_t blocks = 500;
  const std::vector<float> x = testing::random_input(blocks, kQK_K, 0x8C);
  std::vector<BlockQ8_K> q(blocks);
  quantize_row_q8_k_ref(x.data(), q.data(), blocks * kQK_K);
  std::vector<float> y(x.size());
  dequantize_row_q8_k_ref(q.data(), y.data(), blocks * kQK_K);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x.data() + b * kQK_K;
    float mx = 0.0f;
    for (int e = 0; e < kQK_K; ++e)
      if (std::fabs(xb[e]) > std::fabs(mx)) mx = xb[e];
    EXPECT_EQ(q[b].d, mx == 0.0f ? 0.0f : 1 / (-127.0f / mx));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[b].qs[16 * g + i];
      EXPECT_EQ(q[b].bsums[g], sum);
    }
    for (int e = 0; e < kQK_K; ++e) {
      EXPECT_GE(q[b].qs[e], -127);
      EXPECT_LE(std::fabs(y[b * kQK_K + e] - xb[e]), std::fabs(q[b].d) * 0.5001f) << b << " " << e;
    }
  }
}

}  // namespace
}  // namespace sluice::quant
