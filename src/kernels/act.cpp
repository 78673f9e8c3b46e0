// Reference activation quantizers: the codes and scales of quantize_act_row (dot_ref.h), laid
// out for the packed kernels (act.h).
#include "kernels/act.h"

#include <cstring>

#include "base/error.h"
#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace sluice::kernels {

int64_t act_block_elems(ActFormat f) {
  switch (f) {
    case ActFormat::kA8_32: return 32;
    case ActFormat::kA8_256: return 256;
    case ActFormat::kF32: break;
  }
  return 1;
}

uint64_t act_row_stride(ActFormat f, int64_t k) {
  uint64_t b = 0;
  switch (f) {
    case ActFormat::kF32: b = 4 * static_cast<uint64_t>(k); break;
    case ActFormat::kA8_32: b = static_cast<uint64_t>(k) + 8 * static_cast<uint64_t>(k / 32); break;
    case ActFormat::kA8_256:
      b = static_cast<uint64_t>(k) + 4 * static_cast<uint64_t>(k / 256) + 4 * static_cast<uint64_t>(k / 16);
      break;
  }
  return (b + 63) / 64 * 64;
}

void quantize_act_ref(ActFormat f, const float* x, int64_t k, uint8_t* out) {
  if (k % act_block_elems(f) != 0)
    fail("activation row of %lld elements is not a block multiple", static_cast<long long>(k));
  ActRows v{f, out, act_row_stride(f, k), k};
  switch (f) {
    case ActFormat::kF32: std::memcpy(out, x, 4 * static_cast<size_t>(k)); return;
    case ActFormat::kA8_32: {
      auto* qs = reinterpret_cast<int8_t*>(out);
      auto* d = const_cast<float*>(v.d(0));
      auto* sums = const_cast<int32_t*>(v.sums(0));
      for (int64_t b = 0; b < k / 32; ++b) {
        quant::BlockQ8_0 blk;
        quant::quantize_ref(DType::Q8_0, x + 32 * b, &blk, 32);
        std::memcpy(qs + 32 * b, blk.qs, 32);
        d[b] = f16_to_f32(blk.d);
        int32_t s = 0;
        for (int e = 0; e < 32; ++e) s += blk.qs[e];
        sums[b] = s;
      }
      return;
    }
    case ActFormat::kA8_256: {
      auto* qs = reinterpret_cast<int8_t*>(out);
      auto* d = const_cast<float*>(v.d(0));
      auto* sums = const_cast<int32_t*>(v.sums(0));
      for (int64_t b = 0; b < k / 256; ++b) {
        quant::BlockQ8_K blk;
        quant::quantize_row_q8_k_ref(x + 256 * b, &blk, 256);
        std::memcpy(qs + 256 * b, blk.qs, 256);
        d[b] = blk.d;
        for (int g = 0; g < 16; ++g) sums[16 * b + g] = blk.bsums[g];
      }
      return;
    }
  }
}

}  // namespace sluice::kernels
