// AVX2 (+FMA, F16C) row ops and paged attention (rowops.h, attention.h): the reference's
// operation sequences, 8 lanes at a time, so results are bit-identical to it. Reductions keep
// the reference's 16 lanes as two ymm (lanes 0..7 and 8..15) and end with its fixed tree.
// Tails are loaded masked with zeros, which leaves the lanes' sums unchanged, exactly as the
// reference's tail rule.
// See x86_common.h for the linkage rules of ISA translation units.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention_loops.h"
#include "kernels/cpu/x86_avx2/avx2_sets.h"
#include "kernels/cpu/x86_avx2/exp8.h"

namespace sluice::kernels::avx2 {
namespace {

// The first r lanes (r <= 0: none, r >= 8: all), for VMASKMOVPS.
inline __m256i lanes(int64_t r) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(r < 8 ? r : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// 8 floats at p of which r remain; lanes past them read as zero (and are not touched).
inline __m256 ld(const float* p, int64_t r) { return r >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes(r)); }
inline void st(float* p, __m256 v, int64_t r) {
  if (r >= 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, lanes(r), v);
}

// The reference's fixed tree over 16 lanes held as lo (0..7) and hi (8..15):
// (l, l+8) → (l, l+4) → (l, l+2) → (l, l+1).
inline float tree16(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

// dot16_ref: 16 lanes of fused multiply-adds; a tail of r < 16 elements in lanes 0..r-1.
inline float dot16(const float* x, const float* y, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    lo = _mm256_fmadd_ps(ld(x + i, n - i), ld(y + i, n - i), lo);
    hi = _mm256_fmadd_ps(ld(x + i + 8, n - i - 8), ld(y + i + 8, n - i - 8), hi);
  }
  return tree16(lo, hi);
}

// tanh_ref: copysign(1 − 2/(exp(2|x|) + 1), x). t's own sign is cleared first: for x = NaN
// the clamp in exp makes t = −1, and the reference answers ±1 with the NaN's sign.
inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign, x);
  const __m256 e = exp8(_mm256_add_ps(a, a));
  const __m256 t = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                                 _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
  return _mm256_or_ps(_mm256_andnot_ps(sign, t), _mm256_and_ps(x, sign));
}

inline float norm_scale(float ss, int64_t n, float eps) {
  return static_cast<float>(1.0 /
                            std::sqrt(static_cast<double>(ss) / static_cast<double>(n) + static_cast<double>(eps)));
}

void rms_norm_impl(const float* x, const float* w, float* y, int64_t n, float eps) {
  const __m256 s = _mm256_set1_ps(norm_scale(dot16(x, x, n), n, eps));
  for (int64_t i = 0; i < n; i += 8) {
    __m256 v = _mm256_mul_ps(ld(x + i, n - i), s);
    if (w) v = _mm256_mul_ps(v, ld(w + i, n - i));
    st(y + i, v, n - i);
  }
}

void add_rms_norm_impl(float* x, const float* a, const float* w, int64_t n, float eps) {
  const __m256 s = _mm256_set1_ps(norm_scale(dot16(a, a, n), n, eps));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_mul_ps(ld(a + i, n - i), s), ld(w + i, n - i));
    st(x + i, _mm256_add_ps(ld(x + i, n - i), v), n - i);
  }
}

void gelu_mul_impl(const float* g, const float* u, float* out, int64_t n) {
  const __m256 k = _mm256_set1_ps(0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = ld(g + i, n - i);
    const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(c, v), v), v);
    const __m256 th = tanh8(_mm256_mul_ps(k, _mm256_add_ps(v, cube)));
    const __m256 gl = _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, th));
    st(out + i, _mm256_mul_ps(gl, ld(u + i, n - i)), n - i);
  }
}

void softcap_impl(float* x, int64_t n, float cap) {
  const __m256 c = _mm256_set1_ps(cap);
  for (int64_t i = 0; i < n; i += 8) st(x + i, _mm256_mul_ps(c, tanh8(_mm256_div_ps(ld(x + i, n - i), c))), n - i);
}

void scale_impl(float* x, int64_t n, float s) {
  const __m256 v = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) st(x + i, _mm256_mul_ps(ld(x + i, n - i), v), n - i);
}

void rope_impl(float* x, const float* cs, int64_t n_rot) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; i += 8) {
    const int64_t r = half - i;
    const __m256 a = ld(x + i, r), b = ld(x + half + i, r), c = ld(cs + i, r), s = ld(cs + half + i, r);
    st(x + i, _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)), r);
    st(x + half + i, _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, c)), r);
  }
}

