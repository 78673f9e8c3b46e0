#include "tensor/weights.h"

#include "base/error.h"
#include "gguf/reader.h"
#include "quant/quant.h"

namespace sluice {

bool WeightBinder::has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

ReleasePages WeightBinder::release_pages() const {
  return [&f = f_](const uint8_t* p, uint64_t n) { f.release_pages(p, n); };
}

Mat WeightBinder::matrix(const std::string& name, int64_t cols, int64_t rows) const {
  const gguf::TensorInfo* t = f_.find_tensor(name);
  if (!t)
    fail("%s: missing tensor '%s' (expected shape [%lld, %lld])", f_.name().c_str(), name.c_str(),
         static_cast<long long>(cols), static_cast<long long>(rows));
  const bool ok = t->ne[0] == static_cast<uint64_t>(cols) && t->ne[1] == static_cast<uint64_t>(rows) && t->ne[2] == 1 &&
                  t->ne[3] == 1 && (t->n_dims == 2 || (t->n_dims == 1 && rows == 1));
  if (!ok)
    fail("%s: tensor '%s' has shape %s, expected [%lld, %lld]", f_.name().c_str(), name.c_str(),
         t->shape_string().c_str(), static_cast<long long>(cols), static_cast<long long>(rows));
  if (!quant::traits(t->type))
    fail("%s: tensor '%s' has type %s, which sluice cannot compute with", f_.name().c_str(), name.c_str(),
         std::string(dtype_name(t->type)).c_str());
  return Mat{name, t->type, t->data, cols, rows, t->row_bytes()};
}

Mat WeightBinder::optional_matrix(const std::string& name, int64_t cols, int64_t rows) const {
  return has(name) ? matrix(name, cols, rows) : Mat{};
}

std::vector<float> WeightBinder::vector_f32(const std::string& name, int64_t n) const {
  const Mat m = matrix(name, n, 1);
  std::vector<float> out(static_cast<size_t>(n));
  quant::dequantize_ref(m.type, m.data, out.data(), n);
  return out;
}

}  // namespace sluice
