// AVX-512 row ops and paged attention (rowops.h, attention.h): the reference's operation
// sequences, 16 lanes at a time, so results are bit-identical to it. Tails are loaded masked
// with zeros, which leaves the lanes' sums unchanged, exactly as the reference's tail rule.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention_loops.h"
#include "kernels/cpu/x86_avx512/avx512_sets.h"
#include "kernels/cpu/x86_avx512/exp16.h"
#include "kernels/rowops.h"

namespace sluice::kernels::avx512 {
namespace {

#define SLUICE_INLINE __attribute__((always_inline)) inline

inline __mmask16 tail_mask(int64_t r) { return static_cast<__mmask16>((1u << r) - 1); }
inline __mmask16 tail_mask16(int64_t r) { return r >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(r); }
inline __m512 ld(const float* p, int64_t n) {
  return n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(tail_mask(n), p);
}
inline void st(float* p, __m512 v, int64_t n) {
  if (n >= 16) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, tail_mask(n), v);
}

// The fixed tree (l, l+8) → (l, l+4) → (l, l+2) → (l, l+1).
inline float tree16(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

inline float dot16(const float* x, const float* y, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(ld(x + i, n - i), ld(y + i, n - i), acc);
  return tree16(acc);
}

// tanh_ref: copysign(1 − 2/(exp(2|x|) + 1), x). t's own sign is replaced, not or-ed: for x = NaN
// the clamp in exp makes t = −1, and the reference answers ±1 with the NaN's sign.
inline __m512 tanh16(__m512 x) {
  const __m512i sign_mask = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i xi = _mm512_castps_si512(x);
  const __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign_mask, xi));
  const __m512 e = exp16(_mm512_add_ps(a, a));
  const __m512 t = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                                 _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_andnot_si512(sign_mask, _mm512_castps_si512(t)), _mm512_and_si512(xi, sign_mask)));
}

inline float norm_scale(float ss, int64_t n, float eps) {
  return static_cast<float>(1.0 /
                            std::sqrt(static_cast<double>(ss) / static_cast<double>(n) + static_cast<double>(eps)));
}

void rms_norm_impl(const float* x, const float* w, float* y, int64_t n, float eps) {
  const __m512 s = _mm512_set1_ps(norm_scale(dot16(x, x, n), n, eps));
  for (int64_t i = 0; i < n; i += 16) {
    __m512 v = _mm512_mul_ps(ld(x + i, n - i), s);
    if (w) v = _mm512_mul_ps(v, ld(w + i, n - i));
    st(y + i, v, n - i);
  }
}

void add_rms_norm_impl(float* x, const float* a, const float* w, int64_t n, float eps) {
  const __m512 s = _mm512_set1_ps(norm_scale(dot16(a, a, n), n, eps));
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(ld(a + i, n - i), s), ld(w + i, n - i));
    st(x + i, _mm512_add_ps(ld(x + i, n - i), v), n - i);
  }
}

void gelu_mul_impl(const float* g, const float* u, float* out, int64_t n) {
  const __m512 k = _mm512_set1_ps(0.7978845608028654f), c = _mm512_set1_ps(0.044715f);
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = ld(g + i, n - i);
    const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(c, v), v), v);
    const __m512 th = tanh16(_mm512_mul_ps(k, _mm512_add_ps(v, cube)));
    const __m512 gl = _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, th));
    st(out + i, _mm512_mul_ps(gl, ld(u + i, n - i)), n - i);
  }
}

void sigmoid_mul_impl(const float* a, const float* b, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(zero, ld(b + i, n - i)));
    st(out + i, _mm512_mul_ps(ld(a + i, n - i), _mm512_div_ps(one, _mm512_add_ps(one, e))), n - i);
  }
}

void softcap_impl(float* x, int64_t n, float cap) {
  const __m512 c = _mm512_set1_ps(cap);
  for (int64_t i = 0; i < n; i += 16) st(x + i, _mm512_mul_ps(c, tanh16(_mm512_div_ps(ld(x + i, n - i), c))), n - i);
}

void scale_impl(float* x, int64_t n, float s) {
  const __m512 v = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) st(x + i, _mm512_mul_ps(ld(x + i, n - i), v), n - i);
}

