// Packed block structs of the ggml weight formats (quants.md §2, §7, §8, appendices;
// ggml-org/ggml src/ggml-common.h). Every struct is exactly the on-disk block: no padding,
// little-endian fields, sizes checked below.
//
// Blocks in a file or a tensor buffer are NOT aligned to the struct's alignment (Q4_0 blocks
// are 18 bytes apart, a row may start anywhere). Never cast a data pointer to a block pointer
// or to a wider integer pointer: copy the block out with load_block() (the reference code
// does), or read single fields with the load_u16/load_u32 helpers.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace sluice::quant {

static_assert(std::endian::native == std::endian::little,
              "block fields are little-endian and read by memcpy: big-endian hosts are unsupported");

// Elements per block.
inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK4_NL = 32;
inline constexpr int kQK_K = 256;       // K-quant super-block
inline constexpr int kKScaleSize = 12;  // packed 6-bit scales/mins of Q4_K, Q5_K (and Q3_K's scales)

// ---- legacy 32-element blocks (quants.md §2) ----

// Q4_0, 18 B: y = (q - 8) * d; qs[j] = q[j] | q[j+16] << 4.
struct BlockQ4_0 {
  uint16_t d;              // @0  f16 scale
  uint8_t qs[kQK4_0 / 2];  // @2  nibbles
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1, 20 B: y = q * d + m.
struct BlockQ4_1 {
  uint16_t d;              // @0  f16 scale
  uint16_t m;              // @2  f16 min
  uint8_t qs[kQK4_1 / 2];  // @4  nibbles as Q4_0
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0, 22 B: y = (q - 16) * d; bit 4 of q[e] is bit e of the u32 qh.
struct BlockQ5_0 {
  uint16_t d;              // @0  f16 scale
  uint8_t qh[4];           // @2  u32 LE (read with load_u32)
  uint8_t qs[kQK5_0 / 2];  // @6  low nibbles as Q4_0
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1, 24 B: y = q * d + m.
struct BlockQ5_1 {
  uint16_t d;              // @0  f16 scale
  uint16_t m;              // @2  f16 min
  uint8_t qh[4];           // @4  u32 LE
  uint8_t qs[kQK5_1 / 2];  // @8
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_0, 34 B: y = qs[e] * d.
struct BlockQ8_0 {
  uint16_t d;         // @0  f16 scale
  int8_t qs[kQK8_0];  // @2
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q8_1, 36 B (activation side only, §9.3): s = f16(d * sum(qs)).
struct BlockQ8_1 {
  uint16_t d;         // @0  f16 scale
  uint16_t s;         // @2  f16 d * sum of codes
  int8_t qs[kQK8_1];  // @4
};
static_assert(sizeof(BlockQ8_1) == 36);

// IQ4_NL, 18 B: y = d * kIQ4NLValues[nib(e)], nibbles as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;               // @0  f16 scale
  uint8_t qs[kQK4_NL / 2];  // @2
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// ---- K-quants, 256-element super-blocks (quants.md §7, §8, appendices) ----

// Q2_K, 84 B: 16 groups of 16; y = (d * (sc & 15)) * q - (dmin * (sc >> 4)), q in 0..3.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // @0   low nibble scale, high nibble min
  uint8_t qs[kQK_K / 4];       // @16  2-bit codes, 4 per byte
  uint16_t d;                  // @80  f16 super-scale for scales
  uint16_t dmin;               // @82  f16 super-scale for mins
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K, 110 B: 16 groups of 16; y = (d * (S - 32)) * q, q in -4..3.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];     // @0   high bit of each code
  uint8_t qs[kQK_K / 4];        // @32  low 2 bits
  uint8_t scales[kKScaleSize];  // @96  16 x 6-bit scales
  uint16_t d;                   // @108 f16
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K, 144 B: 8 sub-blocks of 32; y = (d*sc) * q - (dmin*m), q in 0..15.
struct BlockQ4_K {
  uint16_t d;                   // @0   f16
  uint16_t dmin;                // @2   f16
  uint8_t scales[kKScaleSize];  // @4   6-bit sc/m packing (§7.1)
  uint8_t qs[kQK_K / 2];        // @16  4 chunks of 32 bytes: low nibbles sub-block 2c, high 2c+1
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K, 176 B: as Q4_K plus a 5th bit: bit s = e/32 of qh[e % 32].
struct BlockQ5_K {
  uint16_t d;                   // @0
  uint16_t dmin;                // @2
  uint8_t scales[kKScaleSize];  // @4
  uint8_t qh[kQK_K / 8];        // @16
  uint8_t qs[kQK_K / 2];        // @48
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K, 210 B: 16 groups of 16; y = (d * scales[e/16]) * q, q in -32..31 (§8).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // @0   low 4 bits
  uint8_t qh[kQK_K / 4];      // @128 high 2 bits, 4 codes per byte
  int8_t scales[kQK_K / 16];  // @192 signed sub-scales
  uint16_t d;                 // @208 f16
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K, 292 B (activation side only, §9.4): y = d * qs[e]; d is f32, not f16.
struct BlockQ8_K {
  float d;                    // @0   f32 scale
  int8_t qs[kQK_K];           // @4
  int16_t bsums[kQK_K / 16];  // @260 sum of each 16 codes
};
static_assert(sizeof(BlockQ8_K) == 292);

// IQ4_XS, 136 B: 8 sub-blocks of 32 with 6-bit scales ls; y = (d * (ls - 32)) * kIQ4NLValues[nib].
struct BlockIQ4_XS {
  uint16_t d;                    // @0   f16
  uint8_t scales_h[2];           // @2   u16 LE: 2 high bits of ls per sub-block (read with load_u16)
  uint8_t scales_l[kQK_K / 64];  // @4  4 low bits of ls, two sub-blocks per byte
  uint8_t qs[kQK_K / 2];         // @8   16 bytes per sub-block, nibbles as Q4_0
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The fixed non-linear code book of IQ4_NL and IQ4_XS (quants.md appendix C).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// ---- unaligned access helpers ----

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// Block i of a packed array that starts at src (any alignment).
template <class Block>
inline Block load_block(const void* src, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(src) + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}

template <class Block>
inline void store_block(void* dst, int64_t i, const Block& b) {
  std::memcpy(static_cast<uint8_t*>(dst) + i * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
}

// Sub-block j (0..7) scale and min of the Q4_K / Q5_K 12-byte packing (§7.1, ggml
// get_scale_min_k4). Each is 6 bits.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Inverse of get_scale_min_k4 (ggml's reference K-quant packing): sc[j], m[j] < 64.
inline void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t q[kKScaleSize]) {
  for (int j = 0; j < 4; ++j) {
    q[j] = sc[j];
    q[j + 4] = m[j];
  }
  for (int j = 4; j < 8; ++j) {
    q[j + 4] = static_cast<uint8_t>((sc[j] & 15) | ((m[j] & 15) << 4));
    q[j - 4] = static_cast<uint8_t>(q[j - 4] | ((sc[j] >> 4) << 6));
    q[j] = static_cast<uint8_t>(q[j] | ((m[j] >> 4) << 6));
  }
}

}  // namespace sluice::quant
