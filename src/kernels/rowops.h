// The small per-row ops of a transformer step, with ONE defined sequence of IEEE operations
// each, which the scalar reference (rowops_ref.cpp) and every SIMD set (cpu/x86_*/) follow
// exactly — so a step's results are bit-identical on every ISA, as the packed matmuls are.
// Reductions use 16 lanes (lane l takes elements i ≡ l mod 16, fused multiply-adds), then the
// fixed tree (l, l+8) → (l, l+4) → (l, l+2) → (l, l+1). exp is a fixed polynomial (no libm).
// Any length: a tail of r < 16 elements takes lanes 0..r-1.
#pragma once

#include <cstdint>

namespace sluice::kernels {

struct RowOps {
  // y = x · s · w with s = 1/sqrt(Σx²/n + eps) (Σx² in 16 lanes, then s in double);
  // w == nullptr: no weight. x and y may alias.
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t n, float eps);
  // x += rms_norm(a; w)   (Gemma's post-norm residual). a may be clobbered.
  void (*add_rms_norm)(float* x, const float* a, const float* w, int64_t n, float eps);
  // out = gelu_tanh(g) · u,  gelu_tanh(v) = 0.5·v·(1 + tanh(√(2/π)·(v + 0.044715·v³))). Any n.
  void (*gelu_mul)(const float* g, const float* u, float* out, int64_t n);
  // x = cap · tanh(x / cap). Any n.
  void (*softcap)(float* x, int64_t n, float cap);
  // x *= s. Any n.
  void (*scale)(float* x, int64_t n, float s);
  // NeoX RoPE with a precomputed table: pairs (i, i + half), half = n_rot / 2:
  // x[i] = x[i]·c[i] − x[i+half]·s[i], x[i+half] = x[i]·s[i] + x[i+half]·c[i] (cs = c[half] | s[half]).
  void (*rope)(float* x, const float* cs, int64_t n_rot);
  // Index of the largest element (the first on ties). Any n >= 1.
  int64_t (*argmax)(const float* x, int64_t n);
  // out[i] = x[i] rounded to IEEE half / bfloat16 (nearest even; base/fp16.h's conversions).
  void (*to_f16)(const float* x, uint16_t* out, int64_t n);
  void (*to_bf16)(const float* x, uint16_t* out, int64_t n);
  // out = a · sigmoid(b), sigmoid(v) = 1 / (1 + exp(−v)) (a true division): b == a is SiLU, a
  // and b the two halves of a row: a GLU. out may alias a or b. Any n. Sets that lack it
  // (null) get the reference's through merged_ops.
  void (*sigmoid_mul)(const float* a, const float* b, float* out, int64_t n);
};

// The scalar reference set.
const RowOps& rowops_ref();

// The scalar definitions the ops are built from (exposed for tests).
float exp_ref(float x);  // the fixed-polynomial exp of every set (relative error < 2e-7)
float dot16_ref(const float* x, const float* y, int64_t n);  // the 16-lane dot of every set
float sum16_ref(const float* x, int64_t n);                  // the 16-lane sum of every set
float tanh_ref(float x);                                     // via exp_ref: sign(x)·(1 − 2/(exp(2|x|) + 1))

}  // namespace sluice::kernels