void rope_impl(float* x, const float* cs, int64_t n_rot) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; i += 16) {
    const int64_t r = half - i;
    const __m512 a = ld(x + i, r), b = ld(x + half + i, r), c = ld(cs + i, r), s = ld(cs + half + i, r);
    st(x + i, _mm512_sub_ps(_mm512_mul_ps(a, c), _mm512_mul_ps(b, s)), r);
    st(x + half + i, _mm512_add_ps(_mm512_mul_ps(a, s), _mm512_mul_ps(b, c)), r);
  }
}

// The reference keeps the first index whose value no later one exceeds; NaN never wins, and a
// NaN first element is never exceeded (it answers 0).
int64_t argmax_impl(const float* x, int64_t n) {
  if (x[0] != x[0]) return 0;
  __m512 mx = _mm512_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) mx = _mm512_max_ps(_mm512_loadu_ps(x + i), mx);  // NaN lanes keep mx
  float best = _mm512_reduce_max_ps(mx);
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  for (int64_t j = 0; j + 16 <= n; j += 16) {
    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + j), _mm512_set1_ps(best), _CMP_EQ_OQ);
    if (hit) return j + __builtin_ctz(hit);
  }
  for (int64_t j = n / 16 * 16; j < n; ++j)
    if (x[j] == best) return j;
  return 0;  // not reached: x[0] is not NaN, so best is one of the elements
}

// F16C rounds to nearest even, subnormals included: the reference's f32_to_f16 for every
// finite value. bf16: round to nearest even on the bits, NaN kept quiet (f32_to_bf16).
void to_f16_impl(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT));
  }
}

void to_bf16_impl(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(n - i);
    const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb)), 16);
    const __m512i absu = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(absu, _mm512_set1_epi32(0x7F800000));
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(r));
  }
}

// ---- attention ----

// acc + v · *p (p broadcast), the broadcast folded into the instruction's memory operand:
// the same fused multiply-add as _mm512_fmadd_ps(set1(*p), v, acc), without the separate
// VBROADCASTSS GCC emits (one per head and key in the value tiles).
SLUICE_INLINE __m512 fmadd_bcast(__m512 acc, __m512 v, const float* p) {
  __asm__("vfmadd231ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(v), "m"(*p));
  return acc;
}

// One K or V row as f32 (16 elements at offset i, masked tail).
inline __m512 kv16(KvElem e, const uint8_t* row, int64_t i, int64_t n) {
  const __mmask16 m = n >= 16 ? static_cast<__mmask16>(0xFFFF) : tail_mask(n);
  switch (e) {
    case KvElem::kF32: return _mm512_maskz_loadu_ps(m, row + 4 * i);
    case KvElem::kF16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
    case KvElem::kBF16:
      return _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * i)), 16));
  }
  return _mm512_setzero_ps();
}

// One K or V row's 16 elements at i as f32, for a compile-time element type; `m` masks a tail.
template <KvElem E>
inline __m512 kv16m(const uint8_t* row, int64_t i, __mmask16 m) {
  if constexpr (E == KvElem::kF32) return _mm512_maskz_loadu_ps(m, row + 4 * i);
  if constexpr (E == KvElem::kF16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * i)), 16));
}

// Software prefetch of the next chunk's K and V lines, one line per call of step(), woven
// into the compute loops: this CPU drops prefetches issued faster than its miss buffers
// drain (measured: a burst of a chunk's 1024 prefetches brought nothing in).
struct Prefetcher {
  const uint8_t* const* rows = nullptr;  // the next chunk's rows
  int n = 0, j = 0;
  uint64_t k_off = 0, v_off = 0, bytes = 0, o = 0;
  bool v = false;
  SLUICE_INLINE void step() {
    if (j >= n) return;
    _mm_prefetch(reinterpret_cast<const char*>(rows[j] + (v ? v_off : k_off) + o), _MM_HINT_T0);
    if (v) {
      v = false;
      o += 64;
      if (o >= bytes) {
        o = 0;
        ++j;
      }
    } else {
      v = true;
    }
  }
};

