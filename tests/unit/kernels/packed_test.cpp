// The packed (x16) matmul kernels of every ISA set this CPU runs against dot_ref on the
// original rows: bit-identical outputs for every packed format, any row count (partial last
// group), several K, 1..9 activation rows and any split of the groups. And the SIMD activation
// quantizers byte-identical to the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/act.h"
#include "kernels/cpu_kernels.h"
#include "kernels/dot_ref.h"
#include "kernels/gemm.h"
#include "kernels/packed.h"
#include "quant/quant.h"
#include "unit/kernels/kernels_test_util.h"

namespace sluice::kernels {
namespace {

struct Problem {
  DType type;
  int64_t rows, k, m;
  std::vector<uint8_t> w;  // rows × row_bytes, file layout
  uint64_t row_bytes;
  std::vector<float> x;  // m × k
};

Problem make_problem(DType t, int64_t rows, int64_t k, int64_t m, uint64_t seed) {
  Problem p{t, rows, k, m, {}, dtype_row_bytes(t, static_cast<uint64_t>(k)), {}};
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = testing::weight_row(t, k, seed * 7919 + static_cast<uint64_t>(r), true);
    p.w.insert(p.w.end(), row.begin(), row.end());
  }
  for (int64_t i = 0; i < m; ++i) {
    const auto xr = testing::act_row(k, seed * 104729 + static_cast<uint64_t>(i), i % 3 == 2);
    p.x.insert(p.x.end(), xr.begin(), xr.end());
  }
  return p;
}

// y_ref[i·rows + r]: dot_ref for quantized types (activations quantized as the kernels' are);
// for float types, fused multiply-adds on f32 values in two chains (even and odd columns),
// added at the end.
std::vector<float> reference(const Problem& p) {
  std::vector<float> y(static_cast<size_t>(p.m * p.rows));
  const PackedFormat f = packed_format(p.type);
  const bool is_float = packed_act_format(f) == ActFormat::kF32;
  std::vector<float> wf(static_cast<size_t>(p.k));
  std::vector<uint8_t> act(act_row_bytes(p.type, p.k));
  for (int64_t i = 0; i < p.m; ++i) {
    const float* x = p.x.data() + i * p.k;
    if (!is_float) quantize_act_row(p.type, x, act.data(), p.k);
    for (int64_t r = 0; r < p.rows; ++r) {
      const uint8_t* wr = p.w.data() + r * p.row_bytes;
      float v = 0;
      if (is_float) {
        quant::dequantize_ref(p.type, wr, wf.data(), p.k);
        float chain[2] = {0, 0};
        for (int64_t c = 0; c < p.k; ++c) chain[c % 2] = std::fma(wf[c], x[c], chain[c % 2]);
        v = chain[0] + chain[1];
      } else {
        v = dot_ref(p.type, wr, act.data(), p.k);
      }
      y[i * p.rows + r] = v;
    }
  }
  return y;
}

struct Packed {
  PackedMatrix w;
  std::vector<uint8_t> act;  // m rows of act_row_stride bytes (64-aligned stride; vector data is 16-aligned, enough)
  ActRows rows;
};

Packed pack(const Problem& p, const CpuKernels& k, PackedFormat f = PackedFormat::kNone) {
  Packed out{pack_alloc(p.type, p.rows, p.k, f), {}, {}};
  pack_groups(out.w, p.w.data(), p.row_bytes, 0, out.w.groups);
  const ActFormat af = packed_act_format(out.w.format);
  const uint64_t stride = act_row_stride(af, p.k);
  out.act.assign(stride * static_cast<uint64_t>(p.m), 0xCD);
  for (int64_t i = 0; i < p.m; ++i) cpu_quantize_act(k, af, p.x.data() + i * p.k, p.k, out.act.data() + i * stride);
  out.rows = ActRows{af, out.act.data(), stride, p.k};
  return out;
}

std::vector<float> run(const CpuKernels& k, const Packed& pk, const Problem& p, int64_t split) {
  std::vector<float> y(static_cast<size_t>(p.m * p.rows), std::nanf(""));
  GemmArgs a;
  a.format = pk.w.format;
  a.w = pk.w.data.data();
  a.group_bytes = pk.w.group_bytes;
  a.k = p.k;
  a.rows = p.rows;
  a.a = pk.rows;
  a.m = p.m;
  a.y = y.data();
  a.ldy = p.rows;
  const GemmKernel g = cpu_gemm(k, pk.w.format);
  const int64_t cut = std::min(split, pk.w.groups);
  g(a, 0, cut);
  g(a, cut, pk.w.groups);
  return y;
}

int64_t count_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += std::memcmp(&a[i], &b[i], 4) != 0;
  return bad;
}

