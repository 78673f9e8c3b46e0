// AVX-512 (F, BW, VL, VNNI) kernels of the packed matmul (packed.h, gemm.h) and the activation
// quantizers (act.h). See x86_common.h for the linkage rules of ISA translation units.
//
// One zmm = 16 rows × 4 codes: VPDPBUSD (u8 codes × s8 activations) leaves each row's partial
// sum in its own int32 lane, so a block of 16 rows needs no horizontal reduction. Weight codes
// are unsigned (q + off); the offset is removed exactly in int32 with the activation block sums:
// Σ q·a = Σ q_u·a − off·Σa. Then, per block and row, acc += (d_w·d_a)·sumi as separate f32 mul,
// mul, add — the operations of dot_ref, in its order, so results are bit-identical to it.
//
// Decode (one activation row) streams one row group at a time, front to back: one sequential
// stream per core is what the hardware prefetchers follow best, and two interleaved streams or
// software prefetch of the weights were slower (bench/kernels_bench; docs/perf-log.md). With
// several activation rows, up to 8 share
// each decoded block (small-M batches; prefill re-reads the group from cache).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/isa_common.h"
#include "kernels/cpu/x86_avx512/avx512_sets.h"
#include "kernels/cpu/x86_gemm_drive.h"
#include "kernels/gemm.h"

namespace sluice::kernels::avx512 {
namespace {

#define SLUICE_INLINE __attribute__((always_inline)) inline
#define SLUICE_INLINE_LAMBDA __attribute__((always_inline))
#define SLUICE_UNROLL _Pragma("GCC unroll 16")

constexpr int64_t kPrefetch = 2048;
constexpr int64_t kPrefetchQ6 = 8192;

inline int32_t ld_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t ld_u64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline __m512i ld512(const uint8_t* p) { return _mm512_loadu_si512(p); }

inline __m512 ld_f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Prefetches the bytes a tile will read kPrefetch bytes later (the groups a thread takes are
// consecutive, so past the end of this group is the next one). For the compute-bound tiles of
// several activation rows only: the decode kernel streams faster than prefetches can be
// issued, and this CPU drops them when its miss buffers are full.
inline void prefetch_stream(const uint8_t* g, int64_t off, int64_t bytes) {
  const char* p = reinterpret_cast<const char*>(g + off + kPrefetch);
  for (int64_t l = 0; l < bytes; l += 64) _mm_prefetch(p + l, _MM_HINT_T0);
}

inline void store_rows(const GemmArgs& p, int64_t gi, int64_t mi, __m512 v) {
  const int64_t n = p.rows - gi * kGroupRows;
  float* dst = p.y + mi * p.ldy + gi * kGroupRows;
  if (n >= kGroupRows) _mm512_storeu_ps(dst, v);
  else _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << n) - 1), v);
}

// acc + codes (u8) · the activation dword at a (s8, broadcast to the 16 lanes), with the
// broadcast folded into the instruction's memory operand. GCC emits a separate VPBROADCASTD
// per intrinsic call instead: in the tiles of several activation rows that was a quarter of
// all instructions.
SLUICE_INLINE __m512i dpbusd_bcast(__m512i acc, __m512i codes, const int8_t* a) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(codes), "m"(*reinterpret_cast<const int32_t*>(a)));
  return acc;
}

// init + Σ over 8 code vectors c[j] · activation dwords a[j] (exact int32, two chains).
SLUICE_INLINE __m512i dot8(const __m512i c[8], const int8_t* a, int32_t init = 0) {
  __m512i s0 = dpbusd_bcast(_mm512_set1_epi32(init), c[0], a);
  __m512i s1 = dpbusd_bcast(_mm512_setzero_si512(), c[4], a + 16);
  s0 = dpbusd_bcast(s0, c[1], a + 4);
  s1 = dpbusd_bcast(s1, c[5], a + 20);
  s0 = dpbusd_bcast(s0, c[2], a + 8);
  s1 = dpbusd_bcast(s1, c[6], a + 24);
  s0 = dpbusd_bcast(s0, c[3], a + 12);
  s1 = dpbusd_bcast(s1, c[7], a + 28);
  return _mm512_add_epi32(s0, s1);
}

