// Row ops and paged attention: (1) the references are accurate against double-precision math
// (libm exp/tanh, exact softmax attention); (2) every ISA set this CPU runs is bit-identical
// to the references, on lengths with and without tails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/cpu_kernels.h"
#include "kernels/rowops.h"

namespace sluice::kernels {
namespace {

std::vector<float> randn(int64_t n, uint64_t seed, float sigma = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

TEST(RowOpsRef, ExpAndTanhAreAccurate) {
  double worst_exp = 0, worst_tanh = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.001953125f) {
    const double e = std::exp(static_cast<double>(x));
    worst_exp = std::max(worst_exp, std::fabs(exp_ref(x) - e) / e);
  }
  for (float x = -12.0f; x <= 12.0f; x += 0.0001220703125f)
    worst_tanh = std::max(worst_tanh, std::fabs(tanh_ref(x) - std::tanh(static_cast<double>(x))));
  std::printf("exp_ref max rel err %.3g, tanh_ref max abs err %.3g\n", worst_exp, worst_tanh);
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_tanh, 3e-7);
  EXPECT_EQ(tanh_ref(100.0f), 1.0f);
  EXPECT_EQ(tanh_ref(-100.0f), -1.0f);
  EXPECT_EQ(exp_ref(0.0f), 1.0f);
}

TEST(RowOpsRef, OpsMatchTheirDefinitions) {
  const RowOps& r = rowops_ref();
  const int64_t n = 1536 + 7;
  const auto x = randn(n, 1, 3.0f), w = randn(n, 2), u = randn(n, 3);
  std::vector<float> y(n);
  r.rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double s = 1.0 / std::sqrt(ss / n + 1e-6);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i] * s * w[i], 1e-5 * std::fabs(x[i] * s * w[i]) + 1e-6);
  r.gelu_mul(x.data(), u.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double g = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    ASSERT_NEAR(y[i], g * u[i], 2e-6 * (std::fabs(g * u[i]) + std::fabs(v * u[i]))) << i;
  }
  r.sigmoid_mul(u.data(), x.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], u[i] / (1 + std::exp(-double(x[i]))), 1e-6 * std::fabs(u[i])) << i;
  y = x;
  r.softcap(y.data(), n, 30.0f);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], 30.0 * std::tanh(x[i] / 30.0), 1e-5);
  EXPECT_EQ(r.argmax(x.data(), n), std::max_element(x.begin(), x.end()) - x.begin());
}