// The reference keeps the first index whose value no later one exceeds; NaN never wins, and a
// NaN first element is never exceeded (it answers 0).
int64_t argmax_impl(const float* x, int64_t n) {
  if (x[0] != x[0]) return 0;
  __m256 mx = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(_mm256_loadu_ps(x + i), mx);  // NaN lanes keep mx
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  float best = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  for (int64_t j = 0; j + 8 <= n; j += 8) {
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), _mm256_set1_ps(best), _CMP_EQ_OQ));
    if (hit) return j + __builtin_ctz(static_cast<unsigned>(hit));
  }
  for (int64_t j = n / 8 * 8; j < n; ++j)
    if (x[j] == best) return j;
  return 0;  // not reached: x[0] is not NaN, so best is one of the elements
}

// F16C rounds to nearest even, subnormals included, and quiets NaN keeping its top mantissa
// bits: the reference's f32_to_f16. A tail goes through a small buffer (no 16-bit masked store).
void to_f16_impl(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    uint16_t t[8];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(t), _mm256_cvtps_ph(ld(x + i, n - i), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(out + i, t, 2 * static_cast<size_t>(n - i));
  }
}

// f32_to_bf16: round to nearest even on the bits, NaN kept quiet.
inline __m128i bf16x8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb)), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x7F800000));
  const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i b = _mm256_blendv_epi8(r, q, nan);
  // Dwords 0..65535 narrow exactly; the pack interleaves 128-bit lanes, qwords 0 and 2 hold the result.
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(b, b), 0x08));
}

void to_bf16_impl(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), bf16x8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    uint16_t t[8];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(t), bf16x8(ld(x + i, n - i)));
    std::memcpy(out + i, t, 2 * static_cast<size_t>(n - i));
  }
}

// ---- attention ----

// One K or V row of hd elements as f32 into row (F16C and the bf16 shift are exact, as the
// reference's conversions).
void load_row(KvElem e, const uint8_t* p, float* row, int64_t hd) {
  if (e == KvElem::kF32) {
    std::memcpy(row, p, 4 * static_cast<size_t>(hd));
    return;
  }
  for (int64_t i = 0; i < hd; i += 8) {
    __m128i h;
    if (hd - i >= 8) {
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
    } else {
      uint16_t t[8] = {};
      std::memcpy(t, p + 2 * i, 2 * static_cast<size_t>(hd - i));
      h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t));
    }
    const __m256 v = e == KvElem::kF16 ? _mm256_cvtph_ps(h)
                                       : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    st(row + i, v, hd - i);
  }
}

// Softmax of one head's n scores in place (attention.h): returns the max m_c, the scores
// become p = exp(s − m_c), *lc = sum16(p) with lanes past the tail adding nothing.
float softmax_row(float* sg, int n, float* lc) {
  float m = sg[0];
  for (int j = 1; j < n; ++j)
    if (m < sg[j]) m = sg[j];  // the first largest, as std::max_element
  const __m256 vm = _mm256_set1_ps(m);
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int j = 0; j < n; j += 16) {
    const __m256 p0 = exp8(_mm256_sub_ps(ld(sg + j, n - j), vm));
    const __m256 p1 = exp8(_mm256_sub_ps(ld(sg + j + 8, n - j - 8), vm));
    st(sg + j, p0, n - j);
    st(sg + j + 8, p1, n - j - 8);
    lo = _mm256_add_ps(lo, _mm256_and_ps(p0, _mm256_castsi256_ps(lanes(n - j))));
    hi = _mm256_add_ps(hi, _mm256_and_ps(p1, _mm256_castsi256_ps(lanes(n - j - 8))));
  }
  *lc = tree16(lo, hi);
  return m;
}

// Chunk c's state (attention.h): scores → probabilities in the scratch, (mc, lc) per head,
// oc = Σ p·v in key order. Each K/V row is converted once into the scratch row for all heads.
void chunk_state(const AttnArgs& a, int64_t c, float* mc, float* lc, float* oc) {
  const int gs = a.gs;
  const int64_t hd = a.hd;
  float* s = a.scratch;                         // [gs × kAttnChunk]
  float* row = s + kAttnMaxGroup * kAttnChunk;  // [hd] one K or V row
  const int64_t c0 = (a.lo / kAttnChunk + c) * kAttnChunk;
  const int64_t j0 = c0 > a.lo ? c0 : a.lo;
  const int64_t j1 = c0 + kAttnChunk - 1 < a.hi ? c0 + kAttnChunk - 1 : a.hi;
  const int n = static_cast<int>(j1 - j0 + 1);
  auto at = [&](int64_t pos, uint64_t off) {
    return a.base + static_cast<uint64_t>(a.table[pos / a.block_tokens]) * a.block_stride + off +
           static_cast<uint64_t>(pos % a.block_tokens) * a.slot_stride;
  };
  for (int j = 0; j < n; ++j) {
    load_row(a.elem, at(j0 + j, a.k_off), row, hd);
    for (int g = 0; g < gs; ++g) s[g * kAttnChunk + j] = a.scale * dot16(a.q + g * hd, row, hd);
  }
  for (int g = 0; g < gs; ++g) {
    mc[g] = softmax_row(s + g * kAttnChunk, n, &lc[g]);
    for (int64_t i = 0; i < hd; ++i) oc[g * hd + i] = 0.0f;
  }
  for (int j = 0; j < n; ++j) {
    load_row(a.elem, at(j0 + j, a.v_off), row, hd);
    for (int g = 0; g < gs; ++g) {
      const __m256 p = _mm256_set1_ps(s[g * kAttnChunk + j]);
      float* o = oc + g * hd;
      for (int64_t i = 0; i < hd; i += 8) st(o + i, _mm256_fmadd_ps(p, ld(row + i, hd - i), ld(o + i, hd - i)), hd - i);
    }
  }
}