// Scores of NG heads (g0 ..) against the chunk's n keys; accumulators stay in registers.
template <int NG, KvElem E>
void score_tile(const AttnArgs& a, const uint8_t* const* rows, int n, int g0, float* s) {
  const int64_t hd = a.hd;
  const float* q = a.q + g0 * hd;
  for (int j = 0; j < n; ++j) {
    const uint8_t* krow = rows[j] + a.k_off;
    __m512 acc[NG];
    for (int g = 0; g < NG; ++g) acc[g] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= hd; i += 16) {
      const __m512 k = kv16m<E>(krow, i, static_cast<__mmask16>(0xFFFF));
      for (int g = 0; g < NG; ++g) acc[g] = _mm512_fmadd_ps(_mm512_loadu_ps(q + g * hd + i), k, acc[g]);
    }
    if (i < hd) {
      const __mmask16 m = tail_mask(hd - i);
      const __m512 k = kv16m<E>(krow, i, m);
      for (int g = 0; g < NG; ++g) acc[g] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + g * hd + i), k, acc[g]);
    }
    for (int g = 0; g < NG; ++g) s[(g0 + g) * kAttnChunk + j] = a.scale * tree16(acc[g]);
  }
}

// o_c of NG heads: Σ_j p[g][j]·v_j in key order (attention.h), 16·W output elements at a
// time (NG·W accumulators), so each V load feeds NG fused multiply-adds.
template <int NG, KvElem E>
void value_tile(const AttnArgs& a, const uint8_t* const* rows, int n, int g0, const float* s, float* oc,
                Prefetcher* pf) {
  constexpr int W = NG <= 2 ? 8 : NG <= 4 ? 4 : 2;
  const int64_t hd = a.hd;
  for (int64_t i = 0; i < hd; i += 16 * W) {
    __mmask16 m[W];
    for (int w = 0; w < W; ++w) {
      const int64_t r = hd - i - 16 * w;
      m[w] = r >= 16 ? static_cast<__mmask16>(0xFFFF) : r > 0 ? tail_mask(r) : static_cast<__mmask16>(0);
    }
    __m512 acc[NG][W];
    for (int g = 0; g < NG; ++g)
      for (int w = 0; w < W; ++w) acc[g][w] = _mm512_setzero_ps();
    for (int j = 0; j < n; ++j) {
      pf->step();
      const uint8_t* vrow = rows[j] + a.v_off;
      __m512 v[W];
      for (int w = 0; w < W; ++w) v[w] = kv16m<E>(vrow, i + 16 * w, m[w]);
      for (int g = 0; g < NG; ++g)
        for (int w = 0; w < W; ++w) acc[g][w] = fmadd_bcast(acc[g][w], v[w], s + (g0 + g) * kAttnChunk + j);
    }
    for (int g = 0; g < NG; ++g)
      for (int w = 0; w < W; ++w)
        if (m[w]) _mm512_mask_storeu_ps(oc + (g0 + g) * hd + i + 16 * w, m[w], acc[g][w]);
  }
}

