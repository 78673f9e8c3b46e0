// Reference Q6_K quantizer: ggml's quantize_row_q6_K_ref (quants.md §8.4), in f32 without
// FMA contraction. Per 256-element super-block:
//   1. each 16-element group g gets a float scale s_g and codes from make_qx_quants(n=16,
//      nmax=32, rmse_type=1): weighted least squares with weights x^2 over 19 trial scales;
//   2. the group scale of largest |s_g| (first on ties) sets iscale = -128 / max_scale,
//      d = f16(1 / iscale) and scales[g] = min(127, nearest_int(iscale * s_g));
//   3. every element is re-coded against the quantized scale: q = clamp(nearest_int(x /
//      (f32(d) * scales[g])), -32, 31), except in groups whose f32(d) * scales[g] is 0, which
//      keep the codes of step 1.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/ref_rows.h"

namespace sluice::quant::ref {

namespace {

constexpr float kGroupMaxEps = 1e-15f;  // ggml GROUP_MAX_EPS

// Code in [-nmax, nmax-1] for iscale * x.
inline int clamp_code(float iscale, float x, int nmax) {
  return std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x)));
}

// ggml make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL): returns the group scale and
// writes the offset codes L[i] = code + nmax (0..2*nmax-1). ggml's operation order kept:
// w = x*x; sumlx += (w*x)*l; suml2 += (w*l)*l.
float make_qx_quants_rmse1(int n, int nmax, const float* x, int8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {  // all (nearly) zero: codes 0, i.e. -nmax, scale 0
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  // One trial: sums for codes of iscale * x.
  auto trial = [&](float iscale, float* sumlx, float* suml2) {
    float slx = 0.0f, sl2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const auto l = static_cast<float>(clamp_code(iscale, x[i], nmax));
      const float w = x[i] * x[i];
      slx += w * x[i] * l;
      sl2 += w * l * l;
    }
    *sumlx = slx;
    *suml2 = sl2;
  };
  auto store_codes = [&](float iscale) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + clamp_code(iscale, x[i], nmax));
  };

  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  trial(iscale, &sumlx, &suml2);
  store_codes(iscale);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    trial(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      store_codes(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Packs 256 offset codes L (0..63) into ql/qh (§8.2): per half h, ql[64h + l] holds elements
// l (low nibble) and l+64 (high), ql[64h + 32 + l] elements l+32 and l+96, qh[32h + l] the high
// 2 bits of elements l, l+32, l+64, l+96 (relative to 128h).
void pack_q6_k_codes(const int8_t* L, BlockQ6_K* b) {
  for (int h = 0; h < 2; ++h) {
    const int8_t* Lh = L + 128 * h;
    uint8_t* ql = b->ql + 64 * h;
    uint8_t* qh = b->qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      const int q1 = Lh[l] & 0xF, q2 = Lh[l + 32] & 0xF, q3 = Lh[l + 64] & 0xF, q4 = Lh[l + 96] & 0xF;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                   ((Lh[l + 96] >> 4) << 6));
    }
  }
}

void quantize_block_q6_k(const float* x, BlockQ6_K* b) {
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int g = 0; g < kQK_K / 16; ++g) {
    scales[g] = make_qx_quants_rmse1(16, 32, x + 16 * g, L + 16 * g);
    const float abs_scale = std::fabs(scales[g]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[g];
    }
  }
  std::memset(b, 0, sizeof *b);
  if (max_abs_scale < kGroupMaxEps) return;  // all-zero block, d = +0

  const float iscale = -128.0f / max_scale;
  b->d = f32_to_f16(1 / iscale);
  for (int g = 0; g < kQK_K / 16; ++g) {
    b->scales[g] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[g])));
  }
  for (int g = 0; g < kQK_K / 16; ++g) {
    const float d = f16_to_f32(b->d) * static_cast<float>(b->scales[g]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      const int l = std::max(-32, std::min(31, nearest_int(x[16 * g + i] / d)));
      L[16 * g + i] = static_cast<int8_t>(l + 32);
    }
  }
  pack_q6_k_codes(L, b);
}

}  // namespace

void from_f32_q6_k(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    BlockQ6_K b;
    quantize_block_q6_k(src + i * kQK_K, &b);
    store_block(dst, i, b);
  }
}

}  // namespace sluice::quant::ref