// (m, l, out) ← merge with a chunk's (mc, lc, o) for one head (attention.h).
void merge_one(float& m, float& l, float* out, float mc, float lc, const float* o, int64_t hd) {
  const float mn = m > mc ? m : mc;
  float ev[8];
  _mm256_storeu_ps(ev, exp8(_mm256_setr_ps(m - mn, mc - mn, 0, 0, 0, 0, 0, 0)));
  const float ea = ev[0], eb = ev[1];
  l = l * ea + lc * eb;
  const __m256 va = _mm256_set1_ps(ea), vb = _mm256_set1_ps(eb);
  for (int64_t i = 0; i < hd; i += 8)
    st(out + i, _mm256_fmadd_ps(ld(o + i, hd - i), vb, _mm256_mul_ps(ld(out + i, hd - i), va)), hd - i);
  m = mn;
}

void finish(float l, float* out, int64_t hd) {
  const __m256 inv = _mm256_set1_ps(1.0f / l);
  for (int64_t i = 0; i < hd; i += 8) st(out + i, _mm256_mul_ps(ld(out + i, hd - i), inv), hd - i);
}

void attention_impl(const AttnArgs& a) {
  auto chunk = [&](int64_t c, bool, float* mc, float* lc, float* oc) { chunk_state(a, c, mc, lc, oc); };
  attention_loop(a, a.scratch + kAttnMaxGroup * kAttnChunk + kAttnMaxHeadDim, chunk, merge_one, finish);
}

void attention_chunks_impl(const AttnArgs& a, int64_t c_begin, int64_t c_end, float* states) {
  auto chunk = [&](int64_t c, bool, float* mc, float* lc, float* oc) { chunk_state(a, c, mc, lc, oc); };
  attention_chunks_loop(a, c_begin, c_end, states, chunk);
}

void attention_merge_impl(const float* states, int64_t n, int gs, int hd, int g0, int g1, float* out) {
  attention_merge_loop(states, n, gs, hd, g0, g1, out, merge_one, finish);
}

// Four 64-byte loads per iteration (two ymm each) into four accumulators: the widest plain
// read this set has, for the bandwidth probe.
inline __m256i add64x2(__m256i acc, const uint8_t* p) {
  const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i y = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32));
  return _mm256_add_epi64(acc, _mm256_add_epi64(x, y));
}

uint64_t stream_sum_impl(const uint8_t* p, uint64_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i + 256 <= bytes; i += 256) {
    a0 = add64x2(a0, p + i);
    a1 = add64x2(a1, p + i + 64);
    a2 = add64x2(a2, p + i + 128);
    a3 = add64x2(a3, p + i + 192);
  }
  // Lanes summed as unsigned: the checksum wraps by design.
  uint64_t lanes4[4];
  const __m256i all = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes4), all);
  uint64_t s = 0;
  for (uint64_t v : lanes4) s += v;
  return s;
}

}  // namespace

// The entry points the set's table (dot_avx2.cpp) points at.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) { rms_norm_impl(x, w, y, n, eps); }
void add_rms_norm(float* x, const float* a, const float* w, int64_t n, float eps) {
  add_rms_norm_impl(x, a, w, n, eps);
}
void gelu_mul(const float* g, const float* u, float* out, int64_t n) { gelu_mul_impl(g, u, out, n); }
void softcap(float* x, int64_t n, float cap) { softcap_impl(x, n, cap); }
void scale(float* x, int64_t n, float s) { scale_impl(x, n, s); }
void rope(float* x, const float* cs, int64_t n_rot) { rope_impl(x, cs, n_rot); }
int64_t argmax(const float* x, int64_t n) { return argmax_impl(x, n); }
void to_f16(const float* x, uint16_t* out, int64_t n) { to_f16_impl(x, out, n); }
void to_bf16(const float* x, uint16_t* out, int64_t n) { to_bf16_impl(x, out, n); }
void attention(const AttnArgs& a) { attention_impl(a); }
void attention_chunks(const AttnArgs& a, int64_t c_begin, int64_t c_end, float* states) {
  attention_chunks_impl(a, c_begin, c_end, states);
}
void attention_merge(const float* states, int64_t n, int gs, int hd, int g0, int g1, float* out) {
  attention_merge_impl(states, n, gs, hd, g0, g1, out);
}
uint64_t stream_sum(const uint8_t* p, uint64_t bytes) { return stream_sum_impl(p, bytes); }

}  // namespace sluice::kernels::avx2
