// Views of weight tensors inside the mapped GGUF file, bound by name with shape checks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace sluice::gguf {
class GgufFile;
}

namespace sluice {

// A weight matrix W for y = W·x: `rows` outputs, each a contiguous row of `cols` inputs
// (GGUF ne = [cols, rows]; quant blocks run along cols). 1-D tensors have rows == 1.
struct Mat {
  std::string name;
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t cols = 0;  // ne[0], the reduction dimension
  int64_t rows = 0;  // ne[1]
  uint64_t row_bytes = 0;

  bool empty() const { return data == nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
};

// Told the bytes [p, p + n) of Mats once they have been copied elsewhere (repacked), so that
// their owner can drop them from memory (gguf::GgufFile::release_pages); the bytes must stay
// readable. Empty: nothing is released.
using ReleasePages = std::function<void(const uint8_t* p, uint64_t n)>;

// Binds tensors of one file, checking presence, shape and type with errors that name them.
class WeightBinder {
 public:
  explicit WeightBinder(const gguf::GgufFile& f) : f_(f) {}

  // A required 2-D matrix of shape [cols, rows] (any supported type).
  Mat matrix(const std::string& name, int64_t cols, int64_t rows) const;
  // An optional matrix: empty Mat when absent, checked like matrix() when present.
  Mat optional_matrix(const std::string& name, int64_t cols, int64_t rows) const;
  // A required F32 vector of n elements (norm weights), returned dequantized.
  std::vector<float> vector_f32(const std::string& name, int64_t n) const;
  bool has(const std::string& name) const;
  // Releases pages of this file's map (it must outlive the function).
  ReleasePages release_pages() const;

 private:
  const gguf::GgufFile& f_;
};

}  // namespace sluice
