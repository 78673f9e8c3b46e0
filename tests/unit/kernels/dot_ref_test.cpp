// The scalar reference of llama.cpp's quantized-activation dot products (kernels/dot_ref.h):
// the vec_dot_type table, the activation quantizers (bytes), and dot_ref against
// double-precision dots of the decoded rows, for all 15 weight types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fp16.h"
#include "kernels/dot_ref.h"
#include "kernels/ops.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "unit/kernels/kernels_test_util.h"
#include "unit/quant/quant_test_util.h"

namespace sluice::kernels {
namespace {

using quant::testing::supported_types;

std::string type_name(const ::testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); }

int64_t be(DType t) { return dtype_info(t).block_elems; }

TEST(VecDotType, TableMatchesLlamaCpp) {
  const std::pair<DType, DType> want[] = {
      {DType::F32, DType::F32},   {DType::F16, DType::F16},     {DType::BF16, DType::BF16},
      {DType::Q4_0, DType::Q8_0}, {DType::Q4_1, DType::Q8_1},   {DType::Q5_0, DType::Q8_0},
      {DType::Q5_1, DType::Q8_1}, {DType::Q8_0, DType::Q8_0},   {DType::Q2_K, DType::Q8_K},
      {DType::Q3_K, DType::Q8_K}, {DType::Q4_K, DType::Q8_K},   {DType::Q5_K, DType::Q8_K},
      {DType::Q6_K, DType::Q8_K}, {DType::IQ4_NL, DType::Q8_0}, {DType::IQ4_XS, DType::Q8_K},
  };
  EXPECT_EQ(std::size(want), supported_types().size());
  for (auto [w, a] : want) {
    EXPECT_EQ(vec_dot_type(w), a) << dtype_name(w);
    // The activation format's blocks line up with the weight's.
    EXPECT_EQ(dtype_info(w).block_elems, dtype_info(a).block_elems) << dtype_name(w);
    EXPECT_EQ(act_row_bytes(w, 1024), dtype_row_bytes(a, 1024)) << dtype_name(w);
  }
  EXPECT_EQ(act_row_bytes(DType::Q4_K, 512), 2u * 292u);
  EXPECT_EQ(act_row_bytes(DType::Q4_1, 64), 2u * 36u);
  EXPECT_EQ(act_row_bytes(DType::F16, 3), 6u);
}

TEST(VecDotType, Errors) {
  std::vector<float> x(512, 1.0f);
  std::vector<uint8_t> buf(4096, 0);
  for (DType t : {DType::Q8_K, DType::Q8_1, DType::IQ2_XXS, DType::I32, static_cast<DType>(4)}) {
    EXPECT_THROW(vec_dot_type(t), Error) << static_cast<int>(t);
    EXPECT_THROW(act_row_bytes(t, 256), Error);
    EXPECT_THROW(quantize_act_row(t, x.data(), buf.data(), 256), Error);
    EXPECT_THROW(dot_ref(t, buf.data(), buf.data(), 256), Error);
  }
  EXPECT_THROW(act_row_bytes(DType::Q4_K, 300), Error);
  EXPECT_THROW(quantize_act_row(DType::Q8_0, x.data(), buf.data(), 33), Error);
  EXPECT_THROW(dot_ref(DType::Q6_K, buf.data(), buf.data(), 128), Error);
  EXPECT_THROW(dot_ref(DType::Q4_0, buf.data(), buf.data(), -32), Error);
  EXPECT_EQ(dot_ref(DType::Q4_0, buf.data(), buf.data(), 0), 0.0f);
}

// ---- activation quantizers: bytes ----

class ActQuant : public ::testing::TestWithParam<DType> {};

// Q8_0 activations are quantize_ref(Q8_0), Q8_K ones quantize_row_q8_k_ref, F16/BF16 the
// round-to-nearest-even conversions, F32 a copy; Q8_1 is Q8_0's d and codes plus s.
TEST_P(ActQuant, BytesEqualTheReferenceQuantizers) {
  const DType w = GetParam(), a = vec_dot_type(w);
  const int64_t n = 2048;
  const std::vector<float> x = quant::testing::random_input(n / 32, 32, 0xAC7 + static_cast<int>(w));
  std::vector<uint8_t> got(act_row_bytes(w, n)), want(got.size());
  quantize_act_row(w, x.data(), got.data(), n);
  switch (a) {
    case DType::Q8_K: quant::quantize_row_q8_k_ref(x.data(), want.data(), n); break;
    case DType::Q8_1: {
      std::vector<uint8_t> q8(dtype_row_bytes(DType::Q8_0, n));
      quant::quantize_ref(DType::Q8_0, x.data(), q8.data(), n);
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto b0 = quant::load_block<quant::BlockQ8_0>(q8.data(), i);
        const auto b1 = quant::load_block<quant::BlockQ8_1>(got.data(), i);
        quant::BlockQ8_1 b;
        b.d = b0.d;
        std::memcpy(b.qs, b0.qs, 32);
        b.s = b1.s;  // checked in Q8_1.SumField
        quant::store_block(want.data(), i, b);
      }
      break;
    }
    default: quant::quantize_ref(a, x.data(), want.data(), n);
  }
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ActQuant, ::testing::ValuesIn(supported_types()), type_name);

