#include "kernels/ops.h"
#include "quant/quant.h"

namespace sluice::kernels {

void dequant_row(const Mat& w, int64_t r, float* out) { quant::traits(w.type)->to_f32_ref(w.row(r), out, w.cols); }

}  // namespace sluice::kernels
