// AVX2 (+FMA, F16C) kernels of the packed matmul (packed.h, gemm.h) and the activation
// quantizers (act.h), for CPUs without AVX-512 VNNI. See x86_common.h for the linkage rules of
// ISA translation units.
//
// One ymm = half a row group, 8 rows × 4 codes: bytes 0..31 of each 64-byte chunk of the x16
// layout are rows 0..7, bytes 32..63 rows 8..15. AVX2 has no VPDPBUSD: VPMADDUBSW multiplies
// u8 codes by s8 activations and adds adjacent products into int16, then VPMADDWD adds a row's
// two int16 into its own int32 lane — again one int32 per row per 4 codes, no horizontal
// reduction. VPMADDUBSW saturates, so products are summed in int16 only as far as the worst
// case fits (activation codes lie in [−127, 127]: the quantizers never give −128, which the
// Q8_0 sign trick relies on):
//   Q4_0, Q4_K  codes 0..15:  2·15·127 = 3810 per int16, runs of 8 vectors (30480)
//   Q5_0        codes 0..31:  7874, runs of 4 (31496)
//   Q6_K, Q6_K8 codes 0..63:  16002, runs of 2 (32004)
//   Q8_0        codes q + 128 overflow even alone (2·255·127): the signed codes are used,
//               |q| × (a with q's sign), 2·128·127 = 32512, runs of 1.
// Unsigned codes carry an offset, removed exactly in int32 with the activation block sums:
// Σ q·a = Σ q_u·a − off·Σa. Q4_K's u8 and Q6_K's i8 sub-block scales are VPMADDWD's weights
// (the row's scale on both its int16, instead of 1), and the Q4_K mins and Q6_K offset terms
// are VPMADDWDs of two sub-blocks' per-row scales with their activation sums. Integer sums are
// exact, so only their grouping differs from gemm_ref; the f32 operations per block are its
// own, in its order (separate mul, mul, add: the file is built with -ffp-contract=off), and
// the float formats fuse sequentially along K as it does: results are bit-identical to it.
//
// Decode (one activation row) streams one group at a time, front to back, both halves of each
// block together (one sequential stream per thread, as the AVX-512 set). With several
// activation rows a tile takes one half group (the float formats: both) and up to 4 rows
// sharing every decoded block: 16 ymm registers hold no more accumulators than that.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa_common.h"
#include "kernels/cpu/x86_avx2/avx2_sets.h"
#include "kernels/cpu/x86_gemm_drive.h"
#include "kernels/gemm.h"

