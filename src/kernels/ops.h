// Embedding lookup: one row of a weight table decoded to f32. (The model's other ops live in
// linear.h — the matmuls —, rowops.h and attention.h.)
#pragma once

#include <cstdint>

#include "tensor/weights.h"

namespace sluice::kernels {

// Row r of W decoded to f32 (embedding lookup). out has W.cols elements.
void dequant_row(const Mat& w, int64_t r, float* out);

}  // namespace sluice::kernels