// Nibble codes of a Q4_0x16 codes area: c[0..3] elements 4c+t, c[4..7] elements 16+4c+t.
inline void nibbles(const uint8_t* chunks, __m512i c[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int k = 0; k < 4; ++k) {
    const __m512i v = ld512(chunks + 64 * k);
    c[k] = _mm512_and_si512(v, m4);
    c[4 + k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}

// ---- legacy 32-element formats ----

// F::dot1(blk, a, init): init + Σ codes·a of one block for one activation row (decode).
struct Q4_0 {
  static constexpr int64_t kBytes = 288;
  static constexpr int32_t kOff = 8;
  static void codes(const uint8_t* blk, __m512i c[8]) { nibbles(blk + 32, c); }
  // High nibbles are used in place (byte & 0xF0 = 16·hi): their sum is exactly 16× the
  // wanted one and is shifted back, saving a shift per code vector.
  static SLUICE_INLINE __m512i dot1(const uint8_t* blk, const int8_t* a, int32_t init) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      const __m512i v = ld512(blk + 32 + 64 * k);
      lo[k] = _mm512_and_si512(v, m4);
      hi[k] = _mm512_andnot_si512(m4, v);
    }
    __m512i s0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(init), lo[0], _mm512_set1_epi32(ld_i32(a)));
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi[0], _mm512_set1_epi32(ld_i32(a + 16)));
    for (int k = 1; k < 4; ++k) {
      s0 = _mm512_dpbusd_epi32(s0, lo[k], _mm512_set1_epi32(ld_i32(a + 4 * k)));
      s1 = _mm512_dpbusd_epi32(s1, hi[k], _mm512_set1_epi32(ld_i32(a + 16 + 4 * k)));
    }
    return _mm512_add_epi32(s0, _mm512_srai_epi32(s1, 4));
  }
};
struct Q5_0 {
  static constexpr int64_t kBytes = 352;
  static constexpr int32_t kOff = 16;
  static void codes(const uint8_t* blk, __m512i c[8]) {
    nibbles(blk + 32, c);
    const __m512i sixteen = _mm512_set1_epi8(16);
    for (int j = 0; j < 8; ++j) c[j] = _mm512_mask_add_epi8(c[j], ld_u64(blk + 288 + 8 * j), c[j], sixteen);
  }
  static SLUICE_INLINE __m512i dot1(const uint8_t* blk, const int8_t* a, int32_t init) {
    __m512i c[8];
    codes(blk, c);
    return dot8(c, a, init);
  }
};
struct Q8_0 {
  static constexpr int64_t kBytes = 544;
  static constexpr int32_t kOff = 128;
  static void codes(const uint8_t* blk, __m512i c[8]) {
    // chunk j holds elements 4j+t; dot8 pairs c[j] with activation dword j (j < 4) and
    // c[4+j] with dword 4+j, so chunk j (j >= 4) goes to c[j] directly.
    for (int j = 0; j < 8; ++j) c[j] = ld512(blk + 32 + 64 * j);
  }
  static SLUICE_INLINE __m512i dot1(const uint8_t* blk, const int8_t* a, int32_t init) {
    __m512i c[8];
    codes(blk, c);
    return dot8(c, a, init);
  }
};

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

// One legacy block of one group for MT activation rows: acc[mi] += (d_w·d_a)·sumi.
template <class F, int MT>
SLUICE_INLINE void legacy_block(const uint8_t* blk, int64_t b, const ActTile<MT>& at, __m512 (&acc)[MT]) {
  __m512i c[8];
  F::codes(blk, c);
  const __m512 dw = ld_f16x16(blk);
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) {
    const __m512i s = dot8(c, at.qs[mi] + 32 * b, -F::kOff * at.sums[mi][b]);
    const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(at.d[mi][b]));
    acc[mi] = _mm512_add_ps(acc[mi], _mm512_mul_ps(d, _mm512_cvtepi32_ps(s)));
  }
}

// Decode: one activation row, one group, two blocks per iteration. The block's integer sum
// starts at −off·Σa (the offset removal folded into the first VPDPBUSD).
template <class F>
void legacy_row(const GemmArgs& p, int64_t gi, int64_t) {
  const int64_t nb = p.k / 32;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const int8_t* qs = a_qs(p.a, 0);
  const float* da = a_d(p.a, 0);
  const int32_t* sums = a_sums(p.a, 0, 32);
  __m512 acc = _mm512_setzero_ps();
  auto one = [&](int64_t b) SLUICE_INLINE_LAMBDA {
    const uint8_t* blk = w + b * F::kBytes;
    const __m512i si = F::dot1(blk, qs + 32 * b, -F::kOff * sums[b]);
    const __m512 d = _mm512_mul_ps(ld_f16x16(blk), _mm512_set1_ps(da[b]));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(si)));
  };
  const int64_t act_ahead = p.act_ahead, w_ahead = p.weight_ahead;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    prefetch_act_ahead(qs, da, sums, b, act_ahead);
    if (w_ahead > 0) prefetch_lines(w + b * F::kBytes + w_ahead, 2 * F::kBytes);
    one(b);
    one(b + 1);
  }
  if (b < nb) one(b);
  store_rows(p, gi, 0, acc);
}

