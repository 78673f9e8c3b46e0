// Scalar reference of the paged attention kernel (attention.h). Built with -ffp-contract=off.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/attention_loops.h"
#include "kernels/rowops.h"

namespace sluice::kernels {

namespace {

void load_row(KvElem e, const uint8_t* p, float* out, int hd) {
  switch (e) {
    case KvElem::kF32: std::memcpy(out, p, 4 * static_cast<size_t>(hd)); break;
    case KvElem::kF16:
      for (int i = 0; i < hd; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    case KvElem::kBF16:
      for (int i = 0; i < hd; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      break;
  }
}

}  // namespace

namespace {

// Chunk c's state: scores → probabilities (m_c, l_c) and o_c = Σ p·v (attention.h).
void chunk_state(const AttnArgs& a, int64_t c, float* mc, float* lc, float* oc) {
  const int gs = a.gs, hd = a.hd;
  float* s = a.scratch;                         // [gs × kAttnChunk] scores, then probabilities
  float* row = s + kAttnMaxGroup * kAttnChunk;  // [hd] one K or V row
  const int64_t c0 = (a.lo / kAttnChunk + c) * kAttnChunk;
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
  for (int g = 0; g < gs; ++g) {
    float* sg = s + g * kAttnChunk;
    mc[g] = *std::max_element(sg, sg + n);
    for (int j = 0; j < n; ++j) sg[j] = exp_ref(sg[j] - mc[g]);
    lc[g] = sum16_ref(sg, n);
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
}

// Merges chunk state (mc, lc, o) of one head into (m, l, out).
void merge_one(float& m, float& l, float* out, float mc, float lc, const float* o, int hd) {
  const float mn = std::max(m, mc);
  const float ea = exp_ref(m - mn), eb = exp_ref(mc - mn);
  l = l * ea + lc * eb;
  for (int i = 0; i < hd; ++i) out[i] = std::fma(o[i], eb, out[i] * ea);
  m = mn;
}

void finish(float l, float* out, int hd) {
  const float inv = 1.0f / l;
  for (int i = 0; i < hd; ++i) out[i] = out[i] * inv;
}

}  // namespace

void attention_ref(const AttnArgs& a) {
  auto chunk = [&](int64_t c, bool, float* mc, float* lc, float* oc) { chunk_state(a, c, mc, lc, oc); };
  attention_loop(a, a.scratch + kAttnMaxGroup * kAttnChunk + kAttnMaxHeadDim, chunk, merge_one, finish);
}

void attention_chunks_ref(const AttnArgs& a, int64_t c_begin, int64_t c_end, float* states) {
  auto chunk = [&](int64_t c, bool, float* mc, float* lc, float* oc) { chunk_state(a, c, mc, lc, oc); };
  attention_chunks_loop(a, c_begin, c_end, states, chunk);
}

void attention_merge_ref(const float* states, int64_t n, int gs, int hd, int g0, int g1, float* out) {
  attention_merge_loop(states, n, gs, hd, g0, g1, out, merge_one, finish);
}

}  // namespace sluice::kernels