namespace sluice::kernels::avx2 {
namespace {

#define SLUICE_INLINE __attribute__((always_inline)) inline
#define SLUICE_INLINE_LAMBDA __attribute__((always_inline))
#define SLUICE_UNROLL _Pragma("GCC unroll 16")
// An empty asm that GCC cannot see through, placed on an integer accumulator after each add:
// integer adds are associative, and GCC's reassociation would otherwise rebalance a long
// accumulation chain into a tree at its end, holding every term live (spills). No instruction.
#define SLUICE_CHAIN(v) __asm__("" : "+x"(v))

inline int32_t ld_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline __m128i ld64(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
inline __m128i ld128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i ld256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 ld_f16x8(const uint8_t* p) { return _mm256_cvtph_ps(ld128(p)); }

// Four activation codes in every row's lane (VPMADDUBSW's s8 operand).
inline __m256i bcast4(const int8_t* a) { return _mm256_set1_epi32(ld_i32(a)); }
// The int16 pair (lo, hi) in every lane (VPMADDWD's operand against per-row pairs).
inline __m256i bcast_pair(int32_t lo, int32_t hi) {
  return _mm256_set1_epi32(static_cast<int32_t>((static_cast<uint32_t>(hi) << 16) | static_cast<uint16_t>(lo)));
}
inline __m256i ones16() { return _mm256_set1_epi16(1); }

// The activation rows of a tile, with their per-row pointers computed once.
template <int MT>
struct ActTile {
  const int8_t* qs[MT];
  const float* d[MT];
  const int32_t* sums[MT];
  const float* f32[MT];
  ActTile(const ActRows& a, int64_t m0, int64_t block) {
    for (int mi = 0; mi < MT; ++mi) {
      qs[mi] = a_qs(a, m0 + mi);
      d[mi] = a_d(a, m0 + mi);
      sums[mi] = a_sums(a, m0 + mi, block);
      f32[mi] = a_f32(a, m0 + mi);
    }
  }
};

// Writes the 8 outputs of half h of group gi for activation row mi; rows past p.rows are not.
inline void store_half(const GemmArgs& p, int64_t gi, int h, int64_t mi, __m256 v) {
  const int64_t r0 = gi * kGroupRows + 8 * h;
  const int64_t n = p.rows - r0;
  float* dst = p.y + mi * p.ldy + r0;
  if (n >= 8) {
    _mm256_storeu_ps(dst, v);
  } else if (n > 0) {
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(dst, live, v);
  }
}

// Per-row bytes of the 8 rows at x and at y (u8, or i8 if Signed) as the int16 pair
// (x[i], y[i]) of lane i: VPMADDWD weights. x == y puts a row's scale on both its int16.
template <bool Signed>
SLUICE_INLINE __m256i row_pairs(const uint8_t* x, const uint8_t* y) {
  const __m128i u = _mm_unpacklo_epi8(ld64(x), ld64(y));
  if constexpr (Signed) return _mm256_cvtepi8_epi16(u);
  else return _mm256_cvtepu8_epi16(u);
}

// s[h][mi] += Σ_{j<N} code(h, j)·a[mi][4j .. 4j+3] for H halves of a block and MT activation
// rows, per row (int32 lane). Each code vector is decoded once and used at once by every row
// (few live registers). Products are summed in int16 over runs of R vectors (table above),
// each run widened by VPMADDWD with its half's per-row weights w16[h].
// Signed: code() gives signed codes (Q8_0), multiplied as |q|·(a with q's sign).
template <int N, int R, int H, int MT, bool Signed = false, class Code>
SLUICE_INLINE void dot_block(Code code, const int8_t* const (&a)[MT], const __m256i (&w16)[H], __m256i (&s)[H][MT]) {
  SLUICE_UNROLL
  for (int r = 0; r < N; r += R) {
    __m256i s16[H][MT];
    SLUICE_UNROLL
    for (int j = r; j < r + R; ++j) {
      SLUICE_UNROLL
      for (int h = 0; h < H; ++h) {
        const __m256i c = code(h, j);
        const __m256i cu = Signed ? _mm256_abs_epi8(c) : c;
        SLUICE_UNROLL
        for (int mi = 0; mi < MT; ++mi) {
          const __m256i av = bcast4(a[mi] + 4 * j);
          const __m256i p = _mm256_maddubs_epi16(cu, Signed ? _mm256_sign_epi8(av, c) : av);
          s16[h][mi] = j == r ? p : _mm256_add_epi16(s16[h][mi], p);
          SLUICE_CHAIN(s16[h][mi]);
        }
      }
    }
    SLUICE_UNROLL
    for (int h = 0; h < H; ++h) SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) {
      s[h][mi] = _mm256_add_epi32(s[h][mi], _mm256_madd_epi16(s16[h][mi], w16[h]));
      SLUICE_CHAIN(s[h][mi]);
    }
  }
}

// Code vector j of one half of a Q4_0x16 codes area (p: the half's bytes of its first chunk):
// j < 4 the low nibbles of chunk j (elements 4j+t), else the high nibbles of chunk j−4
// (elements 16+4(j−4)+t).
SLUICE_INLINE __m256i nibble(const uint8_t* p, int j) {
  const __m256i v = ld256(p + 64 * (j & 3));
  return _mm256_and_si256(j < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}

// acc + (d_w·d_a)·sumi: the reference's f32 operations of one block, in its order.
inline __m256 block_acc(__m256 acc, __m256 dw, __m256 da, __m256i sumi) {
  return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi)));
}

// ---- legacy 32-element formats ----

