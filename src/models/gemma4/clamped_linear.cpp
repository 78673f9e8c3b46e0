#include "models/gemma4/clamped_linear.h"

#include <algorithm>

#include "base/error.h"
#include "gguf/reader.h"
#include "quant/quant.h"
#include "threading/thread_pool.h"

namespace sluice::models::gemma4 {

ClampedLinear ClampedLinear::bind(const WeightBinder& wb, ThreadPool& pool, const std::string& base, int64_t cols,
                                  int64_t rows) {
  ClampedLinear cl;
  const Mat m = wb.matrix(base + ".weight", cols, rows);
  cl.lin = kernels::Linear::build({&m, 1}, pool, base);
  auto scalar = [&](const char* suffix, float def) {
    const std::string n = base + "." + suffix;
    return wb.has(n) ? wb.vector_f32(n, 1)[0] : def;
  };
  cl.in_lo = scalar("input_min", -kInf), cl.in_hi = scalar("input_max", kInf);
  cl.out_lo = scalar("output_min", -kInf), cl.out_hi = scalar("output_max", kInf);
  return cl;
}

void ClampedLinear::run(ThreadPool& pool, const float* x, int64_t m, float* y, std::vector<float>& in,
                        kernels::ActScratch& scratch, const kernels::CpuKernels* isa) const {
  // The clamps split over the pool's threads by rows, as the matmul (elementwise: same values).
  const auto clamp_rows = [&](const float* src, float* dst, int64_t width, float lo, float hi) {
    pool.run([&](int ith, int nth) {
      int64_t i0, i1;
      split_range(m, ith, nth, &i0, &i1);
      for (int64_t i = i0 * width; i < i1 * width; ++i) dst[i] = std::min(std::max(src[i], lo), hi);
    });
  };
  if (clamps_input()) {
    in.resize(static_cast<size_t>(m * lin.cols()));
    clamp_rows(x, in.data(), lin.cols(), in_lo, in_hi);
    x = in.data();
  }
  lin.run(pool, x, m, y, scratch, isa);
  if (clamps_output()) clamp_rows(y, y, lin.rows(), out_lo, out_hi);
}

std::vector<float> read_all_f32(const gguf::GgufFile& f, const gguf::TensorInfo& t) {
  if (!quant::traits(t.type)) fail("%s: tensor '%s' has a type sluice cannot read", f.name().c_str(), t.name.c_str());
  std::vector<float> out(t.n_elements());
  for (uint64_t r = 0; r < t.rows(); ++r)
    quant::dequantize_ref(t.type, t.data + r * t.row_bytes(), out.data() + r * t.ne[0], static_cast<int64_t>(t.ne[0]));
  return out;
}

}  // namespace sluice::models::gemma4