// One group for MT activation rows (the prefill and batched-decode tile): each decoded block
// feeds MT rows. Compute-bound, so the hardware prefetchers fall behind: prefetch ahead.
template <class F, int MT>
void legacy_tile(const GemmArgs& p, int64_t gi, int64_t m0) {
  const int64_t nb = p.k / 32;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const ActTile<MT> at(p.a, m0, 32);
  __m512 acc[MT];
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) acc[mi] = _mm512_setzero_ps();
  const bool pf = m0 == 0;  // later row chunks of the same group find it in cache
  for (int64_t b = 0; b < nb; ++b) {
    if (pf) prefetch_stream(w, b * F::kBytes, F::kBytes);
    legacy_block<F, MT>(w + b * F::kBytes, b, at, acc);
  }
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) store_rows(p, gi, m0 + mi, acc[mi]);
}

// ---- Q4_K: 8 sub-blocks of 32 with u8 scale and min per row ----

// One Q4_K super-block of one group for MT rows: per row acc += (d·da)·sumi − (dmin·da)·summ.
template <int MT>
SLUICE_INLINE void q4_k_block(const uint8_t* blk, int64_t b, const ActTile<MT>& at, __m512 (&acc)[MT], bool pf,
                              const uint8_t* gbase, int64_t off) {
  __m512i sumi[MT], summ[MT];
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) sumi[mi] = summ[mi] = _mm512_setzero_si512();
  for (int s = 0; s < 8; ++s) {
    if (pf) prefetch_stream(gbase, off + 320 + 256 * s, 256);
    __m512i c[8];
    nibbles(blk + 320 + 256 * s, c);
    const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 16 * s)));
    const __m512i mn = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192 + 16 * s)));
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) {
      const __m512i si = dot8(c, at.qs[mi] + 256 * b + 32 * s);
      sumi[mi] = _mm512_add_epi32(sumi[mi], _mm512_mullo_epi32(si, sc));
      const int32_t* bs = at.sums[mi] + 16 * b + 2 * s;
      summ[mi] = _mm512_add_epi32(summ[mi], _mm512_mullo_epi32(mn, _mm512_set1_epi32(bs[0] + bs[1])));
    }
  }
  const __m512 dw = ld_f16x16(blk), dmin = ld_f16x16(blk + 32);
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) {
    const __m512 da = _mm512_set1_ps(at.d[mi][b]);
    const __m512 t = _mm512_mul_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(sumi[mi]));
    const __m512 u = _mm512_mul_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(summ[mi]));
    acc[mi] = _mm512_add_ps(acc[mi], _mm512_sub_ps(t, u));
  }
}

template <int MT>
void q4_k_tile(const GemmArgs& p, int64_t gi, int64_t m0) {
  constexpr int64_t kBytes = 2368;
  const int64_t nb = p.k / 256;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const ActTile<MT> at(p.a, m0, 256);
  __m512 acc[MT];
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) acc[mi] = _mm512_setzero_ps();
  const bool pf = m0 == 0 && p.m > 1;
  for (int64_t b = 0; b < nb; ++b) {
    if (pf) prefetch_stream(w, b * kBytes, 320);
    q4_k_block<MT>(w + b * kBytes, b, at, acc, pf, w, b * kBytes);
  }
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) store_rows(p, gi, m0 + mi, acc[mi]);
}

// ---- Q6_K: 16 sub-blocks of 16 with an i8 scale per row; codes q + 32 in 0..63 ----