// F::code(blk, h, j): code vector j (elements 4j..4j+3) of half h of a block; F::kRun: the
// int16 run length; the block sum is Σ code·a − kOff·Σa.
struct Q4_0 {
  static constexpr int64_t kBytes = 288;
  static constexpr int32_t kOff = 8;
  static constexpr int kRun = 8;
  static constexpr bool kSigned = false;
  static SLUICE_INLINE __m256i code(const uint8_t* blk, int h, int j) { return nibble(blk + 32 + 32 * h, j); }
};
struct Q5_0 {
  static constexpr int64_t kBytes = 352;
  static constexpr int32_t kOff = 16;
  static constexpr int kRun = 4;
  static constexpr bool kSigned = false;
  // Bit 4 comes from the half's 32 bits of mask j (bit 4i+t = byte 4i+t): byte e takes byte
  // e/8 of the mask, tests bit e%8 and gets 16 where it is set.
  static SLUICE_INLINE __m256i code(const uint8_t* blk, int h, int j) {
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const __m256i m = _mm256_shuffle_epi8(_mm256_set1_epi32(ld_i32(blk + 288 + 8 * j + 4 * h)), spread);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(m, bit), bit);
    return _mm256_or_si256(nibble(blk + 32 + 32 * h, j), _mm256_and_si256(set, _mm256_set1_epi8(16)));
  }
};
struct Q8_0 {
  static constexpr int64_t kBytes = 544;
  static constexpr int32_t kOff = 0;  // the codes are made signed
  static constexpr int kRun = 1;
  static constexpr bool kSigned = true;
  // Chunk j holds elements 4j+t; q = code − 128 = code ^ 0x80 (a = −128 never occurs: see the top).
  static SLUICE_INLINE __m256i code(const uint8_t* blk, int h, int j) {
    return _mm256_xor_si256(ld256(blk + 32 + 64 * j + 32 * h), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

// Decode: one activation row, one group, both halves of each block together. The block's
// integer sum starts at −off·Σa (the offset removal).
template <class F>
void legacy_row(const GemmArgs& p, int64_t gi, int64_t) {
  const int64_t nb = p.k / 32;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const int8_t* qs = a_qs(p.a, 0);
  const float* da = a_d(p.a, 0);
  const int32_t* sums = a_sums(p.a, 0, 32);
  const __m256i ones[2] = {ones16(), ones16()};
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t act_ahead = p.act_ahead, w_ahead = p.weight_ahead;
  for (int64_t b = 0; b < nb; ++b) {
    if ((b & 1) == 0) prefetch_act_ahead(qs, da, sums, b, act_ahead);
    if (w_ahead > 0) prefetch_lines(w + b * F::kBytes + w_ahead, F::kBytes);
    const uint8_t* blk = w + b * F::kBytes;
    const int8_t* const a[1] = {qs + 32 * b};
    const __m256i init = _mm256_set1_epi32(-F::kOff * sums[b]);
    __m256i s[2][1] = {{init}, {init}};
    dot_block<8, F::kRun, 2, 1, F::kSigned>([&](int h, int j) SLUICE_INLINE_LAMBDA { return F::code(blk, h, j); }, a,
                                            ones, s);
    const __m256 d = _mm256_set1_ps(da[b]);
    SLUICE_UNROLL
    for (int h = 0; h < 2; ++h) acc[h] = block_acc(acc[h], ld_f16x8(blk + 16 * h), d, s[h][0]);
  }
  store_half(p, gi, 0, 0, acc[0]);
  store_half(p, gi, 1, 0, acc[1]);
}

// Several activation rows: each half of the group with MT rows sharing its decoded blocks
// (the second half re-reads the group from cache).
template <class F, int MT>
void legacy_tile(const GemmArgs& p, int64_t gi, int64_t m0) {
  const int64_t nb = p.k / 32;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const ActTile<MT> at(p.a, m0, 32);
  const __m256i ones[1] = {ones16()};
  for (int h = 0; h < 2; ++h) {
    __m256 acc[MT];
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) acc[mi] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + b * F::kBytes;
      const int8_t* a[MT];
      __m256i s[1][MT];
      SLUICE_UNROLL
      for (int mi = 0; mi < MT; ++mi) {
        a[mi] = at.qs[mi] + 32 * b;
        s[0][mi] = _mm256_set1_epi32(-F::kOff * at.sums[mi][b]);
      }
      dot_block<8, F::kRun, 1, MT, F::kSigned>([&](int, int j) SLUICE_INLINE_LAMBDA { return F::code(blk, h, j); }, a,
                                               ones, s);
      const __m256 dw = ld_f16x8(blk + 16 * h);
      SLUICE_UNROLL
      for (int mi = 0; mi < MT; ++mi) acc[mi] = block_acc(acc[mi], dw, _mm256_set1_ps(at.d[mi][b]), s[0][mi]);
    }
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) store_half(p, gi, h, m0 + mi, acc[mi]);
  }
}