// Every set's ops give the reference's bits.
TEST(RowOps, EveryIsaBitIdenticalToReference) {
  const RowOps& ref = rowops_ref();
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    const RowOps o = merged_ops(*k);
    for (int64_t n : {16, 37, 256, 640, 1536, 6144 + 5}) {
      const auto x = randn(n, 10 + n, 2.0f), w = randn(n, 20 + n), u = randn(n, 30 + n, 4.0f);
      std::vector<float> a(n), b(n);
      ref.rms_norm(x.data(), w.data(), a.data(), n, 1e-6f);
      o.rms_norm(x.data(), w.data(), b.data(), n, 1e-6f);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " rms_norm " << n;
      ref.rms_norm(x.data(), nullptr, a.data(), n, 1e-6f);
      o.rms_norm(x.data(), nullptr, b.data(), n, 1e-6f);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " rms_norm (no weight) " << n;
      a = u;
      b = u;
      ref.add_rms_norm(a.data(), x.data(), w.data(), n, 1e-6f);
      o.add_rms_norm(b.data(), x.data(), w.data(), n, 1e-6f);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " add_rms_norm " << n;
      ref.gelu_mul(x.data(), u.data(), a.data(), n);
      o.gelu_mul(x.data(), u.data(), b.data(), n);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " gelu_mul " << n;
      ref.sigmoid_mul(u.data(), x.data(), a.data(), n);
      o.sigmoid_mul(u.data(), x.data(), b.data(), n);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " sigmoid_mul " << n;
      a = x;  // in place, b == a: SiLU
      b = x;
      ref.sigmoid_mul(a.data(), a.data(), a.data(), n);
      o.sigmoid_mul(b.data(), b.data(), b.data(), n);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " sigmoid_mul (SiLU in place) " << n;
      a = u;
      b = u;
      ref.softcap(a.data(), n, 30.0f);
      o.softcap(b.data(), n, 30.0f);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " softcap " << n;
      a = x;
      b = x;
      ref.scale(a.data(), n, 0.37f);
      o.scale(b.data(), n, 0.37f);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " scale " << n;
      if (n % 2 == 0) {
        const auto cs = randn(n, 40 + n);
        a = x;
        b = x;
        ref.rope(a.data(), cs.data(), n);
        o.rope(b.data(), cs.data(), n);
        EXPECT_TRUE(same_bits(a, b)) << k->isa << " rope " << n;
      }
      EXPECT_EQ(ref.argmax(x.data(), n), o.argmax(x.data(), n)) << k->isa << " argmax " << n;
      std::vector<uint16_t> h1(n), h2(n);
      std::vector<float> wide = x;
      for (int64_t i = 0; i < n; i += 7) wide[i] *= (i % 3 == 0) ? 1e-6f : 3e4f;  // subnormal and large halves
      ref.to_f16(wide.data(), h1.data(), n);
      o.to_f16(wide.data(), h2.data(), n);
      EXPECT_EQ(h1, h2) << k->isa << " to_f16 " << n;
      ref.to_bf16(wide.data(), h1.data(), n);
      o.to_bf16(wide.data(), h2.data(), n);
      EXPECT_EQ(h1, h2) << k->isa << " to_bf16 " << n;
    }
    std::printf("row ops: %s checked\n", k->isa);
  }
}

// NaN and ±Inf as the reference treats them, on every set: softcap gives cap·tanh_ref, which
// answers ±1 with the sign of a NaN (its exp clamps NaN to the low end); argmax never picks a
// NaN, and a NaN first element is never exceeded (the answer is 0, also for an all-NaN row).
TEST(RowOps, NanAndInfTreatedAsReferenceOnEveryIsa) {
  const RowOps& ref = rowops_ref();
  const float nan = std::nanf(""), specials[] = {nan, -nan, INFINITY, -INFINITY};
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    const RowOps o = merged_ops(*k);
    for (int64_t n : {16, 37, 256, 6144 + 5}) {
      std::vector<float> x = randn(n, 50 + n, 3.0f);
      for (int64_t i = 1; i < n; i += 5) x[i] = specials[i % 4];
      std::vector<float> a = x, b = x;
      ref.softcap(a.data(), n, 30.0f);
      o.softcap(b.data(), n, 30.0f);
      EXPECT_TRUE(same_bits(a, b)) << k->isa << " softcap " << n;

      std::vector<float> y = randn(n, 60 + n);
      y[n / 2] = 1e9f;
      std::vector<std::vector<float>> rows;
      for (int64_t at : {int64_t{0}, n / 3, n - 1}) {  // one NaN before, after and at the tail of the maximum
        rows.push_back(y);
        rows.back()[at] = (at % 2) ? -nan : nan;
      }
      rows.push_back(y);
      for (int64_t i = 0; i < n; i += 3) rows.back()[i] = nan;  // NaN in every lane position, x[0] included
      rows.push_back(y);
      for (int64_t i = 1; i < n; i += 2) rows.back()[i] = nan;  // NaN next to the maximum's lane, x[0] finite
      rows.emplace_back(static_cast<size_t>(n), nan);           // all NaN
      rows.emplace_back(static_cast<size_t>(n), -INFINITY);     // no finite value
      rows.back()[n - 1] = nan;
      for (size_t r = 0; r < rows.size(); ++r)
        EXPECT_EQ(ref.argmax(rows[r].data(), n), o.argmax(rows[r].data(), n))
            << k->isa << " argmax " << n << " row " << r;
    }
  }
}