// tree16 of 16 vectors at once (the same pairings and additions per vector, so the same
// bits): v[4·kk + g] -> lane 4·g + kk of the result. 30 shuffles and 15 adds instead of 16
// separate trees.
// tree16 of 16 vectors at once (the same pairings and additions per vector, so the same
// bits): v[4·kk + g] -> lane 4·g + kk of the result. 30 shuffles and 15 adds instead of 16
// separate trees: (l, l+8) puts v[2p] in lanes 0-7 and v[2p+1] in 8-15; (l, l+4) leaves
// item 4r + c in quarter c; then (l, l+2) and (l, l+1) inside each quarter, so quarter k,
// position c holds item 4c + k.
// Scores of 4 heads × 4 keys at once: 16 accumulators, each K row and q chunk loaded once
// per 16 products, one transposed reduction. The lane order of tree16x16 puts head g's four
// keys in quarter g, stored with one 128-bit store per head.
template <KvElem E>
void score_tile_4x4(const AttnArgs& a, const uint8_t* const* rows, int j0, int g0, float* s, Prefetcher* pf) {
  const int64_t hd = a.hd;
  const float* q0 = a.q + g0 * hd;
  const float* q1 = q0 + hd;
  const float* q2 = q1 + hd;
  const float* q3 = q2 + hd;
  const uint8_t* k0 = rows[j0] + a.k_off;
  const uint8_t* k1 = rows[j0 + 1] + a.k_off;
  const uint8_t* k2 = rows[j0 + 2] + a.k_off;
  const uint8_t* k3 = rows[j0 + 3] + a.k_off;
  // Named accumulators (key kk, head g): GCC kept an array of them on the stack, storing all
  // 16 every iteration.
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00;
  __m512 c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
  const __mmask16 all = static_cast<__mmask16>(0xFFFF);
  // hd is a multiple of 16 here (the caller's condition).
  for (int64_t i = 0; i < hd; i += 16) {
    pf->step();
    const __m512 x0 = kv16m<E>(k0, i, all), x1 = kv16m<E>(k1, i, all), x2 = kv16m<E>(k2, i, all),
                 x3 = kv16m<E>(k3, i, all);
    __m512 qv = _mm512_loadu_ps(q0 + i);
    c00 = _mm512_fmadd_ps(qv, x0, c00);
    c10 = _mm512_fmadd_ps(qv, x1, c10);
    c20 = _mm512_fmadd_ps(qv, x2, c20);
    c30 = _mm512_fmadd_ps(qv, x3, c30);
    qv = _mm512_loadu_ps(q1 + i);
    c01 = _mm512_fmadd_ps(qv, x0, c01);
    c11 = _mm512_fmadd_ps(qv, x1, c11);
    c21 = _mm512_fmadd_ps(qv, x2, c21);
    c31 = _mm512_fmadd_ps(qv, x3, c31);
    qv = _mm512_loadu_ps(q2 + i);
    c02 = _mm512_fmadd_ps(qv, x0, c02);
    c12 = _mm512_fmadd_ps(qv, x1, c12);
    c22 = _mm512_fmadd_ps(qv, x2, c22);
    c32 = _mm512_fmadd_ps(qv, x3, c32);
    qv = _mm512_loadu_ps(q3 + i);
    c03 = _mm512_fmadd_ps(qv, x0, c03);
    c13 = _mm512_fmadd_ps(qv, x1, c13);
    c23 = _mm512_fmadd_ps(qv, x2, c23);
    c33 = _mm512_fmadd_ps(qv, x3, c33);
  }
  // tree16 of all 16 at once, v[4·kk + g] = c<kk><g> (see tree16x16).
  auto l1 = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
  };
  auto l2 = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
  };
  auto l3 = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x44), _mm512_shuffle_ps(x, y, 0xEE));
  };
  auto l4 = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xDD));
  };
  const __m512 w0 = l1(c00, c01), w1 = l1(c02, c03), w2 = l1(c10, c11), w3 = l1(c12, c13);
  const __m512 w4 = l1(c20, c21), w5 = l1(c22, c23), w6 = l1(c30, c31), w7 = l1(c32, c33);
  const __m512 z0 = l2(w0, w1), z1 = l2(w2, w3), z2 = l2(w4, w5), z3 = l2(w6, w7);
  const __m512 y0 = l3(z0, z1), y1 = l3(z2, z3);
  const __m512 r = _mm512_mul_ps(_mm512_set1_ps(a.scale), l4(y0, y1));
  _mm_storeu_ps(s + (g0 + 0) * kAttnChunk + j0, _mm512_castps512_ps128(r));
  _mm_storeu_ps(s + (g0 + 1) * kAttnChunk + j0, _mm512_extractf32x4_ps(r, 1));
  _mm_storeu_ps(s + (g0 + 2) * kAttnChunk + j0, _mm512_extractf32x4_ps(r, 2));
  _mm_storeu_ps(s + (g0 + 3) * kAttnChunk + j0, _mm512_extractf32x4_ps(r, 3));
}

template <KvElem E>
void scores_4x4(const AttnArgs& a, const uint8_t* const* rows, int n, int g0, float* s, Prefetcher* pf) {
  for (int j = 0; j + 4 <= n; j += 4) score_tile_4x4<E>(a, rows, j, g0, s, pf);
}

