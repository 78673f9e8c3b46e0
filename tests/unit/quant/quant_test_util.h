// Helpers shared by the quant tests: seeded random blocks with finite scale fields, and
// bit-level float comparison.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype.h"

namespace sluice::quant::testing {

inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Byte offsets of the f16 scale fields inside one block (quants.md layouts). F16/BF16 are
// handled per element by make_random_blocks.
inline std::vector<int> f16_scale_offsets(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS: return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

// An f16 whose exponent is all ones (Inf/NaN) loses bit 14, so it becomes finite (quants.md §10).
inline void make_f16_finite(uint8_t* p) {
  if ((p[1] & 0x7C) == 0x7C) p[1] &= 0xBF;
}

// `count` random blocks of type t: random bytes, scale fields forced finite. For F32, F16 and
// BF16 every element is a random finite value (all bit patterns but Inf/NaN).
inline std::vector<uint8_t> make_random_blocks(DType t, int64_t count, uint64_t seed) {
  const DTypeInfo& info = dtype_info(t);
  std::vector<uint8_t> data(static_cast<size_t>(count) * info.block_bytes);
  std::mt19937_64 rng(seed);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < count; ++i) {
    uint8_t* blk = data.data() + i * info.block_bytes;
    switch (t) {
      case DType::F32:
        if ((blk[3] & 0x7F) == 0x7F && (blk[2] & 0x80)) blk[3] &= 0xBF;  // exponent all ones
        break;
      case DType::F16: make_f16_finite(blk); break;
      case DType::BF16:
        if ((blk[1] & 0x7F) == 0x7F && (blk[0] & 0x80)) blk[1] &= 0xBF;
        break;
      case DType::Q8_K:
        if ((blk[3] & 0x7F) == 0x7F && (blk[2] & 0x80)) blk[3] &= 0xBF;
        break;
      default:
        for (int off : f16_scale_offsets(t)) make_f16_finite(blk + off);
    }
  }
  return data;
}

// `blocks` blocks of `be` floats. Each block has its own magnitude 2^k (k in [-12, 12]) and
// shape: uniform, normal, offset (all one sign), sparse, or all zero.
inline std::vector<float> random_input(int64_t blocks, int be, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(blocks * be));
  for (int64_t b = 0; b < blocks; ++b) {
    float* v = x.data() + b * be;
    const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 25) - 12);
    const int shape = static_cast<int>(rng() % 5);
    for (int e = 0; e < be; ++e) {
      switch (shape) {
        case 0: v[e] = mag * uni(rng); break;
        case 1: v[e] = mag * normal(rng); break;
        case 2: v[e] = mag * (3.0f + uni(rng)); break;
        case 3: v[e] = (rng() % 8 == 0) ? mag * normal(rng) : 0.0f; break;
        default: v[e] = 0.0f;
      }
    }
  }
  return x;
}

// The 15 weight types sluice decodes.
inline const std::vector<DType>& supported_types() {
  static const std::vector<DType> v = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,
                                       DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,   DType::Q3_K,
                                       DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};
  return v;
}

}  // namespace sluice::quant::testing
