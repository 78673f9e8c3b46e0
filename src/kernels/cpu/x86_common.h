// Helpers and 256-bit kernels shared by the x86 ISA translation units. Included ONLY by files
// compiled with ISA flags (x86_avx2/, x86_avx512/), so everything here has internal linkage
// (anonymous namespace): an inline function with external linkage compiled with -mavx512f in
// one TU and without in another is one COMDAT symbol, and the linker may keep the AVX-512 copy
// for the whole program. For the same reason these files call no project inline functions
// (fp16.h, blocks.h load helpers, <algorithm>): only intrinsics and memcpy.
//
// Block layouts: quant/blocks.h (offsets repeated here as constants). Formulas: dot_ref.cpp.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace sluice::kernels {
namespace {

constexpr int kQ4_0Bytes = 18, kQ5_0Bytes = 22, kQ8_0Bytes = 34;  // d@0 (f16), then codes
constexpr int kQ4_KBytes = 144, kQ6_KBytes = 210, kQ8_KBytes = 292;

inline float ld_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);  // exact, as f16_to_f32
}
inline float ld_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}
inline uint32_t ld_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline int16_t ld_i16(const uint8_t* p) {
  int16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline __m128i ld128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i ld256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Fixed-order horizontal sums.
inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// ---- K-quants × Q8_K (256-bit; the AVX-512 set reuses them). Per super-block the whole
// integer sum is formed exactly, then acc += (d_w·d_a)·sumi [− (dmin_w·d_a)·summ] in block
// order, exactly as dot_ref: the result is normally bit-identical to it.

// Q4_K: sumi = Σ_s sc_s·Σ q·a (q 0..15); summ = Σ_s m_s·(bsums[2s] + bsums[2s+1]).
inline float dot_q4_k_256(const void* wv, const void* av, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* a = static_cast<const uint8_t*>(av);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  float acc = 0;
  for (int64_t i = 0; i < n / 256; ++i, w += kQ4_KBytes, a += kQ8_KBytes) {
    const uint8_t* s = w + 4;  // 12-byte scales (get_scale_min_k4)
    int sc[8], mn[8];
    for (int j = 0; j < 4; ++j) {
      sc[j] = s[j] & 63;
      mn[j] = s[j + 4] & 63;
      sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 6) << 4);
      mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
    const uint8_t* qs = w + 16;
    const uint8_t* aq = a + 4;
    __m256i sumv = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i raw = ld256(qs + 32 * c);
      const __m256i lo = _mm256_and_si256(raw, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ld256(aq + 64 * c)),
                                            _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c])));
      const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, ld256(aq + 64 * c + 32)),
                                            _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c + 1])));
      sumv = _mm256_add_epi32(sumv, _mm256_add_epi32(plo, phi));
    }
    const int32_t sumi = hsum_epi32(sumv);
    int32_t summ = 0;
    for (int j = 0; j < 8; ++j) summ += mn[j] * (ld_i16(a + 260 + 4 * j) + ld_i16(a + 262 + 4 * j));
    const float da = ld_f32(a);
    acc += (ld_f16(w) * da) * static_cast<float>(sumi) - (ld_f16(w + 2) * da) * static_cast<float>(summ);
  }
  return acc;
}

// Q6_K: q = (lo4 | hi2 << 4) − 32; sumi = Σ_g sc_g·Σ q_u·a − 32·Σ_g sc_g·bsums[g] (q_u = q + 32).
inline float dot_q6_k_256(const void* wv, const void* av, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* a = static_cast<const uint8_t*>(av);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  float acc = 0;
  for (int64_t i = 0; i < n / 256; ++i, w += kQ6_KBytes, a += kQ8_KBytes) {
    const uint8_t* ql = w;
    const uint8_t* qh = w + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(w + 192);
    const uint8_t* aq = a + 4;
    __m256i sumv = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = ld256(ql + 64 * h), l1 = ld256(ql + 64 * h + 32), hb = ld256(qh + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i l = (k & 1) ? l1 : l0;
        const __m256i lo = k < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
        const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * k), m2), 4);
        const __m256i q = _mm256_or_si256(lo, hi);  // 0..63
        const int g = 8 * h + 2 * k;
        const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        sumv = _mm256_add_epi32(sumv, _mm256_madd_epi16(_mm256_maddubs_epi16(q, ld256(aq + 128 * h + 32 * k)), scv));
      }
    }
    int32_t corr = 0;
    for (int g = 0; g < 16; ++g) corr += sc[g] * ld_i16(a + 260 + 2 * g);
    const int32_t sumi = hsum_epi32(sumv) - 32 * corr;
    acc += (ld_f16(w + 208) * ld_f32(a)) * static_cast<float>(sumi);
  }
  return acc;
}

}  // namespace
}  // namespace sluice::kernels
