// Helpers shared by the kernels tests: random weight rows with realistic scales, random
// activation rows, and the activation rows decoded back to f32.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "tensor/weights.h"
#include "unit/quant/quant_test_util.h"

namespace sluice::kernels::testing {

// `n` elements of weight type t in random bytes (quants.md §10.1: every byte pattern is a
// block; scale fields forced finite). With `sane`, every f16 scale field is instead
// ±2^u, u uniform in [-10, -4] (the range real checkpoints use), and F32/F16/BF16
// elements are N(0, 0.05²), so that Σ|w·x| is not dominated by a handful of blocks.
inline std::vector<uint8_t> weight_row(DType t, int64_t n, uint64_t seed, bool sane) {
  const DTypeInfo& info = dtype_info(t);
  const int64_t blocks = n / info.block_elems;
  std::vector<uint8_t> w = quant::testing::make_random_blocks(t, blocks, seed);
  if (!sane) {
    // Random F32/BF16 bits reach 3e38, where any product overflows: keep exponents in ±30.
    if (t != DType::F32 && t != DType::BF16) return w;
    std::mt19937_64 rng(seed ^ 0xE0E0ull);
    for (int64_t i = 0; i < n; ++i) {
      const float mant = 1.0f + static_cast<float>(rng() % 1024) / 1024;
      const float v = std::ldexp(mant, static_cast<int>(rng() % 61) - 30) * ((rng() & 1) ? -1.0f : 1.0f);
      if (t == DType::F32) std::memcpy(w.data() + 4 * i, &v, 4);
      else quant::store_u16(w.data() + 2 * i, f32_to_bf16(v));
    }
    return w;
  }
  std::mt19937_64 rng(seed ^ 0x5A5A5A5Aull);
  std::uniform_real_distribution<float> u(-10.0f, -4.0f);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = w.data() + b * info.block_bytes;
    switch (t) {
      case DType::F32: {
        const float v = normal(rng);
        std::memcpy(blk, &v, 4);
        break;
      }
      case DType::F16: quant::store_u16(blk, f32_to_f16(normal(rng))); break;
      case DType::BF16: quant::store_u16(blk, f32_to_bf16(normal(rng))); break;
      default:
        for (int off : quant::testing::f16_scale_offsets(t)) {
          const float s = std::exp2(u(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
          quant::store_u16(blk + off, f32_to_f16(s));
        }
    }
  }
  return w;
}

// Activations like a transformer's: N(0, σ²) with σ = 10^v, v uniform in [-3, 3] per row,
// and with `outliers` a few channels 20× larger.
inline std::vector<float> act_row(int64_t n, uint64_t seed, bool outliers = false) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> v(-3.0f, 3.0f);
  const float sigma = std::pow(10.0f, v(rng));
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& e : x) e = normal(rng);
  if (outliers)
    for (int k = 0; k < 4; ++k) x[rng() % n] *= 20.0f;
  return x;
}

// An activation row in format `act` (one of F32, F16, BF16, Q8_0, Q8_1, Q8_K) decoded to f32.
// Q8_1 decodes as d·qs (its s is not a value).
inline std::vector<float> decode_act(DType act, const void* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  switch (act) {
    case DType::Q8_K: quant::dequantize_row_q8_k_ref(p, out.data(), n); break;
    case DType::Q8_1:
      for (int64_t i = 0; i < n / 32; ++i) {
        const auto b = quant::load_block<quant::BlockQ8_1>(p, i);
        for (int e = 0; e < 32; ++e) out[i * 32 + e] = static_cast<float>(b.qs[e]) * f16_to_f32(b.d);
      }
      break;
    default: quant::dequantize_ref(act, p, out.data(), n);
  }
  return out;
}

// An upper bound on |a[e] − x[e]| for each element, where a is x quantized to `act` and
// decoded (quants.md §6.2, §9.2–9.4): half a step of the block scale d = amax/127 (plus the
// f16 rounding of d, which moves a code-127 value by up to amax·2^-11, and of x·(1/d)), or
// half an ulp for F16 / BF16.
inline std::vector<double> act_error_bound(DType act, const float* x, int64_t n) {
  std::vector<double> b(static_cast<size_t>(n), 0.0);
  const int blk = act == DType::Q8_K ? 256 : 32;
  for (int64_t i = 0; i < n; ++i) {
    const double ax = std::fabs(static_cast<double>(x[i]));
    switch (act) {
      case DType::F16: b[i] = ax * std::ldexp(1.0, -11) + std::ldexp(1.0, -25); break;
      case DType::BF16: b[i] = ax * std::ldexp(1.0, -8) + 1e-38; break;
      case DType::Q8_0:
      case DType::Q8_1:
      case DType::Q8_K: {
        const int64_t b0 = i / blk * blk;
        double amax = 0;
        for (int64_t j = b0; j < b0 + blk; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[j])));
        const double d_err = act == DType::Q8_K ? amax * std::ldexp(1.0, -23)
                                                : amax * std::ldexp(1.0, -11) + 127 * std::ldexp(1.0, -25);
        b[i] = amax / 254 * 1.001 + d_err;
        break;
      }
      default: break;
    }
  }
  return b;
}

// A [rows × cols] weight matrix of type t, row r from weight_row(seed + r, sane), and the
// bytes it points into.
struct Weights {
  std::vector<uint8_t> data;
  Mat mat;
};

inline Weights make_weights(DType t, int64_t rows, uint64_t seed, int64_t cols) {
  Weights w;
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = weight_row(t, cols, seed + static_cast<uint64_t>(r), /*sane=*/true);
    w.data.insert(w.data.end(), row.begin(), row.end());
  }
  w.mat = Mat{"w" + std::to_string(seed), t, w.data.data(), cols, rows, dtype_row_bytes(t, cols)};
  return w;
}

// m activation rows of cols floats, row i from act_row(seed + i), outliers on odd rows.
inline std::vector<float> activations(int64_t m, uint64_t seed, int64_t cols) {
  std::vector<float> x;
  for (int64_t i = 0; i < m; ++i) {
    const auto row = act_row(cols, seed + static_cast<uint64_t>(i), i % 2 == 1);
    x.insert(x.end(), row.begin(), row.end());
  }
  return x;
}

}  // namespace sluice::kernels::testing