// VGF2P8AFFINEQB x, m: each byte of x times the 8×8 bit matrix m (GF(2)), i.e. any per-byte bit
// move with zeros elsewhere. Inline asm, so only the GFNI set's kernels ever contain it and no
// function needs a gfni target (the avx512 set runs on CPUs without GFNI, e.g. Cascade Lake).
SLUICE_INLINE __m512i gf2p8affine(__m512i x, __m512i m) {
  __m512i r;
  __asm__("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(m));
  return r;
}
// Bit matrices: byte 7 − t of the qword holds the input bits of output bit t.
constexpr int64_t kHiNibbleToLow = 0x1020408000000000;  // bits 4-7 → 0-3
constexpr int64_t kPair0To45 = 0x0000000001020000;      // bits 0-1 → 4-5
constexpr int64_t kPair1To45 = 0x0000000004080000;      // bits 2-3 → 4-5
constexpr int64_t kPair3To45 = 0x0000000040800000;      // bits 6-7 → 4-5
// VPTERNLOGD truth tables (A = 0xF0, B = 0xCC, C = 0xAA): A | (B & C), and C ? A : B.
constexpr int kOrAnd = 0xF8, kSelect = 0xE4;

// The 16 rows × 16 codes (q + 32, 0..63) of sub-block g as four VNNI operands: c[k] holds
// elements 4k..4k+3 of each row. A sub-block is two nibble vectors (l0: low nibbles → c[0],
// high → c[2]; l1: c[1], c[3]) and one vector of 2-bit pairs h (bits 2k..2k+1 → c[k]).
// Wide: the Q6_K8 layout, codes already bytes. Per sub-block the unpack is 17 vector
// operations with and/shift/or; Gfni: 9, GFNI moving the misplaced bits (zeros elsewhere) and
// VPTERNLOG merging them with the part already in place, taken raw: fewer vector operations,
// so the decode kernel's arithmetic hides under its stream (kernels_bench LinearCore/<isa>/q6_K;
// docs/perf-log.md). Merging with VPTERNLOG alone (13 operations) was no faster.
template <bool Wide, bool Gfni>
SLUICE_INLINE void q6_codes(const uint8_t* blk, int g, __m512i c[4]) {
  constexpr int64_t kSub = Wide ? 256 : 192;
  const uint8_t* sub = blk + 288 + kSub * g;
  if constexpr (Wide) {
    for (int k = 0; k < 4; ++k) c[k] = ld512(sub + 64 * k);
    return;
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i l0 = ld512(sub), l1 = ld512(sub + 64), h = ld512(sub + 128);
  if constexpr (Gfni) {
    const __m512i hi = _mm512_set1_epi64(kHiNibbleToLow);
    c[0] = _mm512_ternarylogic_epi32(l0, gf2p8affine(h, _mm512_set1_epi64(kPair0To45)), m4, kSelect);
    c[1] = _mm512_ternarylogic_epi32(l1, gf2p8affine(h, _mm512_set1_epi64(kPair1To45)), m4, kSelect);
    c[2] = _mm512_ternarylogic_epi32(gf2p8affine(l0, hi), h, m30, kOrAnd);
    c[3] = _mm512_or_si512(gf2p8affine(l1, hi), gf2p8affine(h, _mm512_set1_epi64(kPair3To45)));
  } else {
    c[0] = _mm512_or_si512(_mm512_and_si512(l0, m4), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
    c[1] = _mm512_or_si512(_mm512_and_si512(l1, m4), _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
    c[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4), _mm512_and_si512(h, m30));
    c[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                           _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
  }
}

template <int MT, bool Wide>
SLUICE_INLINE void q6_k_block(const uint8_t* blk, int64_t b, const ActTile<MT>& at, __m512 (&acc)[MT],
                              const uint8_t* pf) {
  __m512i sumi[MT];
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) sumi[mi] = _mm512_setzero_si512();
  for (int g = 0; g < 16; ++g) {
    if (pf) {
      // The lines of 1/16 of a super-block, kPrefetchQ6 bytes ahead, spread over its sub-blocks.
      constexpr int64_t kB = Wide ? 4384 : 3360;
      for (int64_t l = g * kB / 16; l < (g + 1) * kB / 16; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(pf + l), _MM_HINT_T0);
    }
    __m512i c[4];
    q6_codes<Wide, false>(blk, g, c);
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * g)));
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) {
      // One chain per row: the MT rows' chains interleave, so its latency is hidden.
      const int8_t* a = at.qs[mi] + 256 * b + 16 * g;
      __m512i si = dpbusd_bcast(_mm512_set1_epi32(-32 * at.sums[mi][16 * b + g]), c[0], a);
      si = dpbusd_bcast(si, c[1], a + 4);
      si = dpbusd_bcast(si, c[2], a + 8);
      si = dpbusd_bcast(si, c[3], a + 12);
      sumi[mi] = _mm512_add_epi32(sumi[mi], _mm512_mullo_epi32(si, sc));
    }
  }
  const __m512 dw = ld_f16x16(blk);
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) {
    const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(at.d[mi][b]));
    acc[mi] = _mm512_add_ps(acc[mi], _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[mi])));
  }
}

