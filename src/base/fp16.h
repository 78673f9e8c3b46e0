// IEEE binary16 and bfloat16 <-> binary32 conversions, bit-exact with ggml
// (ggml-impl.h): f16 decode is exact incl. subnormals/Inf/NaN; encode rounds to nearest even.
#pragma once

#include <cstdint>
#include <cstring>

namespace sluice {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t man = h & 0x3FF;
  if (exp == 0x1F) return bits_f32(sign | 0x7F800000u | (man << 13));  // Inf / NaN
  if (exp == 0) {
    if (man == 0) return bits_f32(sign);  // +-0
    // Subnormal: value = man * 2^-24, exactly representable in f32.
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400) == 0);
    return bits_f32(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3FF) << 13);
  }
  return bits_f32(sign | (exp + (127 - 15)) << 23 | man << 13);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {  // Inf or NaN (keep NaN quiet and non-zero)
    return sign | 0x7C00 | (a > 0x7F800000u ? 0x200 | ((a >> 13) & 0x3FF) : 0);
  }
  if (a >= 0x477FF000u) return sign | 0x7C00;  // rounds to >= 65520: overflow to Inf
  if (a < 0x38800000u) {                       // below the smallest normal f16 (2^-14)
    if (a < 0x33000000u) return sign;          // < 2^-25: rounds to zero (2^-25 itself is a tie to 0)
    // Subnormal: shift the 24-bit significand into place, round to nearest even.
    const uint32_t e = a >> 23;
    const uint32_t m = (a & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) ... result = m >> (shift) with rounding
    const uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    const uint32_t r = q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: rebias exponent, round the 13 dropped mantissa bits to nearest even.
  const uint32_t r = a + 0xFFF + ((a >> 13) & 1) - (static_cast<uint32_t>(127 - 15) << 23);
  return sign | static_cast<uint16_t>(r >> 13);
}

inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

}  // namespace sluice