// ---- Q4_K: 8 sub-blocks of 32 with u8 scale and min per row ----
// sumi = Σ_s sc_s·Σ q·a (the scale as VPMADDWD weight); summ = Σ_s m_s·(bsum[2s] + bsum[2s+1]).

constexpr int64_t kQ4_KBytes = 2368;

// acc + ((d·da)·sumi − (dmin·da)·summ): one super-block's f32 operations, in the reference's order.
inline __m256 q4_k_acc(__m256 acc, __m256 dw, __m256 dmin, __m256 da, __m256i sumi, __m256i summ) {
  const __m256 t = _mm256_mul_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(sumi));
  const __m256 u = _mm256_mul_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(summ));
  return _mm256_add_ps(acc, _mm256_sub_ps(t, u));
}

// Sub-block s for H halves from h0 and MT rows (a[mi]: the sub-block's activations).
template <int H, int MT>
SLUICE_INLINE void q4_k_sub(const uint8_t* blk, int s, int h0, const int8_t* const (&a)[MT], __m256i (&sumi)[H][MT]) {
  __m256i sc[H];
  SLUICE_UNROLL
  for (int h = 0; h < H; ++h) {
    const uint8_t* scb = blk + 64 + 16 * s + 8 * (h0 + h);
    sc[h] = row_pairs<false>(scb, scb);
  }
  const uint8_t* codes = blk + 320 + 256 * s + 32 * h0;
  dot_block<8, 8, H, MT>([&](int h, int j) SLUICE_INLINE_LAMBDA { return nibble(codes + 32 * h, j); }, a, sc, sumi);
}

// summ of half h for one activation row (bs: its 16 sums of the super-block), two sub-blocks
// per VPMADDWD.
SLUICE_INLINE __m256i q4_k_mins(const uint8_t* blk, int h, const int32_t* bs) {
  __m256i summ = _mm256_setzero_si256();
  SLUICE_UNROLL
  for (int s = 0; s < 8; s += 2) {
    const __m256i mn = row_pairs<false>(blk + 192 + 16 * s + 8 * h, blk + 192 + 16 * (s + 1) + 8 * h);
    summ = _mm256_add_epi32(
        summ, _mm256_madd_epi16(mn, bcast_pair(bs[2 * s] + bs[2 * s + 1], bs[2 * s + 2] + bs[2 * s + 3])));
    SLUICE_CHAIN(summ);
  }
  return summ;
}

void q4_k_row(const GemmArgs& p, int64_t gi, int64_t) {
  const int64_t nb = p.k / 256;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const int8_t* qs = a_qs(p.a, 0);
  const float* da = a_d(p.a, 0);
  const int32_t* bsum = a_sums(p.a, 0, 256);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * kQ4_KBytes;
    __m256i sumi[2][1] = {{_mm256_setzero_si256()}, {_mm256_setzero_si256()}};
    for (int s = 0; s < 8; ++s) {
      const int8_t* const a[1] = {qs + 256 * b + 32 * s};
      q4_k_sub<2, 1>(blk, s, 0, a, sumi);
    }
    const __m256 d = _mm256_set1_ps(da[b]);
    SLUICE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m256i summ = q4_k_mins(blk, h, bsum + 16 * b);
      acc[h] = q4_k_acc(acc[h], ld_f16x8(blk + 16 * h), ld_f16x8(blk + 32 + 16 * h), d, sumi[h][0], summ);
    }
  }
  store_half(p, gi, 0, 0, acc[0]);
  store_half(p, gi, 1, 0, acc[1]);
}

template <int MT>
void q4_k_tile(const GemmArgs& p, int64_t gi, int64_t m0) {
  const int64_t nb = p.k / 256;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const ActTile<MT> at(p.a, m0, 256);
  for (int h = 0; h < 2; ++h) {
    __m256 acc[MT];
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) acc[mi] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + b * kQ4_KBytes;
      __m256i sumi[1][MT];
      SLUICE_UNROLL
      for (int mi = 0; mi < MT; ++mi) sumi[0][mi] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const int8_t* a[MT];
        SLUICE_UNROLL
        for (int mi = 0; mi < MT; ++mi) a[mi] = at.qs[mi] + 256 * b + 32 * s;
        q4_k_sub<1, MT>(blk, s, h, a, sumi);
      }
      const __m256 dw = ld_f16x8(blk + 16 * h), dmin = ld_f16x8(blk + 32 + 16 * h);
      SLUICE_UNROLL
      for (int mi = 0; mi < MT; ++mi) {
        const __m256i summ = q4_k_mins(blk, h, at.sums[mi] + 16 * b);
        acc[mi] = q4_k_acc(acc[mi], dw, dmin, _mm256_set1_ps(at.d[mi][b]), sumi[0][mi], summ);
      }
    }
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) store_half(p, gi, h, m0 + mi, acc[mi]);
  }
}

