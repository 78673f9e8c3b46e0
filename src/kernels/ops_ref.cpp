// Scalar reference ops. Compiled with -ffp-contract=off: results do not depend on FMA.
#include <cmath>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "kernels/dot_ref.h"
#include "kernels/ops.h"
#include "quant/quant.h"
#include "threading/thread_pool.h"

namespace sluice::kernels {

float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void dequant_row(const Mat& w, int64_t r, float* out) {
  quant::traits(w.type)->to_f32_ref(w.row(r), out, w.cols);
}

namespace {

// Scratch memory of the thread that calls matmul: one buffer that grows to the largest request
// and is reused by every later call, so a decode step allocates nothing. Thread-safe: each
// calling thread has its own (thread_local), and during one call the pool's workers touch
// disjoint rows of it.
class Scratch {
 public:
  uint8_t* get(size_t bytes) {
    if (buf_.size() < bytes) buf_.resize(bytes);
    return buf_.data();
  }

 private:
  std::vector<uint8_t> buf_;
};

Scratch& act_scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

void matmul(ThreadPool& pool, const Mat& w, const float* x, int64_t m, float* y) {
  const int64_t rows = w.rows, cols = w.cols;
  if (w.type == DType::F32) {
    matmul_act_quant(pool, w, x, m, y);   // same f32 path
    return;
  }
  // Each worker decodes its weight rows once to f32 and dots them with every activation row.
  const auto to_f32 = quant::traits(w.type)->to_f32_ref;
  pool.run([&](int ith, int nth) {
    int64_t r0, r1;
    split_range(rows, ith, nth, &r0, &r1);
    thread_local std::vector<float> row;
    if (static_cast<int64_t>(row.size()) < cols) row.resize(cols);
    for (int64_t r = r0; r < r1; ++r) {
      to_f32(w.row(r), row.data(), cols);
      for (int64_t i = 0; i < m; ++i) y[i * rows + r] = dot(row.data(), x + i * cols, cols);
    }
  });
}

void matmul_act_quant(ThreadPool& pool, const Mat& w, const float* x, int64_t m, float* y) {
  const int64_t rows = w.rows, cols = w.cols;
  if (w.type == DType::F32) {
    pool.run([&](int ith, int nth) {
      int64_t r0, r1;
      split_range(rows, ith, nth, &r0, &r1);
      for (int64_t r = r0; r < r1; ++r) {
        const float* wr = reinterpret_cast<const float*>(w.row(r));
        for (int64_t i = 0; i < m; ++i) y[i * rows + r] = dot(wr, x + i * cols, cols);
      }
    });
    return;
  }
  // llama.cpp's scheme (dot_ref.h): each activation row is converted ONCE to the weight type's
  // vec_dot_type (Q8_0 / Q8_1 / Q8_K, or f16 / bf16), then every weight row is dotted with
  // it block by block. Row i of y depends only on row i of x.
  // The dot (and optionally the activation quantizer) come from the ISA set chosen at run
  // time (cpu_kernels.h); types without a SIMD kernel use dot_ref.
  const DType wt = w.type;
  const auto rb = static_cast<int64_t>(act_row_bytes(wt, cols));  // throws before the pool runs
  const CpuKernels& k = cpu_kernels();
  const auto quantize = k.quantize_dot_act ? k.quantize_dot_act : quantize_act_row;
  const DotKernel simd_dot = k.dot[static_cast<uint32_t>(wt)];  // wt checked by act_row_bytes
  uint8_t* act = act_scratch().get(static_cast<size_t>(rb * m));
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(m, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) quantize(wt, x + i * cols, act + i * rb, cols);
  });
  pool.run([&](int ith, int nth) {
    int64_t r0, r1;
    split_range(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w.row(r);
      if (simd_dot) {
        for (int64_t i = 0; i < m; ++i) y[i * rows + r] = simd_dot(wr, act + i * rb, cols);
      } else {
        for (int64_t i = 0; i < m; ++i) y[i * rows + r] = dot_ref(wt, wr, act + i * rb, cols);
      }
    }
  });
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  // Sum of squares in double: the mean must not depend on summation order noise.
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

void rope_neox(float* x, int64_t n_rot, int64_t pos, float base, float freq_scale, const float* freq_factors) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    double theta = static_cast<double>(pos) * freq_scale * std::pow(static_cast<double>(base), -2.0 * i / n_rot);
    if (freq_factors) theta /= freq_factors[i];
    const float c = static_cast<float>(std::cos(theta)), s = static_cast<float>(std::sin(theta));
    const float a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = a * s + b * c;
  }
}

}  // namespace sluice::kernels