using ScoreTile = void (*)(const AttnArgs&, const uint8_t* const*, int, int, float*);
using ValueTile = void (*)(const AttnArgs&, const uint8_t* const*, int, int, const float*, float*, Prefetcher*);
template <KvElem E>
struct Tiles {
  static constexpr ScoreTile score[8] = {score_tile<1, E>, score_tile<2, E>, score_tile<3, E>, score_tile<4, E>,
                                         score_tile<5, E>, score_tile<6, E>, score_tile<7, E>, score_tile<8, E>};
  static constexpr ValueTile value[8] = {value_tile<1, E>, value_tile<2, E>, value_tile<3, E>, value_tile<4, E>,
                                         value_tile<5, E>, value_tile<6, E>, value_tile<7, E>, value_tile<8, E>};
};
inline const ScoreTile* score_tiles(KvElem e) {
  return e == KvElem::kF32   ? Tiles<KvElem::kF32>::score
         : e == KvElem::kF16 ? Tiles<KvElem::kF16>::score
                             : Tiles<KvElem::kBF16>::score;
}
using Scores4x4 = void (*)(const AttnArgs&, const uint8_t* const*, int, int, float*, Prefetcher*);
inline Scores4x4 scores_4x4_for(KvElem e) {
  return e == KvElem::kF32   ? scores_4x4<KvElem::kF32>
         : e == KvElem::kF16 ? scores_4x4<KvElem::kF16>
                             : scores_4x4<KvElem::kBF16>;
}
inline const ValueTile* value_tiles(KvElem e) {
  return e == KvElem::kF32   ? Tiles<KvElem::kF32>::value
         : e == KvElem::kF16 ? Tiles<KvElem::kF16>::value
                             : Tiles<KvElem::kBF16>::value;
}

// Chunk c's state (attention.h): probabilities in s, (mc, lc) per head, oc = Σ p·v. A decode
// step finds the K/V rows in DRAM: every layer's weights passed through the caches since this
// layer last ran.
void chunk_state(const AttnArgs& a, int64_t c, float* s, float* mc, float* lc, float* oc, bool touch) {
  const int gs = a.gs, hd = a.hd;
  const int64_t c0 = (a.lo / kAttnChunk + c) * kAttnChunk;
  const int64_t j0 = c0 > a.lo ? c0 : a.lo;
  const int64_t j1 = c0 + kAttnChunk - 1 < a.hi ? c0 + kAttnChunk - 1 : a.hi;
  const int n = static_cast<int>(j1 - j0 + 1);
  // Row addresses of the chunk's keys (one table lookup per key, not per use).
  const uint8_t* rows[kAttnChunk];
  auto row_at = [&](int64_t pos) {
    return a.base + static_cast<uint64_t>(a.table[pos / a.block_tokens]) * a.block_stride +
           static_cast<uint64_t>(pos % a.block_tokens) * a.slot_stride;
  };
  for (int j = 0; j < n; ++j) rows[j] = row_at(j0 + j);
  if (touch) {
    // Nothing prefetched these rows: bring them in with plain loads first, all misses in
    // flight at once (the compute loops walk 4 rows at a time and keep few).
    const uint64_t bytes = static_cast<uint64_t>(hd) * (a.elem == KvElem::kF32 ? 4 : 2);
    __m128i t = _mm_setzero_si128();
    for (int j = 0; j < n; ++j)
      for (uint64_t o = 0; o < bytes; o += 64) {
        t = _mm_or_si128(t, _mm_loadu_si32(rows[j] + a.k_off + o));
        t = _mm_or_si128(t, _mm_loadu_si32(rows[j] + a.v_off + o));
      }
    asm volatile("" : : "x"(t));
  }
  const uint8_t* next[kAttnChunk];
  Prefetcher pf;
  {
    const int64_t p1 = j1 + kAttnChunk < a.hi ? j1 + kAttnChunk : a.hi;
    for (int64_t pos = j1 + 1; pos <= p1; ++pos) next[pos - j1 - 1] = row_at(pos);
    pf.rows = next;
    pf.n = static_cast<int>(p1 - j1);
    pf.k_off = a.k_off;
    pf.v_off = a.v_off;
    pf.bytes = static_cast<uint64_t>(hd) * (a.elem == KvElem::kF32 ? 4 : 2);
  }
  // Scores: 4 heads × 4 keys per tile where both fit, else up to 8 heads per key.
  int g0 = 0;
  const int n4 = n / 4 * 4;
  for (; g0 + 4 <= gs && n4 > 0 && hd % 16 == 0; g0 += 4) {
    scores_4x4_for(a.elem)(a, rows, n4, g0, s, &pf);
    if (n4 < n) score_tiles(a.elem)[3](a, rows + n4, n - n4, g0, s + n4);
  }
  for (; g0 < gs; g0 += 8) {
    const int ng = gs - g0 < 8 ? gs - g0 : 8;
    score_tiles(a.elem)[ng - 1](a, rows, n, g0, s);
  }
  // Softmax of each head's scores: the max (any order gives the same value), p = exp(s − max),
  // l = sum16(p) (rowops.h).
  for (int g = 0; g < gs; ++g) {
    float* sg = s + g * kAttnChunk;
    __m512 vmax = _mm512_set1_ps(sg[0]);
    for (int j = 0; j < n; j += 16) vmax = _mm512_mask_max_ps(vmax, tail_mask16(n - j), ld(sg + j, n - j), vmax);
    mc[g] = _mm512_reduce_max_ps(vmax);
    const __m512 vm = _mm512_set1_ps(mc[g]);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
      const __m512 p = exp16(_mm512_sub_ps(ld(sg + j, n - j), vm));
      st(sg + j, p, n - j);
      sum = _mm512_add_ps(sum, n - j >= 16 ? p : _mm512_maskz_mov_ps(tail_mask(n - j), p));
    }
    lc[g] = tree16(sum);
  }
  // Values: o_c[g] = Σ_j p[g][j]·v_j, each V row loaded once for up to 8 heads at a time.
  for (int vg0 = 0; vg0 < gs; vg0 += 8) {
    const int ng = gs - vg0 < 8 ? gs - vg0 : 8;
    value_tiles(a.elem)[ng - 1](a, rows, n, vg0, s, oc, &pf);
  }
}