// ---- Q6_K: 16 sub-blocks of 16 with an i8 scale per row; codes q + 32 in 0..63 ----
// sumi = Σ_g sc_g·Σ q_u·a (the scale as VPMADDWD weight) − 32·Σ_g sc_g·bsum_g. Wide: the Q6_K8
// layout (codes already bytes, 256 B per sub-block instead of 192).

template <bool Wide>
constexpr int64_t kQ6Bytes = Wide ? 4384 : 3360;
template <bool Wide>
constexpr int64_t kQ6Sub = Wide ? 256 : 192;

// Code vector j (elements 4j+t) of one half of a sub-block (p: the half's bytes of its first
// chunk): low nibble from chunk j%2 (j < 2 low, else high), 2 high bits from the third chunk.
template <bool Wide>
SLUICE_INLINE __m256i q6_code(const uint8_t* p, int j) {
  if constexpr (Wide) {
    return ld256(p + 64 * j);
  } else {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i l = ld256(p + 64 * (j & 1)), hb = ld256(p + 128);
    const __m256i lo = _mm256_and_si256(j < 2 ? l : _mm256_srli_epi16(l, 4), m4);
    // hi(e) sits at bits 2(e/4): move bits 2j..2j+1 to 4..5.
    const __m256i hi = j == 0   ? _mm256_slli_epi16(hb, 4)
                       : j == 1 ? _mm256_slli_epi16(hb, 2)
                       : j == 2 ? hb
                                : _mm256_srli_epi16(hb, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
  }
}

// Sub-block g for H halves from h0 and MT rows (a[mi]: the sub-block's activations).
template <bool Wide, int H, int MT>
SLUICE_INLINE void q6_sub(const uint8_t* blk, int g, int h0, const int8_t* const (&a)[MT], __m256i (&sumi)[H][MT]) {
  __m256i sc[H];
  SLUICE_UNROLL
  for (int h = 0; h < H; ++h) {
    const uint8_t* scb = blk + 32 + 16 * g + 8 * (h0 + h);
    sc[h] = row_pairs<true>(scb, scb);
  }
  const uint8_t* codes = blk + 288 + kQ6Sub<Wide> * g + 32 * h0;
  dot_block<4, 2, H, MT>([&](int h, int j) SLUICE_INLINE_LAMBDA { return q6_code<Wide>(codes + 32 * h, j); }, a, sc,
                         sumi);
}

// The scales of sub-blocks g and g+1 times −32 as per-row int16 pairs (|32·sc| <= 4096): the
// offset term of two sub-blocks is one VPMADDWD with their activation sums.
SLUICE_INLINE __m256i q6_offset_pairs(const uint8_t* blk, int g, int h) {
  const __m256i pr = row_pairs<true>(blk + 32 + 16 * g + 8 * h, blk + 32 + 16 * (g + 1) + 8 * h);
  return _mm256_mullo_epi16(pr, _mm256_set1_epi16(-32));
}

template <bool Wide>
void q6_k_row(const GemmArgs& p, int64_t gi, int64_t) {
  const int64_t nb = p.k / 256;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const int8_t* qs = a_qs(p.a, 0);
  const float* da = a_d(p.a, 0);
  const int32_t* bsum = a_sums(p.a, 0, 256);
  const int64_t w_ahead = p.weight_ahead;
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * kQ6Bytes<Wide>;
    const int32_t* bs = bsum + 16 * b;
    __m256i sumi[2][1] = {{_mm256_setzero_si256()}, {_mm256_setzero_si256()}};
    SLUICE_UNROLL
    for (int g = 0; g < 16; g += 2) {
      const __m256i sp = bcast_pair(bs[g], bs[g + 1]);
      SLUICE_UNROLL
      for (int h = 0; h < 2; ++h) {
        sumi[h][0] = _mm256_add_epi32(sumi[h][0], _mm256_madd_epi16(q6_offset_pairs(blk, g, h), sp));
        SLUICE_CHAIN(sumi[h][0]);
      }
    }
    for (int g = 0; g < 16; ++g) {
      // The tuned prefetch (0: none), 1/16 of a super-block's lines per sub-block, as AVX-512's.
      if (w_ahead > 0)
        prefetch_lines(blk + w_ahead + g * kQ6Bytes<Wide> / 16,
                       (g + 1) * kQ6Bytes<Wide> / 16 - g * kQ6Bytes<Wide> / 16);
      const int8_t* const a[1] = {qs + 256 * b + 16 * g};
      q6_sub<Wide, 2, 1>(blk, g, 0, a, sumi);
    }
    const __m256 d = _mm256_set1_ps(da[b]);
    SLUICE_UNROLL
    for (int h = 0; h < 2; ++h) acc[h] = block_acc(acc[h], ld_f16x8(blk + 16 * h), d, sumi[h][0]);
  }
  store_half(p, gi, 0, 0, acc[0]);
  store_half(p, gi, 1, 0, acc[1]);
}

