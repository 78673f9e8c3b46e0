// The chunk loops of paged attention (attention.h) that the reference and every ISA set share:
// the one-call kernel (chunk states merged in order as they are made), the chunk-state kernel
// and the merge kernel, around an implementation's own chunk-state, merge and finish steps.
// Internal linkage: each translation unit compiles its own copy with its own ISA flags
// (cpu/x86_common.h says why nothing may be shared across them).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/attention.h"

namespace sluice::kernels {
namespace {

// chunk(c, first, mc, lc, oc): chunk c's state (first: the call's first chunk);
// merge(m, l, out, mc, lc, o, hd): one head's running state merged with a chunk's;
// finish(l, out, hd): out ·= 1/l. `oc` holds gs × hd floats of chunk output.
template <class Chunk, class Merge, class Finish>
void attention_loop(const AttnArgs& a, float* oc, Chunk&& chunk, Merge&& merge, Finish&& finish) {
  const int gs = a.gs, hd = a.hd;
  float m[kAttnMaxGroup], l[kAttnMaxGroup], mc[kAttnMaxGroup], lc[kAttnMaxGroup];
  const int64_t nc = attn_chunks(a.lo, a.hi);
  for (int64_t c = 0; c < nc; ++c) {
    chunk(c, c == 0, mc, lc, oc);
    for (int g = 0; g < gs; ++g) {
      float* out = a.out + g * hd;
      if (c == 0) {
        m[g] = mc[g];
        l[g] = lc[g];
        std::memcpy(out, oc + g * hd, 4 * static_cast<size_t>(hd));
      } else {
        merge(m[g], l[g], out, mc[g], lc[g], oc + g * hd, hd);
      }
    }
  }
  for (int g = 0; g < gs; ++g) finish(l[g], a.out + g * hd, hd);
}

template <class Chunk>
void attention_chunks_loop(const AttnArgs& a, int64_t c_begin, int64_t c_end, float* states, Chunk&& chunk) {
  const int64_t sf = attn_state_floats(a.gs, a.hd);
  for (int64_t c = c_begin; c < c_end; ++c) {
    float* st = states + (c - c_begin) * sf;
    chunk(c, c == c_begin, st, st + a.gs, st + 2 * a.gs);
  }
}

template <class Merge, class Finish>
void attention_merge_loop(const float* states, int64_t n, int gs, int hd, int g0, int g1, float* out, Merge&& merge,
                          Finish&& finish) {
  const int64_t sf = attn_state_floats(gs, hd);
  for (int g = g0; g < g1; ++g) {
    float m = states[g], l = states[gs + g];
    float* o = out + g * hd;
    std::memcpy(o, states + 2 * gs + g * hd, 4 * static_cast<size_t>(hd));
    for (int64_t c = 1; c < n; ++c) {
      const float* st = states + c * sf;
      merge(m, l, o, st[g], st[gs + g], st + 2 * gs + g * hd, hd);
    }
    finish(l, o, hd);
  }
}

}  // namespace
}  // namespace sluice::kernels
