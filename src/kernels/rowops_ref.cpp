// Scalar reference of the row ops: the exact operation sequences every SIMD set follows.
// Built with -ffp-contract=off; std::fma is exactly rounded, as the vector fused multiply-add.
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/rowops.h"

namespace sluice::kernels {

namespace {}  // namespace

// Σ x[i]·y[i] in 16 lanes with the fixed tree (rowops.h); a tail of r < 16 elements goes to
// lanes 0..r-1 (the SIMD sets load it masked, zeros elsewhere).
// Σ x[i] in 16 lanes (plain adds) with the same tree.
float sum16_ref(const float* x, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] = acc[l] + x[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] = acc[l] + x[i];
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = acc[l] + acc[l + w];
  return acc[0];
}

float dot16_ref(const float* x, const float* y, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(x[i + l], y[i + l], acc[l]);
  for (int l = 0; i < n; ++i, ++l) acc[l] = std::fma(x[i], y[i], acc[l]);
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = acc[l] + acc[l + w];
  return acc[0];
}

namespace {

float norm_scale(float ss, int64_t n, float eps) {
  return static_cast<float>(1.0 /
                            std::sqrt(static_cast<double>(ss) / static_cast<double>(n) + static_cast<double>(eps)));
}

void rms_norm_ref(const float* x, const float* w, float* y, int64_t n, float eps) {
  const float s = norm_scale(dot16_ref(x, x, n), n, eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * s) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
  }
}

void add_rms_norm_ref(float* x, const float* a, const float* w, int64_t n, float eps) {
  const float s = norm_scale(dot16_ref(a, a, n), n, eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] + (a[i] * s) * w[i];
}

float gelu_ref(float v) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float cube = ((0.044715f * v) * v) * v;
  const float th = tanh_ref(kSqrt2OverPi * (v + cube));
  return (0.5f * v) * (1.0f + th);
}

void gelu_mul_ref(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_ref(g[i]) * u[i];
}

void softcap_ref(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * tanh_ref(x[i] / cap);
}

void scale_ref(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * s;
}

void rope_ref(float* x, const float* cs, int64_t n_rot) {
  const int64_t half = n_rot / 2;
  const float* c = cs;
  const float* s = cs + half;
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * c[i] - b * s[i];
    x[i + half] = a * s[i] + b * c[i];
  }
}

int64_t argmax_ref(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

void to_f16_ref(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_f16(x[i]);
}
void to_bf16_ref(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

void sigmoid_mul_ref(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * (1.0f / (1.0f + exp_ref(-b[i])));
}

}  // namespace

float exp_ref(float x) {
  // Cody–Waite range reduction x = n·ln2 + r, |r| <= ln2/2, then Cephes' degree-7 expf polynomial.
  x = std::fmin(std::fmax(x, -87.0f), 88.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(n, -0.693359375f, x);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  float y = std::fma(p, r * r, r);
  y = y + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, 4);
  return y * two_n;
}

float tanh_ref(float x) {
  const float a = std::fabs(x);
  const float e = exp_ref(a + a);
  const float t = 1.0f - 2.0f / (e + 1.0f);
  return std::copysign(t, x);
}

const RowOps& rowops_ref() {
  static const RowOps k = {rms_norm_ref, add_rms_norm_ref, gelu_mul_ref, softcap_ref, scale_ref,
                           rope_ref,     argmax_ref,       to_f16_ref,   to_bf16_ref, sigmoid_mul_ref};
  return k;
}

}  // namespace sluice::kernels