// unpack_row gives back the bytes a row was packed from, for every packed format (the tied
// embedding reads its rows this way): random bytes, so every bit of every field is exercised,
// rows in a partial last group too.
TEST(Packed, UnpackRowGivesBackTheFileBytes) {
  struct Case {
    DType type;
    PackedFormat f;
  };
  const Case cases[] = {
      {DType::Q4_0, PackedFormat::kNone}, {DType::Q5_0, PackedFormat::kNone}, {DType::Q8_0, PackedFormat::kNone},
      {DType::Q4_K, PackedFormat::kNone}, {DType::Q6_K, PackedFormat::kNone}, {DType::Q6_K, PackedFormat::kQ6_K8},
      {DType::F32, PackedFormat::kNone},  {DType::F16, PackedFormat::kNone},  {DType::BF16, PackedFormat::kNone}};
  std::mt19937_64 rng(7);
  for (const Case& c : cases) {
    const int64_t rows = 37, k = 512;
    const uint64_t rb = dtype_row_bytes(c.type, k);
    std::vector<uint8_t> w(rb * rows);
    for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
    PackedMatrix m = pack_alloc(c.type, rows, k, c.f);
    pack_groups(m, w.data(), rb, 0, m.groups);
    std::vector<uint8_t> row(rb);
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(row.begin(), row.end(), 0xEE);
      unpack_row(m, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), w.data() + r * rb, rb), 0) << packed_format_name(m.format) << " row " << r;
    }
  }
}

TEST(PackedGemm, BitIdenticalToDotRefOnEveryIsa) {
  const DType types[] = {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K,
                         DType::Q6_K, DType::F32,  DType::F16,  DType::BF16};
  int cases = 0;
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    for (DType t : types) {
      const bool kq = t == DType::Q4_K || t == DType::Q6_K;
      const bool fl = packed_act_format(packed_format(t)) == ActFormat::kF32;  // as reference()
      // Float rows may have any length: an odd one ends on the even chain alone.
      const std::vector<int64_t> ks = kq   ? std::vector<int64_t>{256, 768, 1536}
                                      : fl ? std::vector<int64_t>{32, 37, 96, 640, 1536}
                                           : std::vector<int64_t>{32, 96, 640, 1536};
      uint64_t seed = 1 + static_cast<uint64_t>(t) * 1000;
      for (int64_t kk : ks) {
        for (int64_t rows : {16, 37, 80}) {
          // Float rows past 8 take the prefill tile of two groups × 6 rows (9: a chunk of 6 and
          // one of 3; 16: 6, 6 and 4), a last odd group the one-group tile.
          for (int64_t m : fl ? std::vector<int64_t>{1, 2, 3, 4, 5, 9, 16} : std::vector<int64_t>{1, 2, 3, 4, 5, 9}) {
            const Problem p = make_problem(t, rows, kk, m, ++seed);
            const std::vector<float> ref = reference(p);
            // Q6_K also in its byte-code layout (the int8 lm_head option).
            std::vector<PackedFormat> formats = {PackedFormat::kNone};
            if (t == DType::Q6_K) formats.push_back(PackedFormat::kQ6_K8);
            for (PackedFormat f : formats) {
              const Packed pk = pack(p, *k, f);
              for (int64_t split : {int64_t{0}, int64_t{1}, int64_t{3}}) {
                const std::vector<float> got = run(*k, pk, p, split);
                ASSERT_EQ(count_mismatch(got, ref), 0)
                    << k->isa << " " << packed_format_name(pk.w.format) << " k=" << kk << " rows=" << rows << " m=" << m
                    << " split=" << split << " first: got " << got[0] << " ref " << ref[0];
                ++cases;
              }
            }
          }
        }
      }
    }
    std::printf("packed gemm: %s checked\n", k->isa);
  }
  EXPECT_GT(cases, 0);
}

