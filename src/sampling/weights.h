// Internal to src/sampling: the sampling weights exp((l − mx) / T), computed with the same
// IEEE operations in the same order on every host and at every vector width, so a weight is
// the same bits wherever it is computed (sampler.cpp's chain, top_p_select.cpp's selection).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sampling/sampler.h"

namespace sluice::sampling_detail {

// 4 float lanes in GCC/Clang vector extensions: SSE2 on any x86-64, NEON on ARM, no ISA
// dispatch needed for a loop that reads one row of logits from cache.
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
inline F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// e^x for x <= 0 in single precision (relative error a few 1e-7), exactly 0 below -87: such a
// weight is under 1.7e-38 of the top token's and is dropped, as an underflowed one always was.
// x = n·ln 2 + r with n an integer and |r| <= ln 2 / 2 (ln 2 split in two parts so n·ln 2 is
// exact), e^r by a degree-7 polynomial (Cephes' expf coefficients), 2^n written into the
// exponent bits. One template for a float and for 4 lanes: the same IEEE operations in the
// same order (this module is built with -ffp-contract=off), so the weights are the same bits on
// every host and whichever form computes them — a sampled token depends only on (seed,
// position, logits).
// (Its 8- and 16-lane instantiations are always inlined into their AVX2 / AVX-512 functions,
// so no wide vector crosses a call; GCC warns about that ABI anyway.)
#pragma GCC diagnostic ignored "-Wpsabi"
template <class F, class I>
__attribute__((always_inline)) inline F exp_nonpos_t(F x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRound = 12582912.0f;  // 1.5 · 2^23: adding it rounds to an integer
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const F lo = F{} - 87.0f;  // -87 in every lane
  const auto in_range = x >= lo;
  const F xc = in_range ? x : lo;
  const F n = (xc * kLog2e + kRound) - kRound;
  const F r = (xc - n * kLn2Hi) - n * kLn2Lo;
  F p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F e = p * (r * r) + r + 1.0f;
  I bits;
  if constexpr (std::is_same_v<F, float>) bits = (static_cast<int32_t>(n) + 127) << 23;
  else bits = (__builtin_convertvector(n, I) + 127) << 23;
  F scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return in_range ? e * scale : F{};
}
inline float exp_nonpos(float x) { return exp_nonpos_t<float, int32_t>(x); }
inline F4 exp_nonpos4(F4 x) { return exp_nonpos_t<F4, I4>(x); }

// The unnormalised weight exp((l − mx) / T) of logit l, top logit mx, 1/T = inv_t; the top
// token's is exactly 1.
inline float weight_of(float l, float mx, float inv_t) { return exp_nonpos((l - mx) * inv_t); }

// Weights of the whole 16-lane blocks of logits[0 .. n) into out, at the widest vector width
// the CPU has (the same bits at every width); returns how many were done (n rounded down to 16).
int32_t block_weights(const float* logits, float mx, float inv_t, float* out, int32_t n);

// Candidate order: higher logit first, the lower id among equals. A strict total order, so a
// selection's first k, sorted, are exactly a full sort's first k. (A function object, not a
// function pointer, so the sorts inline it.)
constexpr auto by_logit = [](const TokenProb& a, const TokenProb& b) {
  return a.prob > b.prob || (a.prob == b.prob && a.token < b.token);
};

}  // namespace sluice::sampling_detail