// A paged KV layout: `blocks` blocks of bt slots, rows of hd elements at a fixed offset.
struct PagedKv {
  KvElem elem;
  int hd, bt;
  uint64_t es, slot_stride, block_stride, k_off, v_off;
  std::vector<uint8_t> mem;
  std::vector<int32_t> table;
  std::vector<float> k, v;  // [pos × hd] the exact values stored (after rounding)

  PagedKv(KvElem e, int hd_, int bt_, int64_t n_pos, uint64_t seed) : elem(e), hd(hd_), bt(bt_) {
    es = e == KvElem::kF32 ? 4 : 2;
    slot_stride = es * static_cast<uint64_t>(hd) + 8;  // rows need not be packed
    k_off = 24;
    v_off = k_off + slot_stride * static_cast<uint64_t>(bt);
    block_stride = v_off + slot_stride * static_cast<uint64_t>(bt) + 40;
    const int64_t nb = (n_pos + bt - 1) / bt;
    mem.assign(block_stride * static_cast<uint64_t>(nb + 3), 0);
    for (int64_t b = 0; b < nb; ++b) table.push_back(static_cast<int32_t>((b * 5 + 2) % (nb + 3)));  // scattered
    // The permutation above must stay injective for nb + 3 slots; 5 is coprime with most sizes.
    std::vector<int32_t> sorted = table;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i] == sorted[i - 1])
        for (int64_t b = 0; b < nb; ++b) table[b] = static_cast<int32_t>(b);
    const auto kr = randn(n_pos * hd, seed), vr = randn(n_pos * hd, seed + 1);
    k.resize(kr.size());
    v.resize(vr.size());
    for (int64_t p = 0; p < n_pos; ++p)
      for (int i = 0; i < hd; ++i) {
        k[p * hd + i] = put(p, k_off, i, kr[p * hd + i]);
        v[p * hd + i] = put(p, v_off, i, vr[p * hd + i]);
      }
  }
  float put(int64_t pos, uint64_t off, int i, float x) {
    uint8_t* row = mem.data() + static_cast<uint64_t>(table[pos / bt]) * block_stride + off +
                   static_cast<uint64_t>(pos % bt) * slot_stride;
    if (elem == KvElem::kF32) {
      std::memcpy(row + 4 * i, &x, 4);
      return x;
    }
    const uint16_t h = elem == KvElem::kF16 ? f32_to_f16(x) : f32_to_bf16(x);
    std::memcpy(row + 2 * i, &h, 2);
    return elem == KvElem::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
  AttnArgs args(const float* q, float* out, int gs, int64_t lo, int64_t hi, float* scratch) const {
    AttnArgs a;
    a.q = q;
    a.out = out;
    a.gs = gs;
    a.hd = hd;
    a.scale = 0.7f;
    a.base = mem.data();
    a.block_stride = block_stride;
    a.k_off = k_off;
    a.v_off = v_off;
    a.slot_stride = slot_stride;
    a.table = table.data();
    a.block_tokens = bt;
    a.elem = elem;
    a.lo = lo;
    a.hi = hi;
    a.scratch = scratch;
    return a;
  }
};

TEST(Attention, ReferenceMatchesExactSoftmax) {
  std::vector<float> scratch(attn_scratch_floats());
  for (int hd : {32, 256, 512}) {
    const int gs = 8;
    PagedKv kv(KvElem::kF32, hd, 16, 700, hd);
    const auto q = randn(gs * hd, 5, 0.2f);
    for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 0}, {0, 63}, {0, 64}, {3, 511}, {189, 699}}) {
      std::vector<float> out(gs * hd);
      attention_ref(kv.args(q.data(), out.data(), gs, lo, hi, scratch.data()));
      for (int g = 0; g < gs; ++g) {
        std::vector<double> s;
        double mx = -1e300;
        for (int64_t j = lo; j <= hi; ++j) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += double(q[g * hd + i]) * kv.k[j * hd + i];
          s.push_back(0.7 * d);
          mx = std::max(mx, s.back());
        }
        double l = 0;
        for (double& x : s) l += (x = std::exp(x - mx));
        for (int i = 0; i < hd; ++i) {
          double o = 0;
          for (int64_t j = lo; j <= hi; ++j) o += s[j - lo] * kv.v[j * hd + i];
          ASSERT_NEAR(out[g * hd + i], o / l, 2e-5)
              << "hd " << hd << " [" << lo << ", " << hi << "] head " << g << " i " << i;
        }
      }
    }
  }
}

