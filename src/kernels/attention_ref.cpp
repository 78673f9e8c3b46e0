// Scalar reference of the paged attention kernel (attention.h). Built with -ffp-contract=off.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/rowops.h"

namespace sluice::kernels {

namespace {

void load_row(KvElem e, const uint8_t* p, float* out, int hd) {
  switch (e) {
    case KvElem::kF32: std::memcpy(out, p, 4 * static_cast<size_t>(hd)); break;
    case KvElem::kF16:
      for (int i = 0; i < hd; ++i) { uint16_t h; std::memcpy(&h, p + 2 * i, 2); out[i] = f16_to_f32(h); }
      break;
    case KvElem::kBF16:
      for (int i = 0; i < hd; ++i) { uint16_t h; std::memcpy(&h, p + 2 * i, 2); out[i] = bf16_to_f32(h); }
      break;
  }
}

}  // namespace

void attention_ref(const AttnArgs& a) {
  const int gs = a.gs, hd = a.hd;
  float* s = a.scratch;                        // [gs × kAttnChunk] scores, then probabilities
  float* oc = s + kAttnMaxGroup * kAttnChunk;  // [gs × hd] chunk output
  float* m = oc + kAttnMaxGroup * kAttnMaxHeadDim;
  float* l = m + kAttnMaxGroup;
  float* row = l + kAttnMaxGroup;              // [hd] one K or V row
  bool first = true;
  for (int64_t c0 = a.lo / kAttnChunk * kAttnChunk; c0 <= a.hi; c0 += kAttnChunk) {
    const int64_t j0 = std::max(c0, a.lo), j1 = std::min(c0 + kAttnChunk - 1, a.hi);
    const int n = static_cast<int>(j1 - j0 + 1);
    auto at = [&](int64_t pos, uint64_t off) {
      const int32_t blk = a.table[pos / a.block_tokens];
      return a.base + static_cast<uint64_t>(blk) * a.block_stride + off +
             static_cast<uint64_t>(pos % a.block_tokens) * a.slot_stride;
    };
    for (int j = 0; j < n; ++j) {
      load_row(a.elem, at(j0 + j, a.k_off), row, hd);
      for (int g = 0; g < gs; ++g) s[g * kAttnChunk + j] = a.scale * dot16_ref(a.q + g * hd, row, hd);
    }
    float mc[kAttnMaxGroup], lc[kAttnMaxGroup];
    for (int g = 0; g < gs; ++g) {
      float* sg = s + g * kAttnChunk;
      mc[g] = *std::max_element(sg, sg + n);
      lc[g] = 0.0f;
      for (int j = 0; j < n; ++j) {
        sg[j] = exp_ref(sg[j] - mc[g]);
        lc[g] = lc[g] + sg[j];
      }
      std::fill_n(oc + g * hd, hd, 0.0f);
    }
    for (int j = 0; j < n; ++j) {
      load_row(a.elem, at(j0 + j, a.v_off), row, hd);
      for (int g = 0; g < gs; ++g) {
        const float p = s[g * kAttnChunk + j];
        float* o = oc + g * hd;
        for (int i = 0; i < hd; ++i) o[i] = std::fma(p, row[i], o[i]);
      }
    }
    for (int g = 0; g < gs; ++g) {
      float* out = a.out + g * hd;
      const float* o = oc + g * hd;
      if (first) {
        m[g] = mc[g];
        l[g] = lc[g];
        std::memcpy(out, o, 4 * static_cast<size_t>(hd));
        continue;
      }
      const float mn = std::max(m[g], mc[g]);
      const float ea = exp_ref(m[g] - mn), eb = exp_ref(mc[g] - mn);
      l[g] = l[g] * ea + lc[g] * eb;
      for (int i = 0; i < hd; ++i) out[i] = std::fma(o[i], eb, out[i] * ea);
      m[g] = mn;
    }
    first = false;
  }
  for (int g = 0; g < gs; ++g) {
    const float inv = 1.0f / l[g];
    float* out = a.out + g * hd;
    for (int i = 0; i < hd; ++i) out[i] = out[i] * inv;
  }
}

}  // namespace sluice::kernels