// s = f16(Σqs · d) with ggml's unrounded f32 d = amax/127 (quantize_row_q8_1_ref), not the
// stored f16 d: on quants.md §6.2's block the two differ (0x4F01 vs 0x4F02).
TEST(Q8_1, SumField) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 12) * 0.25f;
  quant::BlockQ8_1 b;
  quantize_act_row(DType::Q4_1, x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x28CA);
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += b.qs[j];
  EXPECT_EQ(sum, 749);  // the §6.2 codes
  EXPECT_EQ(b.qs[0], -80);
  EXPECT_EQ(b.qs[31], 127);
  EXPECT_EQ(b.s, 0x4F01);  // f16(749 · 4.75/127) = f16(28.0138)
  EXPECT_EQ(b.s, f32_to_f16(749.0f * (4.75f / 127)));

  // Random blocks: the same rule everywhere, and an all-zero block gives s = 0.
  const int64_t n = 4096;
  std::vector<float> r = quant::testing::random_input(n / 32, 32, 0x51);
  std::vector<uint8_t> q(act_row_bytes(DType::Q5_1, n));
  quantize_act_row(DType::Q5_1, r.data(), q.data(), n);
  int zero_blocks = 0;
  for (int64_t i = 0; i < n / 32; ++i) {
    const auto blk = quant::load_block<quant::BlockQ8_1>(q.data(), i);
    float amax = 0;
    int s = 0;
    for (int j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(r[i * 32 + j]));
      s += blk.qs[j];
    }
    zero_blocks += amax == 0;
    ASSERT_EQ(blk.s, f32_to_f16(static_cast<float>(s) * (amax / 127))) << "block " << i;
  }
  EXPECT_GT(zero_blocks, 0);
}

// ggml's Q8_1 stores s in f16: a block whose codes sum to more than 65504/d overflows to Inf,
// and so does the Q4_1 / Q5_1 dot product (llama.cpp's CPU backend behaves the same).
TEST(Q8_1, SumOverflowsLikeGgml) {
  std::vector<float> x(32, 4096.0f);  // d = 32.25, Σqs = 32·127: s = 131072 > 65504
  quant::BlockQ8_1 b;
  quantize_act_row(DType::Q4_1, x.data(), &b, 32);
  EXPECT_EQ(b.s, 0x7C00);
  quant::BlockQ4_1 w{};
  w.d = f32_to_f16(1.0f);
  w.m = f32_to_f16(0.5f);
  EXPECT_TRUE(std::isinf(dot_ref(DType::Q4_1, &w, &b, 32)));
}