// Decode (one activation row, one group): each sub-block's activation dwords and offset are
// broadcast straight into the VPDPBUSDs.
template <bool Wide, bool Gfni>
void q6_k_row(const GemmArgs& p, int64_t gi, int64_t) {
  constexpr int64_t kBytes = Wide ? 4384 : 3360;
  const int64_t nb = p.k / 256;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const int8_t* qs = a_qs(p.a, 0);
  const float* da = a_d(p.a, 0);
  const int32_t* bsum = a_sums(p.a, 0, 256);
  __m512 acc = _mm512_setzero_ps();
  const int64_t w_ahead = p.weight_ahead;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * kBytes;
    __m512i sumi = _mm512_setzero_si512();
    SLUICE_UNROLL
    for (int g = 0; g < 16; ++g) {
      // The tuned prefetch (0: none), 1/16 of a super-block's lines per sub-block.
      if (w_ahead > 0) prefetch_lines(blk + w_ahead + g * kBytes / 16, (g + 1) * kBytes / 16 - g * kBytes / 16);
      const int8_t* a = qs + 256 * b + 16 * g;
      __m512i c[4];
      q6_codes<Wide, Gfni>(blk, g, c);
      const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * g)));
      __m512i s0 = _mm512_dpbusd_epi32(_mm512_set1_epi32(-32 * bsum[16 * b + g]), c[0], _mm512_set1_epi32(ld_i32(a)));
      __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c[1], _mm512_set1_epi32(ld_i32(a + 4)));
      s0 = _mm512_dpbusd_epi32(s0, c[2], _mm512_set1_epi32(ld_i32(a + 8)));
      s1 = _mm512_dpbusd_epi32(s1, c[3], _mm512_set1_epi32(ld_i32(a + 12)));
      sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
    }
    const __m512 d = _mm512_mul_ps(ld_f16x16(blk), _mm512_set1_ps(da[b]));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi)));
  }
  store_rows(p, gi, 0, acc);
}

// Q6_K tiles of several activation rows: compute-bound, so the hardware prefetchers fall
// behind; software prefetch 8 KiB ahead, a few lines per sub-block (bench/kernels_bench on the
// 1536 × 262144 lm_head; a whole super-block's prefetches at once were slower than none).
template <int MT, bool Wide>
void q6_k_tile(const GemmArgs& p, int64_t gi, int64_t m0) {
  constexpr int64_t kBytes = Wide ? 4384 : 3360;
  const int64_t nb = p.k / 256;
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const ActTile<MT> at(p.a, m0, 256);
  __m512 acc[MT];
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) acc[mi] = _mm512_setzero_ps();
  const bool pf = m0 == 0;  // later row chunks of the same group find it in cache
  for (int64_t b = 0; b < nb; ++b)
    q6_k_block<MT, Wide>(w + b * kBytes, b, at, acc, pf ? w + b * kBytes + kPrefetchQ6 : nullptr);
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) store_rows(p, gi, m0 + mi, acc[mi]);
}

// ---- float formats: per column, the 16 rows' weights times one activation, fused ----

struct F32 {
  static constexpr int64_t kBytes = 64;
  static __m512 load(const uint8_t* p) { return _mm512_loadu_ps(p); }
};
struct F16 {
  static constexpr int64_t kBytes = 32;
  static __m512 load(const uint8_t* p) { return ld_f16x16(p); }
};
struct BF16 {
  static constexpr int64_t kBytes = 32;
  static __m512 load(const uint8_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
};

// Two chains per activation row, even and odd columns (gemm_ref.cpp): with one, the decode
// kernel waited on the FMA latency (4 cycles a column), slower than a fast bus delivers.
template <class F, int MT>
void float_tile(const GemmArgs& p, int64_t gi, int64_t m0) {
  const uint8_t* w = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const ActTile<MT> at(p.a, m0, 1);
  __m512 acc[2][MT];
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) acc[0][mi] = acc[1][mi] = _mm512_setzero_ps();
  const bool pf = m0 == 0 && p.m > 1;
  auto column = [&](int ch, int64_t c) SLUICE_INLINE_LAMBDA {
    const __m512 wv = F::load(w + c * F::kBytes);
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) acc[ch][mi] = _mm512_fmadd_ps(wv, _mm512_set1_ps(at.f32[mi][c]), acc[ch][mi]);
  };
  int64_t c = 0;
  for (; c + 2 <= p.k; c += 2) {
    if (pf && (c & 3) == 0) prefetch_stream(w, c * F::kBytes, 4 * F::kBytes);
    column(0, c);
    column(1, c + 1);
  }
  if (c < p.k) column(0, c);
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) store_rows(p, gi, m0 + mi, _mm512_add_ps(acc[0][mi], acc[1][mi]));
}