// Outputs depend only on (row, activation row): any M and any group range give the same bits.
TEST(PackedGemm, BatchAndSplitInvariant) {
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    for (DType t : {DType::Q4_0, DType::Q6_K, DType::BF16}) {
      const Problem p = make_problem(t, 48, 512, 7, 99);
      const Packed pk = pack(p, *k);
      const std::vector<float> all = run(*k, pk, p, 1);
      for (int64_t i = 0; i < p.m; ++i) {
        Problem one = p;
        one.m = 1;
        one.x.assign(p.x.begin() + i * p.k, p.x.begin() + (i + 1) * p.k);
        const std::vector<float> alone = run(*k, pack(one, *k), one, 2);
        EXPECT_EQ(std::memcmp(alone.data(), all.data() + i * p.rows, 4 * static_cast<size_t>(p.rows)), 0)
            << k->isa << " " << dtype_name(t) << " row " << i;
      }
    }
  }
}

std::vector<float> tricky_row(int64_t n, uint64_t seed, int kind) {
  std::vector<float> x = testing::act_row(n, seed, kind == 1);
  std::mt19937_64 rng(seed);
  switch (kind) {
    case 2: std::fill(x.begin(), x.begin() + n / 2, 0.0f); break;  // zero blocks
    case 3:                                                        // ±max ties, negative first
      for (int64_t b = 0; b < n; b += 32) {
        x[b] = -3.0f;
        x[b + 5] = 3.0f;
      }
      break;
    case 4:  // exact half steps
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int>(rng() % 255) - 127) * 0.5f;
      break;
    case 5:  // tiny (subnormal f16 d)
      for (auto& v : x) v *= 1e-7f;
      break;
    case 6:  // scale exactly 1 (amax 127): codes are roundf of the inputs themselves, at the
             // values where a cheap rounding rule goes wrong (0.49999997 + 0.5 rounds to 1)
      for (int64_t b = 0; b + 32 <= n; b += 32) {
        const float below_half = std::nextafter(0.5f, 0.0f);
        const float v[8] = {127.0f, below_half, -below_half, 0.5f, -2.5f, 126.5f, std::nextafter(1.5f, 0.0f), -0.0f};
        for (int i = 0; i < 8; ++i) x[b + i] = v[i];
      }
      break;
    default: break;
  }
  return x;
}

TEST(ActQuantize, SimdMatchesReferenceBytes) {
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    for (ActFormat f : {ActFormat::kA8_32, ActFormat::kA8_256}) {
      // 8 blocks of 32 (the one-block path alone), 48 (groups of 16 alone), 25 (both).
      for (int64_t n : {256, 1536, 6144, 800}) {
        if (n % act_block_elems(f) != 0) continue;
        for (int kind = 0; kind < 7; ++kind) {
          for (uint64_t seed = 0; seed < 8; ++seed) {
            const std::vector<float> x = tricky_row(n, 31 * seed + static_cast<uint64_t>(kind), kind);
            const uint64_t stride = act_row_stride(f, n);
            std::vector<uint8_t> ref(stride, 0), got(stride, 0);
            quantize_act_ref(f, x.data(), n, ref.data());
            cpu_quantize_act(*k, f, x.data(), n, got.data());
            ASSERT_EQ(std::memcmp(ref.data(), got.data(), stride), 0)
                << k->isa << " format " << static_cast<int>(f) << " n=" << n << " kind=" << kind << " seed=" << seed;
          }
        }
      }
    }
  }
}