// ---- dot_ref ----

// Σ w·a in double over the decoded rows, Σ|w·a|, and the Q8_1 correction: dot_ref uses the
// block's f16 s where the decoded row has d·Σqs, so m·(s − d·Σqs) is added per block.
struct Exact {
  double dot = 0, abs = 0;
};

Exact exact_dot(DType w, const std::vector<uint8_t>& wrow, const std::vector<uint8_t>& arow, int64_t n) {
  std::vector<float> wf(static_cast<size_t>(n));
  quant::dequantize_ref(w, wrow.data(), wf.data(), n);
  const std::vector<float> af = testing::decode_act(vec_dot_type(w), arow.data(), n);
  Exact e;
  for (int64_t i = 0; i < n; ++i) {
    e.dot += static_cast<double>(wf[i]) * af[i];
    e.abs += std::fabs(static_cast<double>(wf[i]) * af[i]);
  }
  if (vec_dot_type(w) == DType::Q8_1) {
    const size_t m_off = 2;  // Q4_1 and Q5_1: f16 m right after d
    for (int64_t i = 0; i < n / 32; ++i) {
      const double m = f16_to_f32(quant::load_u16(wrow.data() + i * dtype_info(w).block_bytes + m_off));
      const auto b = quant::load_block<quant::BlockQ8_1>(arow.data(), i);
      double sa = 0;
      for (int j = 0; j < 32; ++j) sa += static_cast<double>(b.qs[j]) * f16_to_f32(b.d);
      e.dot += m * (static_cast<double>(f16_to_f32(b.s)) - sa);
      e.abs += std::fabs(m * f16_to_f32(b.s));
    }
  }
  return e;
}

class DotRef : public ::testing::TestWithParam<DType> {};

// The integer path is exact: only the f32 products and the f32 accumulation round. Weight rows
// are random bytes (any scale), activations random blocks of magnitudes 2^-12..2^12, some zero.
TEST_P(DotRef, EqualsDoubleDotOfDecodedRows) {
  const DType w = GetParam();
  double worst = 0;
  for (int64_t n : {be(w) == 1 ? int64_t(37) : be(w), int64_t(256), int64_t(1024), int64_t(4096)}) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      const uint64_t s = seed * 1000003 + static_cast<uint64_t>(n) * 7 + static_cast<uint64_t>(w);
      const auto wrow = testing::weight_row(w, n, s, /*sane=*/false);
      const int64_t in_blocks = (n + 31) / 32;
      std::vector<float> x = quant::testing::random_input(in_blocks, 32, s ^ 0xDEAD);
      x.resize(static_cast<size_t>(n));
      // Q8_1's s = f16(d·Σqs) overflows to Inf once a block's Σx passes 65504 (as in ggml;
      // see Q8_1.SumOverflowsLikeGgml): keep these inputs below 2^8.
      if (vec_dot_type(w) == DType::Q8_1)
        for (float& v : x) v = std::ldexp(v, -6);
      std::vector<uint8_t> arow(act_row_bytes(w, n));
      quantize_act_row(w, x.data(), arow.data(), n);
      const float got = dot_ref(w, wrow.data(), arow.data(), n);
      const Exact e = exact_dot(w, wrow, arow, n);
      ASSERT_TRUE(std::isfinite(got)) << "n " << n << " seed " << seed;
      const double err = std::fabs(got - e.dot);
      ASSERT_LE(err, 1e-5 * e.abs + 1e-30) << dtype_name(w) << " n " << n << " seed " << seed << ": got " << got
                                           << " want " << e.dot << " Σ|w·a| " << e.abs;
      if (e.abs > 0) worst = std::max(worst, err / e.abs);
    }
  }
  std::printf("%-7s max |dot_ref − exact| / Σ|w·a| = %.3g\n", std::string(dtype_name(w)).c_str(), worst);
}