template <int MT, bool Wide>
void q6_k_tile(const GemmArgs& p, int64_t gi, int64_t m0) {
  const int64_t nb = p.k / 256;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const ActTile<MT> at(p.a, m0, 256);
  for (int h = 0; h < 2; ++h) {
    __m256 acc[MT];
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) acc[mi] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + b * kQ6Bytes<Wide>;
      __m256i sumi[1][MT];
      SLUICE_UNROLL
      for (int mi = 0; mi < MT; ++mi) sumi[0][mi] = _mm256_setzero_si256();
      SLUICE_UNROLL
      for (int g = 0; g < 16; g += 2) {
        const __m256i pr = q6_offset_pairs(blk, g, h);
        SLUICE_UNROLL
        for (int mi = 0; mi < MT; ++mi) {
          const int32_t* bs = at.sums[mi] + 16 * b + g;
          sumi[0][mi] = _mm256_add_epi32(sumi[0][mi], _mm256_madd_epi16(pr, bcast_pair(bs[0], bs[1])));
          SLUICE_CHAIN(sumi[0][mi]);
        }
      }
      for (int g = 0; g < 16; ++g) {
        const int8_t* a[MT];
        SLUICE_UNROLL
        for (int mi = 0; mi < MT; ++mi) a[mi] = at.qs[mi] + 256 * b + 16 * g;
        q6_sub<Wide, 1, MT>(blk, g, h, a, sumi);
      }
      const __m256 dw = ld_f16x8(blk + 16 * h);
      SLUICE_UNROLL
      for (int mi = 0; mi < MT; ++mi) acc[mi] = block_acc(acc[mi], dw, _mm256_set1_ps(at.d[mi][b]), sumi[0][mi]);
    }
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) store_half(p, gi, h, m0 + mi, acc[mi]);
  }
}

// ---- float formats: per column, the 16 rows' weights times one activation, fused ----

// F::load(p): the 8 weights of one half of a column (p at the half's bytes).
struct F32 {
  static constexpr int64_t kBytes = 64;
  static __m256 load(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
struct F16 {
  static constexpr int64_t kBytes = 32;
  static __m256 load(const uint8_t* p) { return ld_f16x8(p); }
};
struct BF16 {
  static constexpr int64_t kBytes = 32;
  static __m256 load(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(ld128(p)), 16));
  }
};

