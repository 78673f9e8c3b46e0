#include "models/gemma4/clamped_linear.h"

#include <algorithm>

#include "base/error.h"
#include "gguf/reader.h"
#include "quant/quant.h"

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
  if (clamps_input()) {
    in.assign(x, x + m * lin.cols());
    for (float& v : in) v = std::min(std::max(v, in_lo), in_hi);
    x = in.data();
  }
  lin.run(pool, x, m, y, scratch, isa);
  if (clamps_output()) {
    for (int64_t i = 0; i < m * lin.rows(); ++i) y[i] = std::min(std::max(y[i], out_lo), out_hi);
  }
}

std::vector<float> read_all_f32(const gguf::GgufFile& f, const gguf::TensorInfo& t) {
  if (!quant::traits(t.type)) fail("%s: tensor '%s' has a type sluice cannot read", f.name().c_str(), t.name.c_str());
  std::vector<float> out(t.n_elements());
  for (uint64_t r = 0; r < t.rows(); ++r)
    quant::dequantize_ref(t.type, t.data + r * t.row_bytes(), out.data() + r * t.ne[0], static_cast<int64_t>(t.ne[0]));
  return out;
}

}  // namespace sluice::models::gemma4