// Two row groups (32 weight rows) × MT activation rows, the prefill tile: each broadcast
// activation feeds both groups' weight vectors, so a column is 2 weight loads, MT broadcasts and
// 2·MT FMAs (the one-group tile: 1 and MT for MT FMAs, a load per FMA). 4·MT accumulators,
// each output's two chains as in float_tile (gemm_ref's order: results are bit-identical).
template <class F, int MT>
void float_tile2(const GemmArgs& p, int64_t gi, int64_t m0) {
  const uint8_t* w0 = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
  const uint8_t* w1 = w0 + p.group_bytes;
  const ActTile<MT> at(p.a, m0, 1);
  __m512 acc[2][2][MT];  // [chain][group][row]
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) acc[0][0][mi] = acc[0][1][mi] = acc[1][0][mi] = acc[1][1][mi] = _mm512_setzero_ps();
  const bool pf = m0 == 0;  // later row chunks of the same groups find them in cache
  auto column = [&](int ch, int64_t c) SLUICE_INLINE_LAMBDA {
    const __m512 wv0 = F::load(w0 + c * F::kBytes), wv1 = F::load(w1 + c * F::kBytes);
    SLUICE_UNROLL
    for (int mi = 0; mi < MT; ++mi) {
      const __m512 x = _mm512_set1_ps(at.f32[mi][c]);
      acc[ch][0][mi] = _mm512_fmadd_ps(wv0, x, acc[ch][0][mi]);
      acc[ch][1][mi] = _mm512_fmadd_ps(wv1, x, acc[ch][1][mi]);
    }
  };
  int64_t c = 0;
  for (; c + 2 <= p.k; c += 2) {
    if (pf && (c & 3) == 0) {
      prefetch_stream(w0, c * F::kBytes, 4 * F::kBytes);
      prefetch_stream(w1, c * F::kBytes, 4 * F::kBytes);
    }
    column(0, c);
    column(1, c + 1);
  }
  if (c < p.k) column(0, c);
  SLUICE_UNROLL
  for (int mi = 0; mi < MT; ++mi) {
    store_rows(p, gi, m0 + mi, _mm512_add_ps(acc[0][0][mi], acc[1][0][mi]));
    store_rows(p, gi + 1, m0 + mi, _mm512_add_ps(acc[0][1][mi], acc[1][1][mi]));
  }
}

// ---- per-format entry points (the driver: x86_gemm_drive.h) ----

template <class F>
void gemm_legacy(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][8] = {{legacy_tile<F, 1>, legacy_tile<F, 2>, legacy_tile<F, 3>, legacy_tile<F, 4>,
                                           legacy_tile<F, 5>, legacy_tile<F, 6>, legacy_tile<F, 7>, legacy_tile<F, 8>},
                                          {legacy_row<F>}};
  drive<8>(p, g0, g1, kTiles);
}

void gemm_q4_k_impl(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][4] = {{q4_k_tile<1>, q4_k_tile<2>, q4_k_tile<3>, q4_k_tile<4>}, {q4_k_tile<1>}};
  drive<4>(p, g0, g1, kTiles);
}

// Q6_K8 (codes already bytes) has no unpack, so no GFNI variant.
void gemm_q6_k8_impl(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][8] = {
      {q6_k_tile<1, true>, q6_k_tile<2, true>, q6_k_tile<3, true>, q6_k_tile<4, true>, q6_k_tile<5, true>,
       q6_k_tile<6, true>, q6_k_tile<7, true>, q6_k_tile<8, true>},
      {q6_k_row<true, false>}};
  drive<8>(p, g0, g1, kTiles);
}

// Gfni: the decode kernel unpacks with GFNI. The tiles of several rows do not: there the
// unpack is shared by up to 8 rows and VPDPBUSD is the bound, and GFNI made them slower (it
// seems to compete with VPDPBUSD for the same pipes on Zen 4).
template <bool Gfni>
void gemm_q6_k_impl(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][8] = {
      {q6_k_tile<1, false>, q6_k_tile<2, false>, q6_k_tile<3, false>, q6_k_tile<4, false>, q6_k_tile<5, false>,
       q6_k_tile<6, false>, q6_k_tile<7, false>, q6_k_tile<8, false>},
      {q6_k_row<false, Gfni>}};
  drive<8>(p, g0, g1, kTiles);
}

// Up to kPairRows (8) activation rows (decode, small batches: bound by the weight stream) one
// group at a time; more (prefill) by pairs of groups over chunks of 6 rows, a last odd group
// alone.
template <class F>
void gemm_float(const GemmArgs& p, int64_t g0, int64_t g1) {
  static constexpr TileFn kTiles[2][8] = {{float_tile<F, 1>, float_tile<F, 2>, float_tile<F, 3>, float_tile<F, 4>,
                                           float_tile<F, 5>, float_tile<F, 6>, float_tile<F, 7>, float_tile<F, 8>},
                                          {float_tile<F, 1>}};
  static constexpr TileFn kPairs[6] = {float_tile2<F, 1>, float_tile2<F, 2>, float_tile2<F, 3>,
                                       float_tile2<F, 4>, float_tile2<F, 5>, float_tile2<F, 6>};
  constexpr int64_t kPairRows = 8, kChunk = 6;
  if (p.m <= kPairRows) {
    drive<8>(p, g0, g1, kTiles);
    return;
  }
  int64_t gi = g0;
  for (; gi + 2 <= g1; gi += 2)
    for (int64_t m0 = 0; m0 < p.m; m0 += kChunk) kPairs[(p.m - m0 < kChunk ? p.m - m0 : kChunk) - 1](p, gi, m0);
  if (gi < g1) drive<8>(p, gi, g1, kTiles);
}