TEST(Attention, EveryIsaBitIdenticalToReference) {
  std::vector<float> s1(attn_scratch_floats()), s2(attn_scratch_floats());
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    const AttnKernel f = cpu_attention(*k);
    for (KvElem e : {KvElem::kF32, KvElem::kF16, KvElem::kBF16}) {
      for (int hd : {32, 64, 256, 512, 40}) {
        for (int gs : {1, 4, 8}) {
          PagedKv kv(e, hd, 16, 300, 100 + hd + gs);
          const auto q = randn(gs * hd, 7 + hd, 0.3f);
          for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 0}, {0, 70}, {17, 299}, {128, 191}}) {
            std::vector<float> a(gs * hd), b(gs * hd, 1.0f);
            attention_ref(kv.args(q.data(), a.data(), gs, lo, hi, s1.data()));
            f(kv.args(q.data(), b.data(), gs, lo, hi, s2.data()));
            ASSERT_TRUE(same_bits(a, b)) << k->isa << " elem " << int(e) << " hd " << hd << " gs " << gs << " [" << lo
                                         << "," << hi << "]";
          }
        }
      }
    }
    std::printf("attention: %s checked\n", k->isa);
  }
}

// Decode spreads a token's keys over the threads: chunk states computed in any split, then
// merged in order, must give the one-call kernel's bits (attention.h).
TEST(Attention, SplitChunksThenMergeBitIdenticalToOneCall) {
  std::vector<float> s1(attn_scratch_floats()), s2(attn_scratch_floats());
  int cases = 0;
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    const AttnChunksKernel chunks = cpu_attention_chunks(*k);
    const AttnMergeKernel merge = cpu_attention_merge(*k);
    for (KvElem e : {KvElem::kF32, KvElem::kF16}) {
      for (int hd : {64, 256, 40}) {
        for (int gs : {1, 4, 8}) {
          PagedKv kv(e, hd, 16, 300, 300 + hd + gs);
          const auto q = randn(gs * hd, 9 + hd, 0.3f);
          for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 0}, {0, 70}, {17, 299}, {128, 191}, {5, 263}}) {
            std::vector<float> a(gs * hd), b(gs * hd, 1.0f);
            attention_ref(kv.args(q.data(), a.data(), gs, lo, hi, s1.data()));
            const int64_t nc = attn_chunks(lo, hi), sf = attn_state_floats(gs, hd);
            std::vector<float> states(static_cast<size_t>(nc * sf), -1.0f);
            // Uneven pieces, computed out of order.
            const int64_t cut1 = nc / 3, cut2 = nc - nc / 4;
            const AttnArgs args = kv.args(q.data(), nullptr, gs, lo, hi, s2.data());
            chunks(args, cut2, nc, states.data() + cut2 * sf);
            chunks(args, 0, cut1, states.data());
            chunks(args, cut1, cut2, states.data() + cut1 * sf);
            // Heads merged in two pieces.
            merge(states.data(), nc, gs, hd, 0, gs / 2, b.data());
            merge(states.data(), nc, gs, hd, gs / 2, gs, b.data());
            ASSERT_TRUE(same_bits(a, b)) << k->isa << " elem " << int(e) << " hd " << hd << " gs " << gs << " [" << lo
                                         << "," << hi << "]";
            ++cases;
          }
        }
      }
    }
    std::printf("attention split+merge: %s checked\n", k->isa);
  }
  EXPECT_GT(cases, 0);
}

}  // namespace
}  // namespace sluice::kernels
