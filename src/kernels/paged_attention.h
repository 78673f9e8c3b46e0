// The paged attention of one layer over a whole step, spread over a ThreadPool: the driver
// for the kernels of attention.h, as Linear is for the matmul kernels.
//
// For every token t and query head h: o[t, h] = Σ_j softmax_j(scale · q[t,h]·K[j]) · V[j] over
// the keys j that t sees (its window's on sliding layers), each K/V row read once for all
// query heads of its KV head. Two ways to split the work, bit-identical (attention.h):
//   * many (token, KV head) pairs (prefill, batched decode): each pair — or part of its query
//     heads, when that gives every thread work — is one item, taken dynamically because later
//     tokens of a prefill see more keys;
//   * fewer pairs than threads with many keys each (decode): every pair's keys are cut into
//     chunks spread over the threads by key count, whose states are then merged in order, so
//     each K/V byte is read from memory once per step.
// Buffers only grow: after reserve() for the longest key range, a step allocates nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "threading/work_split.h"

namespace sluice {
class ThreadPool;
}

namespace sluice::kernels {

struct CpuKernels;

// One layer's attention shape and where its K/V rows live in a paged cache: position p of a
// token's sequence is in block table[p / block_tokens], slot p % block_tokens, its K row of KV
// head hk at base + block·block_stride + k_off + hk·hd·elem_bytes + slot·slot_stride, its V
// row v_off − k_off bytes further.
struct PagedLayer {
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  float scale = 1.0f;
  int32_t window = 0;  // 0: every earlier position; else the last `window` ones
  const uint8_t* base = nullptr;
  uint64_t block_stride = 0, k_off = 0, v_off = 0, slot_stride = 0, elem_bytes = 4;
  int32_t block_tokens = 0;
  KvElem elem = KvElem::kF32;
};

// One query token: its position and its sequence's block table for the layer's cache group.
// With last > pos it also sees the later positions up to `last` (the rest of a bidirectional
// block it is in, e.g. an image on Gemma 4 26B/31B's sliding layers: gemma4.md §9.4); the
// window still counts back from pos.
struct PagedToken {
  const int32_t* table = nullptr;
  int32_t pos = 0;
  int32_t last = -1;
};

class PagedAttention {
 public:
  // Room for decode chunk states of a layer with `visible` keys at most, gs query heads per
  // KV head of hd floats, on nth threads (grows to the largest call; single-threaded: none).
  void reserve(int nth, int64_t visible, int gs, int hd);

  // out[t] (H·hd floats at out + t·out_stride) for each token t of `toks`, from the queries at
  // q + t·q_stride (H·hd floats, head-major).
  void run(ThreadPool& pool, const CpuKernels& isa, const PagedLayer& l, std::span<const PagedToken> toks,
           const float* q, int64_t q_stride, float* out, int64_t out_stride);

 private:
  struct Call;
  AttnArgs args(const Call& c, int64_t t, int64_t hk, int64_t g0, int64_t gs, int ith);
  void run_items(ThreadPool& pool, const CpuKernels& isa, const Call& c);
  void run_chunks(ThreadPool& pool, const CpuKernels& isa, const Call& c, int64_t units);
  // Numbers the chunks of every (token, KV head) pair end to end (first_); returns their count.
  int64_t number_chunks(const Call& c);
  // Each thread's first run of chunks, holding about 1/nth of the keys (bounds_).
  void cut_by_keys(const Call& c, int64_t units, int nth);

  std::vector<float> scratch_;   // one attn_scratch_floats() area per thread
  std::vector<float> states_;    // decode: chunk states (attention.h)
  std::vector<int64_t> first_;   // decode: first chunk of each (token, KV head) pair
  std::vector<int64_t> bounds_;  // decode: each thread's first run of chunks
  WorkSplit split_;
};

}  // namespace sluice::kernels