// ---- activation quantizers (byte-identical to quantize_act_ref, NaN and Inf inputs included) ----

// max(|v|, m) per lane, skipping NaN as the reference's scans do (VMAXPS returns its second
// operand when either is NaN, and m never is).
inline __m512 absmax_ps(__m512 v, __m512 m) { return _mm512_max_ps(_mm512_abs_ps(v), m); }

// The reference's int8 cast of each int32 code, sign-extended back: the sums add the stored
// bytes (a NaN's code is INT32_MIN, whose low byte is 0).
inline __m512i as_i8(__m512i q) { return _mm512_srai_epi32(_mm512_slli_epi32(q, 24), 24); }

// quant's nearest_int, bit for bit: v + 1.5·2^23 leaves the rounded integer in the low mantissa bits.
inline __m512i nearest_int(__m512 v) {
  const __m512i bits = _mm512_castps_si512(_mm512_add_ps(v, _mm512_set1_ps(12582912.0f)));
  return _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007FFFFF)), _mm512_set1_epi32(0x00400000));
}

// roundf (half away from zero) then to int32, in 4 operations: trunc(v + copysign(0.49999997, v)).
// The largest float below 0.5 instead of 0.5 keeps v = 0.49999997 from rounding up to 1; the
// rule equals roundf for every float in int32 range (checked exhaustively, all 2^32 patterns).
inline __m512i round_away_i32(__m512 v) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512 h = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(0.49999997f)), sign));
  return _mm512_cvttps_epi32(_mm512_add_ps(v, h));
}

// One level of a transposed reduction: X and Y hold blocks in segments of S lanes; the result
// holds X's blocks then Y's in segments of S/2, each lane combining lanes o and o + S/2 of its
// segment. Index vectors for _mm512_permutex2var (16+ = Y).
template <int S>
struct TIdx {
  int32_t lo[16], hi[16];
  constexpr TIdx() : lo(), hi() {
    constexpr int h = S / 2, n = 16 / S;
    for (int j = 0; j < 16; ++j) {
      const int t = j / h, o = j % h;
      const int src = t < n ? t * S + o : 16 + (t - n) * S + o;
      lo[j] = src;
      hi[j] = src + h;
    }
  }
};
template <int S>
constexpr TIdx<S> kTIdx{};

// out lane b = Op over the 16 lanes of v[b] (16 vectors in, one out; 15 combines of two
// permutes and one Op instead of 16 horizontal reductions).
template <class V, class Op>
SLUICE_INLINE V reduce_transposed(V (&v)[16], Op op) {
  auto level = [&](auto s_tag, int n) SLUICE_INLINE_LAMBDA {
    constexpr int S = decltype(s_tag)::value;
    const __m512i lo = _mm512_loadu_si512(kTIdx<S>.lo), hi = _mm512_loadu_si512(kTIdx<S>.hi);
    for (int i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<V, __m512>)
        v[i] = op(_mm512_permutex2var_ps(v[2 * i], lo, v[2 * i + 1]),
                  _mm512_permutex2var_ps(v[2 * i], hi, v[2 * i + 1]));
      else
        v[i] = op(_mm512_permutex2var_epi32(v[2 * i], lo, v[2 * i + 1]),
                  _mm512_permutex2var_epi32(v[2 * i], hi, v[2 * i + 1]));
    }
  };
  level(std::integral_constant<int, 16>{}, 8);
  level(std::integral_constant<int, 8>{}, 4);
  level(std::integral_constant<int, 4>{}, 2);
  level(std::integral_constant<int, 2>{}, 1);
  return v[0];
}