// A group with MT activation rows, each output reduced in two chains of fused multiply-adds,
// even and odd columns (gemm_ref.cpp). Up to 2 rows: both halves of the group at once (4·MT
// accumulators; MT = 1 is the decode kernel). 3-4 rows: one half after the other (2·MT
// accumulators; the second pass finds the group in cache), as 16 registers do not hold more.
template <class F, int MT>
void float_tile(const GemmArgs& p, int64_t gi, int64_t m0) {
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const ActTile<MT> at(p.a, m0, 1);
  constexpr int kHalves = MT <= 2 ? 2 : 1;  // halves done together
  for (int h0 = 0; h0 < 2; h0 += kHalves) {
    __m256 acc[2][kHalves][MT];  // [chain][half][row]
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi)
      for (int h = 0; h < kHalves; ++h) acc[0][h][mi] = acc[1][h][mi] = _mm256_setzero_ps();
    auto column = [&](int ch, int64_t c) SLUICE_INLINE_LAMBDA {
      __m256 wv[kHalves];
      for (int h = 0; h < kHalves; ++h) wv[h] = F::load(w + c * F::kBytes + (h0 + h) * (F::kBytes / 2));
      SLUICE_UNROLL
      for (int mi = 0; mi < MT; ++mi) {
        const __m256 x = _mm256_set1_ps(at.f32[mi][c]);
        for (int h = 0; h < kHalves; ++h) acc[ch][h][mi] = _mm256_fmadd_ps(wv[h], x, acc[ch][h][mi]);
      }
    };
    int64_t c = 0;
    for (; c + 2 <= p.k; c += 2) {
      column(0, c);
      column(1, c + 1);
    }
    if (c < p.k) column(0, c);
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi)
      for (int h = 0; h < kHalves; ++h) store_half(p, gi, h0 + h, m0 + mi, _mm256_add_ps(acc[0][h][mi], acc[1][h][mi]));
  }
}

// ---- per-format entry points (the driver: x86_gemm_drive.h), up to 4 activation rows a tile ----

constexpr int kMaxRows = 4;

template <class F>
void gemm_legacy(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][kMaxRows] = {
      {legacy_tile<F, 1>, legacy_tile<F, 2>, legacy_tile<F, 3>, legacy_tile<F, 4>}, {legacy_row<F>}};
  drive<kMaxRows>(p, g0, g1, kTiles);
}

void gemm_q4_k_impl(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][kMaxRows] = {{q4_k_tile<1>, q4_k_tile<2>, q4_k_tile<3>, q4_k_tile<4>}, {q4_k_row}};
  drive<kMaxRows>(p, g0, g1, kTiles);
}

template <bool Wide>
void gemm_q6_k_impl(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][kMaxRows] = {
      {q6_k_tile<1, Wide>, q6_k_tile<2, Wide>, q6_k_tile<3, Wide>, q6_k_tile<4, Wide>}, {q6_k_row<Wide>}};
  drive<kMaxRows>(p, g0, g1, kTiles);
}

template <class F>
void gemm_float(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][kMaxRows] = {
      {float_tile<F, 1>, float_tile<F, 2>, float_tile<F, 3>, float_tile<F, 4>}, {float_tile<F, 1>}};
  drive<kMaxRows>(p, g0, g1, kTiles);
}

// ---- activation quantizers (byte-identical to quantize_act_ref, NaN and Inf inputs included) ----

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// max(|v|, m) per lane, skipping NaN as the reference's scans do (VMAXPS returns its second
// operand when either is NaN, and m never is).
inline __m256 absmax_ps(__m256 v, __m256 m) { return _mm256_max_ps(abs_ps(v), m); }

inline float hmax_ps(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// roundf (half away from zero) then to int32: trunc(v + copysign(0.49999997, v)) — the
// largest float below 0.5 keeps 0.49999997 itself from rounding up; equal to roundf for every
// float in int32 range (checked over all 2^32 patterns; the AVX-512 set uses the same rule).
inline __m256i round_away_i32(__m256 v) {
  const __m256 h = _mm256_or_ps(_mm256_set1_ps(0.49999997f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  return _mm256_cvttps_epi32(_mm256_add_ps(v, h));
}

// quant's nearest_int, bit for bit: v + 1.5·2^23 leaves the rounded integer in the low mantissa bits.
inline __m256i nearest_int(__m256 v) {
  const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.0f)));
  return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007FFFFF)), _mm256_set1_epi32(0x00400000));
}

// The low bytes of 32 int32 (q[0..3], 8 each), in order: the reference's modular int8 cast.
// (Masked to 0..255 first, so the saturating packs never saturate.)
inline __m256i low_bytes(const __m256i (&q)[4]) {
  const __m256i m = _mm256_set1_epi32(0xFF);
  const __m256i ab = _mm256_packus_epi32(_mm256_and_si256(q[0], m), _mm256_and_si256(q[1], m));
  const __m256i cd = _mm256_packus_epi32(_mm256_and_si256(q[2], m), _mm256_and_si256(q[3], m));
  // Per 128-bit lane the packs interleave: dwords a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7.
  return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Sums of the 32 i8 codes in v: bytes 0..15 in dword 0, bytes 16..31 in dword 4.
inline __m256i sum16_i8(__m256i v) {
  __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), ones16());
  s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4E));
  return _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xB1));
}

