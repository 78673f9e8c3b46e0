#include "kernels/paged_attention.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/cpu_kernels.h"
#include "threading/thread_pool.h"

namespace sluice::kernels {

// One run()'s arguments and the shapes derived from them.
struct PagedAttention::Call {
  const PagedLayer& l;
  std::span<const PagedToken> toks;
  const float* q;
  int64_t q_stride;
  float* out;
  int64_t out_stride;
  int64_t G, hd, Hkv, pairs;

  // Key range [lo(pr), hi(pr)] of (token, KV head) pair pr.
  int64_t hi(int64_t pr) const {
    const PagedToken& t = toks[static_cast<size_t>(pr / Hkv)];
    return std::max(t.pos, t.last);
  }
  int64_t lo(int64_t pr) const {
    const int64_t pos = toks[static_cast<size_t>(pr / Hkv)].pos;
    return l.window > 0 ? std::max<int64_t>(0, pos - l.window + 1) : 0;
  }
};

void PagedAttention::reserve(int nth, int64_t visible, int gs, int hd) {
  if (scratch_.size() < static_cast<size_t>(attn_scratch_floats() * nth))
    scratch_.resize(static_cast<size_t>(attn_scratch_floats() * nth));
  if (nth == 1) return;
  // Up to nth − 1 pairs take the chunked path; a key range spans at most visible/kAttnChunk + 2 chunks.
  const int64_t need = (visible / kAttnChunk + 2) * attn_state_floats(gs, hd) * (nth - 1);
  if (states_.size() < static_cast<size_t>(need)) states_.resize(static_cast<size_t>(need));
  if (first_.size() < static_cast<size_t>(nth)) first_.resize(static_cast<size_t>(nth));
  if (bounds_.size() < static_cast<size_t>(nth + 1)) bounds_.resize(static_cast<size_t>(nth + 1));
  split_.reserve(nth);
}

// Arguments for token t, KV head hk, query heads [g0, g0 + gs) of it.
AttnArgs PagedAttention::args(const Call& c, int64_t t, int64_t hk, int64_t g0, int64_t gs, int ith) {
  const PagedLayer& l = c.l;
  AttnArgs a;
  a.q = c.q + t * c.q_stride + (hk * c.G + g0) * c.hd;
  a.out = c.out + t * c.out_stride + (hk * c.G + g0) * c.hd;
  a.gs = static_cast<int>(gs);
  a.hd = static_cast<int>(c.hd);
  a.scale = l.scale;
  a.base = l.base;
  a.block_stride = l.block_stride;
  a.k_off = l.k_off + static_cast<uint64_t>(hk * c.hd) * l.elem_bytes;
  a.v_off = l.v_off + static_cast<uint64_t>(hk * c.hd) * l.elem_bytes;
  a.slot_stride = l.slot_stride;
  a.table = c.toks[static_cast<size_t>(t)].table;
  a.block_tokens = l.block_tokens;
  a.elem = l.elem;
  a.lo = c.lo(t * c.Hkv + hk);
  a.hi = c.hi(t * c.Hkv + hk);
  a.scratch = &scratch_[static_cast<size_t>(ith) * attn_scratch_floats()];
  return a;
}

void PagedAttention::run(ThreadPool& pool, const CpuKernels& isa, const PagedLayer& l, std::span<const PagedToken> toks,
                         const float* q, int64_t q_stride, float* out, int64_t out_stride) {
  const int nth = pool.size();
  const int64_t Hkv = l.n_head_kv;
  const Call c{l,          toks,           q,          q_stride, out,
               out_stride, l.n_head / Hkv, l.head_dim, Hkv,      static_cast<int64_t>(toks.size()) * Hkv};
  if (scratch_.size() < static_cast<size_t>(attn_scratch_floats() * nth))
    fail("internal: attention scratch not reserved");
  const int64_t units = nth > 1 && c.pairs < nth ? number_chunks(c) : 0;
  if (units < 2 * nth) {
    run_items(pool, isa, c);
  } else {
    run_chunks(pool, isa, c, units);
  }
}

// One item per (token, KV head, some of its query heads): all of them when there are enough
// pairs, else fewer so every thread has work.
void PagedAttention::run_items(ThreadPool& pool, const CpuKernels& isa, const Call& c) {
  const int nth = pool.size();
  int64_t per = std::min<int64_t>(c.G, kAttnMaxGroup);
  while (per > 1 && c.pairs * ((c.G + per - 1) / per) < nth) per = (per + 1) / 2;
  const int64_t splits = (c.G + per - 1) / per;
  const int64_t items = c.pairs * splits;
  const AttnKernel attn = cpu_attention(isa);
  auto item = [&](int64_t it, int ith) {
    const int64_t g0 = (it % splits) * per;
    attn(args(c, it / (c.Hkv * splits), (it / splits) % c.Hkv, g0, std::min(per, c.G - g0), ith));
  };
  if (nth == 1) {
    for (int64_t it = 0; it < items; ++it) item(it, 0);
    return;
  }
  split_.reset(items, nth);
  pool.run([&](int ith, int) {
    int64_t it;
    while (split_.next(ith, &it)) item(it, ith);
  });
}

int64_t PagedAttention::number_chunks(const Call& c) {
  if (first_.size() < static_cast<size_t>(c.pairs + 1)) fail("internal: attention states not reserved");
  first_[0] = 0;
  for (int64_t pr = 0; pr < c.pairs; ++pr) first_[pr + 1] = first_[pr] + attn_chunks(c.lo(pr), c.hi(pr));
  return first_[c.pairs];
}

// A window's first and last chunks are partial, so equal counts of chunks per thread can leave
// one a chunk short, which then takes its partner's last chunk cold: cut by keys instead, each
// cut at the chunk boundary nearest to an equal share.
void PagedAttention::cut_by_keys(const Call& c, int64_t units, int nth) {
  // Keys of unit u (chunk u − first_[pr] of its pair pr).
  auto unit_keys = [&](int64_t u) {
    const int64_t pr = std::upper_bound(first_.begin(), first_.begin() + c.pairs + 1, u) - first_.begin() - 1;
    const int64_t lo = c.lo(pr), hi = c.hi(pr);
    const int64_t c0 = (lo / kAttnChunk + u - first_[pr]) * kAttnChunk;
    return std::min(c0 + kAttnChunk - 1, hi) - std::max(c0, lo) + 1;
  };
  int64_t keys = 0;
  for (int64_t pr = 0; pr < c.pairs; ++pr) keys += c.hi(pr) - c.lo(pr) + 1;
  bounds_[0] = 0;
  int64_t cut = 0, before = 0;  // keys in units [0, cut)
  for (int i = 1; i < nth; ++i) {
    const int64_t target = keys * i / nth;
    while (cut < units) {
      const int64_t k = unit_keys(cut);
      if (before + k > target && target - before <= before + k - target) break;  // nearer to cut here
      before += k;
      ++cut;
    }
    bounds_[i] = cut;
  }
  bounds_[nth] = units;
}

// The chunk states of every pair, spread over the threads, then merged per query head.
void PagedAttention::run_chunks(ThreadPool& pool, const CpuKernels& isa, const Call& c, int64_t units) {
  const int64_t sf = attn_state_floats(static_cast<int>(c.G), static_cast<int>(c.hd));
  if (static_cast<size_t>(units * sf) > states_.size()) fail("internal: attention states not reserved");
  const AttnChunksKernel chunks = cpu_attention_chunks(isa);
  const AttnMergeKernel merge = cpu_attention_merge(isa);
  const int nth = pool.size();
  cut_by_keys(c, units, nth);
  split_.reset(bounds_.data(), nth);
  pool.run([&](int ith, int n) {
    // Units (chunks) of this thread's run in order, then others' from their backs.
    int64_t u, prev = -2;
    while (split_.next(ith, &u)) {
      const int64_t pr = std::upper_bound(first_.begin(), first_.begin() + c.pairs + 1, u) - first_.begin() - 1;
      AttnArgs a = args(c, pr / c.Hkv, pr % c.Hkv, 0, c.G, ith);
      a.cold = u != prev + 1 || u == first_[pr];  // else the previous chunk prefetched it
      chunks(a, u - first_[pr], u + 1 - first_[pr], &states_[u * sf]);
      prev = u;
    }
    pool.barrier();
    int64_t h0, h1;
    split_range(c.pairs * c.G, ith, n, &h0, &h1);
    for (int64_t h = h0; h < h1;) {
      const int64_t pr = h / c.G, g0 = h % c.G, g1 = std::min<int64_t>(c.G, g0 + (h1 - h));
      merge(&states_[first_[pr] * sf], first_[pr + 1] - first_[pr], static_cast<int>(c.G), static_cast<int>(c.hd),
            static_cast<int>(g0), static_cast<int>(g1),
            c.out + (pr / c.Hkv) * c.out_stride + (pr % c.Hkv) * c.G * c.hd);
      h += g1 - g0;
    }
  });
}

}  // namespace sluice::kernels