// Q8_0-style activation blocks of 32: d = amax/127 rounded through f16, codes roundf(x/d),
// sums of codes. 16 blocks at a time, their maxima and sums reduced transposed.
void quantize_a8_32_impl(const float* x, int64_t k, uint8_t* out) {
  const int64_t nb = k / 32;
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + k);
  auto* sums = reinterpret_cast<int32_t*>(out + k + 4 * nb);
  const auto fmax = [](__m512 a, __m512 b) SLUICE_INLINE_LAMBDA { return _mm512_max_ps(a, b); };
  const auto iadd = [](__m512i a, __m512i b) SLUICE_INLINE_LAMBDA { return _mm512_add_epi32(a, b); };
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    const float* xb = x + 32 * b;
    __m512 m[16];
    SLUICE_UNROLL
    for (int j = 0; j < 16; ++j)
      m[j] = absmax_ps(_mm512_loadu_ps(xb + 32 * j), absmax_ps(_mm512_loadu_ps(xb + 32 * j + 16), _mm512_setzero_ps()));
    const __m512 db = _mm512_div_ps(reduce_transposed(m, fmax), _mm512_set1_ps(127.0f));
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(db, _mm512_setzero_ps(), _CMP_NEQ_UQ),
                                          _mm512_set1_ps(1.0f), db);
    _mm512_storeu_ps(d + b, _mm512_cvtph_ps(_mm512_cvtps_ph(db, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    alignas(64) float ids[16];
    _mm512_store_ps(ids, id);
    __m512i s[16];
    SLUICE_UNROLL
    for (int j = 0; j < 16; ++j) {
      const __m512 v = _mm512_set1_ps(ids[j]);
      const __m512i q0 = round_away_i32(_mm512_mul_ps(_mm512_loadu_ps(xb + 32 * j), v));
      const __m512i q1 = round_away_i32(_mm512_mul_ps(_mm512_loadu_ps(xb + 32 * j + 16), v));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * (b + j)), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * (b + j) + 16), _mm512_cvtepi32_epi8(q1));
      s[j] = _mm512_add_epi32(as_i8(q0), as_i8(q1));
    }
    _mm512_storeu_si512(sums + b, reduce_transposed(s, iadd));
  }
  for (; b < nb; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(absmax_ps(x0, absmax_ps(x1, _mm512_setzero_ps())));
    const float db = amax / 127;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = round_away_i32(_mm512_mul_ps(x0, vid));
    const __m512i q1 = round_away_i32(_mm512_mul_ps(x1, vid));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * b), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
    d[b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(db), _MM_FROUND_TO_NEAREST_INT)));
    sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(as_i8(q0), as_i8(q1)));
  }
}

void quantize_a8_256_impl(const float* x, int64_t k, uint8_t* out) {
  const int64_t nb = k / 256;
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + k);
  auto* sums = reinterpret_cast<int32_t*>(out + k + 4 * nb);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + 256 * b;
    __m512 amaxv = _mm512_setzero_ps();
    for (int j = 0; j < 16; ++j) amaxv = absmax_ps(_mm512_loadu_ps(xb + 16 * j), amaxv);
    const float amax = _mm512_reduce_max_ps(amaxv);
    // The signed value of the FIRST element with the largest magnitude (as the reference).
    float max = 0.0f;
    for (int j = 0; j < 16 && amax != 0.0f; ++j) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * j)), _mm512_set1_ps(amax),
                                               _CMP_EQ_OQ);
      if (hit) {
        max = xb[16 * j + __builtin_ctz(hit)];
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
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int j = 0; j < 16; ++j) {
      __m512i q = nearest_int(_mm512_mul_ps(vs, _mm512_loadu_ps(xb + 16 * j)));
      q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 256 * b + 16 * j), _mm512_cvtepi32_epi8(q));
      sums[16 * b + j] = _mm512_reduce_add_epi32(as_i8(q));
    }
    d[b] = 1 / iscale;
  }
}

}  // namespace

// The entry points the set's table (dot_avx512.cpp) points at.
void gemm_q4_0(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_legacy<Q4_0>(p, g0, g1); }
void gemm_q5_0(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_legacy<Q5_0>(p, g0, g1); }
void gemm_q8_0(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_legacy<Q8_0>(p, g0, g1); }
void gemm_q4_k(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_q4_k_impl(p, g0, g1); }
void gemm_q6_k(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_q6_k_impl<false>(p, g0, g1); }
void gemm_q6_k_gfni(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_q6_k_impl<true>(p, g0, g1); }
void gemm_q6_k8(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_q6_k8_impl(p, g0, g1); }
void gemm_f32(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_float<F32>(p, g0, g1); }
void gemm_f16(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_float<F16>(p, g0, g1); }
void gemm_bf16(const GemmArgs& p, int64_t g0, int64_t g1) { gemm_float<BF16>(p, g0, g1); }
void quantize_a8_32(const float* x, int64_t k, uint8_t* out) { quantize_a8_32_impl(x, k, out); }
void quantize_a8_256(const float* x, int64_t k, uint8_t* out) { quantize_a8_256_impl(x, k, out); }

}  // namespace sluice::kernels::avx512