// NaN and ±Inf inputs give the reference's bytes on every set: NaN never wins a block's maximum
// (the reference's scans skip it), its code is the reference's int8 cast of what the rounding
// makes of it, and the sums add those codes. Lanes of either half of a 16-lane load, negative
// NaN, a NaN with a payload, whole NaN blocks and blocks whose maximum is infinite.
TEST(ActQuantize, NanAndInfBytesMatchReferenceOnEveryIsa) {
  const float specials[] = {std::nanf(""), -std::nanf(""), std::nanf("0x1234"), INFINITY, -INFINITY};
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    for (ActFormat f : {ActFormat::kA8_32, ActFormat::kA8_256}) {
      for (int64_t n : {256, 1536, 6144, 800}) {
        if (n % act_block_elems(f) != 0) continue;
        for (uint64_t seed = 0; seed < 6; ++seed) {
          std::vector<float> x = testing::act_row(n, 77 + seed);
          std::mt19937_64 rng(seed);
          const int rate = seed < 3 ? 8 : 64;  // dense, then sparse (most blocks keep a finite maximum)
          for (auto& v : x)
            if (rng() % rate == 0) v = specials[rng() % (seed % 2 ? 5 : 3)];    // odd seeds add ±Inf
          std::fill(x.begin(), x.begin() + act_block_elems(f), std::nanf(""));  // an all-NaN block
          const uint64_t stride = act_row_stride(f, n);
          std::vector<uint8_t> ref(stride, 0), got(stride, 0);
          quantize_act_ref(f, x.data(), n, ref.data());
          cpu_quantize_act(*k, f, x.data(), n, got.data());
          ASSERT_EQ(std::memcmp(ref.data(), got.data(), stride), 0)
              << k->isa << " format " << static_cast<int>(f) << " n=" << n << " seed=" << seed;
        }
      }
    }
  }
}

// The codes' rounding at every boundary the quantizer can meet: blocks whose scale is exactly
// 1 (a 127 first), then every k + 0.5 and its neighbours one and two ulps away, k in
// [-127, 126], and ±0.49999997: each set's codes are roundf's (half away from zero), checked
// against the rule itself, not only against the reference.
TEST(ActQuantize, CodesRoundHalfAwayFromZeroAtEveryBoundary) {
  std::vector<float> vals;
  for (int k = -127; k <= 126; ++k) {
    const float h = static_cast<float>(k) + 0.5f;
    const float dn = std::nextafter(h, -1000.0f), up = std::nextafter(h, 1000.0f);
    for (float v : {h, dn, up, std::nextafter(dn, -1000.0f), std::nextafter(up, 1000.0f)})
      if (std::fabs(v) <= 127.0f) vals.push_back(v);
  }
  vals.push_back(std::nextafter(0.5f, 0.0f));
  vals.push_back(-std::nextafter(0.5f, 0.0f));
  std::vector<float> x;
  for (size_t i = 0; i < vals.size(); i += 31) {
    x.push_back(127.0f);
    for (size_t j = i; j < i + 31; ++j) x.push_back(j < vals.size() ? vals[j] : 0.0f);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  ASSERT_EQ(n % 32, 0);
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    std::vector<uint8_t> got(act_row_stride(ActFormat::kA8_32, n));
    cpu_quantize_act(*k, ActFormat::kA8_32, x.data(), n, got.data());
    const auto* codes = reinterpret_cast<const int8_t*>(got.data());
    int wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = std::round(x[i]);  // scale 1: the code is the value rounded
      if (static_cast<float>(codes[i]) != want && ++wrong <= 5)
        ADD_FAILURE() << k->isa << ": " << x[i] << " -> " << int{codes[i]} << ", roundf gives " << want;
    }
    EXPECT_EQ(wrong, 0) << k->isa;
  }
}

// The reference activation layout carries exactly quantize_act_row's codes and scales.
TEST(ActQuantize, ReferenceEqualsDotRefActivation) {
  for (DType wt : {DType::Q4_0, DType::Q6_K}) {
    const ActFormat f = packed_act_format(packed_format(wt));
    const int64_t n = 1024;
    const std::vector<float> x = testing::act_row(n, 5, true);
    std::vector<uint8_t> mine(act_row_stride(f, n)), theirs(act_row_bytes(wt, n));
    quantize_act_ref(f, x.data(), n, mine.data());
    quantize_act_row(wt, x.data(), theirs.data(), n);
    const ActRows v{f, mine.data(), act_row_stride(f, n), n};
    const std::vector<float> a = testing::decode_act(vec_dot_type(wt), theirs.data(), n);
    const int64_t be = act_block_elems(f);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(static_cast<float>(v.qs(0)[i]) * v.d(0)[i / be], a[i]) << i;
  }
}

}  // namespace
}  // namespace sluice::kernels