void quantize_a8_32_impl(const float* x, int64_t k, uint8_t* out) {
  const int64_t nb = k / 32;
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + k);
  auto* sums = reinterpret_cast<int32_t*>(out + k + 4 * nb);
  for (int64_t b = 0; b < nb; ++b) {
    __m256 v[4];
    __m256 amaxv = _mm256_setzero_ps();
    SLUICE_UNROLL
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + 32 * b + 8 * j);
      amaxv = absmax_ps(v[j], amaxv);
    }
    const float db = hmax_ps(amaxv) / 127;
    const __m256 id = _mm256_set1_ps(db != 0.0f ? 1.0f / db : 0.0f);
    __m256i q[4];
    SLUICE_UNROLL
    for (int j = 0; j < 4; ++j) q[j] = round_away_i32(_mm256_mul_ps(v[j], id));
    const __m256i codes = low_bytes(q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * b), codes);
    d[b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(db), _MM_FROUND_TO_NEAREST_INT)));
    const __m256i s = sum16_i8(codes);
    sums[b] = _mm256_cvtsi256_si32(s) + _mm256_extract_epi32(s, 4);
  }
}

void quantize_a8_256_impl(const float* x, int64_t k, uint8_t* out) {
  const int64_t nb = k / 256;
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + k);
  auto* sums = reinterpret_cast<int32_t*>(out + k + 4 * nb);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + 256 * b;
    __m256 amaxv = _mm256_setzero_ps();
    for (int j = 0; j < 32; ++j) amaxv = absmax_ps(_mm256_loadu_ps(xb + 8 * j), amaxv);
    const float amax = hmax_ps(amaxv);
    // The signed value of the FIRST element with the largest magnitude (as the reference).
    float max = 0.0f;
    for (int j = 0; j < 32 && amax != 0.0f; ++j) {
      const int hit = _mm256_movemask_ps(
          _mm256_cmp_ps(abs_ps(_mm256_loadu_ps(xb + 8 * j)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hit) {
        max = xb[8 * j + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    if (max == 0.0f) {
      std::memset(qs + 256 * b, 0, 256);
      d[b] = 0.0f;
      for (int g = 0; g < 16; ++g) sums[16 * b + g] = 0;
      continue;
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int j = 0; j < 8; ++j) {
      __m256i q[4];
      SLUICE_UNROLL
      for (int t = 0; t < 4; ++t)
        q[t] = _mm256_min_epi32(nearest_int(_mm256_mul_ps(vs, _mm256_loadu_ps(xb + 32 * j + 8 * t))),
                                _mm256_set1_epi32(127));
      const __m256i codes = low_bytes(q);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 256 * b + 32 * j), codes);
      const __m256i s = sum16_i8(codes);
      sums[16 * b + 2 * j] = _mm256_cvtsi256_si32(s);
      sums[16 * b + 2 * j + 1] = _mm256_extract_epi32(s, 4);
    }
    d[b] = 1 / iscale;
  }
}

}  // namespace

// The entry points the set's table (dot_avx2.cpp) points at.
void gemm_q4_0(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_legacy<Q4_0>(p, g0, g1); }
void gemm_q5_0(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_legacy<Q5_0>(p, g0, g1); }
void gemm_q8_0(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_legacy<Q8_0>(p, g0, g1); }
void gemm_q4_k(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_q4_k_impl(p, g0, g1); }
void gemm_q6_k(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_q6_k_impl<false>(p, g0, g1); }
void gemm_q6_k8(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_q6_k_impl<true>(p, g0, g1); }
void gemm_f32(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_float<F32>(p, g0, g1); }
void gemm_f16(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_float<F16>(p, g0, g1); }
void gemm_bf16(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_float<BF16>(p, g0, g1); }
void quantize_a8_32(const float* x, int64_t k, uint8_t* out) { quantize_a8_32_impl(x, k, out); }
void quantize_a8_256(const float* x, int64_t k, uint8_t* out) { quantize_a8_256_impl(x, k, out); }

}  // namespace sluice::kernels::avx2