// Against the f32 activations themselves the difference is the activation rounding. Two
// checks: (1) always, |dot_ref − Σ w·x| ≤ Σ|w|·(per-element rounding bound) + accumulation,
// outlier channels included; (2) quants.md §10.4's 2^-10·Σ|w·x| on realistic long rows
// (Gaussian, n ≥ 4096, no outliers). §10.4 is a typical size, not a worst case: with
// n = 1024 and Q8_K's 256-blocks a ~3σ row exceeds it, and one 20σ outlier channel in a block
// coarsens its neighbours' steps 20-fold (measured up to 20× over; printed below).
TEST_P(DotRef, CloseToUnquantizedActivations) {
  const DType w = GetParam(), act = vec_dot_type(w);
  double worst = 0, worst_outliers = 0;
  for (int64_t n : {int64_t(1024), int64_t(2048), int64_t(4096), int64_t(8192)}) {
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      const bool outliers = seed % 2 == 0;
      const uint64_t s = seed * 7919 + static_cast<uint64_t>(n) + 100 * static_cast<uint64_t>(w);
      const auto wrow = testing::weight_row(w, n, s, /*sane=*/true);
      const std::vector<float> x = testing::act_row(n, s ^ 0xBEEF, outliers);
      std::vector<uint8_t> arow(act_row_bytes(w, n));
      quantize_act_row(w, x.data(), arow.data(), n);
      const float got = dot_ref(w, wrow.data(), arow.data(), n);
      std::vector<float> wf(static_cast<size_t>(n));
      quant::dequantize_ref(w, wrow.data(), wf.data(), n);
      const std::vector<double> eb = testing::act_error_bound(act, x.data(), n);
      double want = 0, abs = 0, bound = 0;
      for (int64_t i = 0; i < n; ++i) {
        want += static_cast<double>(wf[i]) * x[i];
        abs += std::fabs(static_cast<double>(wf[i]) * x[i]);
        bound += std::fabs(static_cast<double>(wf[i])) * eb[i];
      }
      if (act == DType::Q8_1) {  // the min term: m·s with s ≈ d·Σqs = Σa (quants.md §9.3)
        for (int64_t b = 0; b < n / 32; ++b) {
          const double m = std::fabs(f16_to_f32(quant::load_u16(wrow.data() + b * dtype_info(w).block_bytes + 2)));
          const auto blk = quant::load_block<quant::BlockQ8_1>(arow.data(), b);
          double e = 0;
          for (int j = 0; j < 32; ++j) e += eb[b * 32 + j];
          bound += m * (2 * e + std::ldexp(std::fabs(f16_to_f32(blk.s)), -10));
        }
      }
      const double err = std::fabs(got - want);
      ASSERT_LE(err, bound + 1e-5 * abs + 1e-30)
          << dtype_name(w) << " n " << n << " seed " << seed << ": got " << got << " want " << want;
      if (outliers) {
        worst_outliers = std::max(worst_outliers, err / abs);
        continue;
      }
      if (n < 4096) continue;
      ASSERT_LE(err, (std::ldexp(1.0, -10) + 1e-5) * abs)
          << dtype_name(w) << " n " << n << " seed " << seed << ": got " << got << " want " << want;
      worst = std::max(worst, err / abs);
    }
  }
  std::printf("%-7s max |dot_ref − dot(w, x)| / Σ|w·x| = %.3g (n ≥ 4096; §10.4 bound %.3g); with outliers %.3g\n",
              std::string(dtype_name(w)).c_str(), worst, std::ldexp(1.0, -10), worst_outliers);
}