// (m, l, out) ← merge with a chunk's (mc, lc, o) for one head (attention.h).
void merge_one(float& m, float& l, float* out, float mc, float lc, const float* o, int64_t hd) {
  const float mn = m > mc ? m : mc;
  const __m512 e = exp16(_mm512_set_ps(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, mc - mn, m - mn));
  float ev[16];
  _mm512_storeu_ps(ev, e);
  const float ea = ev[0], eb = ev[1];
  l = l * ea + lc * eb;
  const __m512 va = _mm512_set1_ps(ea), vb = _mm512_set1_ps(eb);
  for (int64_t i = 0; i < hd; i += 16)
    st(out + i, _mm512_fmadd_ps(ld(o + i, hd - i), vb, _mm512_mul_ps(ld(out + i, hd - i), va)), hd - i);
  m = mn;
}

void finish(float l, float* out, int64_t hd) {
  const __m512 inv = _mm512_set1_ps(1.0f / l);
  for (int64_t i = 0; i < hd; i += 16) st(out + i, _mm512_mul_ps(ld(out + i, hd - i), inv), hd - i);
}

void attention_impl(const AttnArgs& a) {
  auto chunk = [&](int64_t c, bool first, float* mc, float* lc, float* oc) {
    chunk_state(a, c, a.scratch, mc, lc, oc, first && a.cold);
  };
  attention_loop(a, a.scratch + kAttnMaxGroup * kAttnChunk, chunk, merge_one, finish);
}

void attention_chunks_impl(const AttnArgs& a, int64_t c_begin, int64_t c_end, float* states) {
  auto chunk = [&](int64_t c, bool first, float* mc, float* lc, float* oc) {
    chunk_state(a, c, a.scratch, mc, lc, oc, first && a.cold);
  };
  attention_chunks_loop(a, c_begin, c_end, states, chunk);
}

void attention_merge_impl(const float* states, int64_t n, int gs, int hd, int g0, int g1, float* out) {
  attention_merge_loop(states, n, gs, hd, g0, g1, out, merge_one, finish);
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) { rms_norm_impl(x, w, y, n, eps); }
void add_rms_norm(float* x, const float* a, const float* w, int64_t n, float eps) {
  add_rms_norm_impl(x, a, w, n, eps);
}
void gelu_mul(const float* g, const float* u, float* out, int64_t n) { gelu_mul_impl(g, u, out, n); }
void sigmoid_mul(const float* a, const float* b, float* out, int64_t n) { sigmoid_mul_impl(a, b, out, n); }
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

// Four 64-byte loads per iteration into four accumulators: as fast as a core reads memory.
uint64_t stream_sum(const uint8_t* p, uint64_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i + 256 <= bytes; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  // Lanes summed as unsigned: the sum wraps by design, and _mm512_reduce_add_epi64's signed
  // adds would overflow (undefined; UBSan stopped `sluice bench --machine` on it).
  uint64_t lanes[8];
  _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t s = 0;
  for (uint64_t v : lanes) s += v;
  return s;
}

}  // namespace sluice::kernels::avx512