// The pointers need no alignment, and dot_ref reads nothing but the two rows.
TEST_P(DotRef, UnalignedRowsGiveTheSameBits) {
  const DType w = GetParam();
  const int64_t n = 512;
  const auto wrow = testing::weight_row(w, n, 77, true);
  const std::vector<float> x = testing::act_row(n, 78);
  std::vector<uint8_t> arow(act_row_bytes(w, n));
  quantize_act_row(w, x.data(), arow.data(), n);
  const float ref = dot_ref(w, wrow.data(), arow.data(), n);
  std::vector<uint8_t> wbuf(wrow.size() + 3), abuf(arow.size() + 5);
  std::memcpy(wbuf.data() + 3, wrow.data(), wrow.size());
  std::memcpy(abuf.data() + 5, arow.data(), arow.size());
  const float got = dot_ref(w, wbuf.data() + 3, abuf.data() + 5, n);
  EXPECT_EQ(quant::testing::bits(got), quant::testing::bits(ref));
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotRef, ::testing::ValuesIn(supported_types()), type_name);

// F32 weights: dot_ref is Σ w·a in 8 interleaved lanes, then ((0+4)+(1+5))+((2+6)+(3+7)).
TEST(DotRefF32, EightLaneOrder) {
  for (int64_t n : {1, 7, 8, 33, 1000}) {
    const std::vector<float> a = testing::act_row(n, 5 + n), b = testing::act_row(n, 9 + n);
    std::vector<uint8_t> act(act_row_bytes(DType::F32, n));
    quantize_act_row(DType::F32, b.data(), act.data(), n);
    EXPECT_EQ(std::memcmp(act.data(), b.data(), act.size()), 0);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n; ++i) {
      const float p = a[i] * b[i];
      acc[i % 8] = acc[i % 8] + p;
    }
    const float want = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    EXPECT_EQ(quant::testing::bits(dot_ref(DType::F32, a.data(), act.data(), n)), quant::testing::bits(want)) << n;
  }
}

// Hand-checked blocks: one element set, everything else zero codes.
TEST(DotRefExamples, SingleBlocks) {
  // Q4_0: d_w = 0.5, code 15 at element 20 (q − 8 = 7); all other codes 8 (value 0).
  quant::BlockQ4_0 w{};
  w.d = f32_to_f16(0.5f);
  for (auto& b : w.qs) b = 0x88;
  w.qs[4] = 0xF8;  // high nibble of byte 4 = element 20
  std::vector<float> x(32, 0.0f);
  x[20] = 127.0f;  // d_a = 1, a[20] = 127
  x[0] = -3.0f;
  quant::BlockQ8_0 a;
  quantize_act_row(DType::Q4_0, x.data(), &a, 32);
  EXPECT_EQ(dot_ref(DType::Q4_0, &w, &a, 32), 0.5f * 7 * 127);

  // Q4_K: d = 0.5, dmin = 0.25, sub-block 0 scale 2, min 3; code 5 at element 0, zeros elsewhere.
  // Activation: 256 values, a[0] = 127, a[1] = −127 (d_a = −1 after Q8_K's sign convention).
  quant::BlockQ4_K k{};
  k.d = f32_to_f16(0.5f);
  k.dmin = f32_to_f16(0.25f);
  const uint8_t sc[8] = {2, 0, 0, 0, 0, 0, 0, 0}, mn[8] = {3, 0, 0, 0, 0, 0, 0, 0};
  quant::pack_scale_min_k4(sc, mn, k.scales);
  k.qs[0] = 5;
  std::vector<float> y(256, 0.0f);
  y[0] = 127.0f;
  y[1] = -127.0f;
  y[40] = 7.0f;
  std::vector<uint8_t> q8(act_row_bytes(DType::Q4_K, 256));
  quantize_act_row(DType::Q4_K, y.data(), q8.data(), 256);
  // w[0] = 0.5·2·5 − 0.75 = 4.25, w[1] = −0.75 (sub-block 0), w[40] = 0 (sub-block 1: sc = m = 0).
  EXPECT_EQ(dot_ref(DType::Q4_K, &k, q8.data(), 256), 4.25f * 127 + (-0.75f) * (-127));
}

}  // namespace
}  // namespace sluice::kernels
