// Paged attention for one query token and one KV head: o_h = Σ_j softmax_j(scale·q_h·k_j)·v_j
// for `gs` query heads sharing the KV head (GQA: each K/V row is loaded once for all of
// them), over key positions [lo, hi] read through a block table.
//
// Fixed algorithm (identical on every ISA, independent of batch, thread and prefill chunking):
// keys are taken in chunks of kAttnChunk positions aligned to absolute multiples of it; per
// chunk, scores s_j = scale·dot16(q, k_j) (rowops.h), m_c = max s, p_j = exp(s_j − m_c),
// l_c = sum16(p) (rowops.h: 16 lanes, then the fixed tree), o_c = Σ_j p_j·v_j (fused multiply-adds in key order);
// chunks merge in order: m' = max(m, m_c), a = exp(m − m'), b = exp(m_c − m'), l = l·a + l_c·b, o = fma(o_c, b, o·a);
// finally o ·= 1/l.
//
// The same computation split in two (decode spreads one token's keys over the threads): the
// chunk states (m_c, l_c, o_c) of any chunks, computed independently, then merged in chunk
// order — bit-identical to the one-call kernel, whoever computed which chunk.
#pragma once

#include <cstdint>

namespace sluice::kernels {

inline constexpr int kAttnChunk = 64;
inline constexpr int kAttnMaxHeadDim = 512;
inline constexpr int kAttnMaxGroup = 16;

enum class KvElem : uint8_t { kF32, kF16, kBF16 };

struct AttnArgs {
  const float* q = nullptr;  // [gs × hd]
  float* out = nullptr;      // [gs × hd]
  int gs = 0, hd = 0;
  float scale = 1.0f;
  // KV rows: position p lives in block table[p / block_tokens], slot p % block_tokens, at
  //   base + block·block_stride + {k_off | v_off} + slot·slot_stride (bytes).
  const uint8_t* base = nullptr;
  uint64_t block_stride = 0, k_off = 0, v_off = 0, slot_stride = 0;
  const int32_t* table = nullptr;
  int32_t block_tokens = 0;
  KvElem elem = KvElem::kF32;
  int64_t lo = 0, hi = 0;    // inclusive key range
  float* scratch = nullptr;  // attn_scratch_floats() floats, owned by the calling thread
  // A hint (no effect on results): the first chunk's K/V rows are likely in DRAM, not brought
  // in by a previous call's prefetching. Kernels may load them ahead of the computation.
  bool cold = true;
};

// Floats of per-thread scratch one call needs.
constexpr int64_t attn_scratch_floats() {
  return int64_t{kAttnMaxGroup} * (kAttnChunk + kAttnMaxHeadDim + 4) + kAttnMaxHeadDim;
}

using AttnKernel = void (*)(const AttnArgs& a);

void attention_ref(const AttnArgs& a);

// Chunk c (0-based) of a call covers keys [max(lo, c0), min(c0 + kAttnChunk − 1, hi)] with
// c0 = (lo / kAttnChunk + c)·kAttnChunk; a call has attn_chunks(lo, hi) of them.
inline int64_t attn_chunks(int64_t lo, int64_t hi) { return hi / kAttnChunk - lo / kAttnChunk + 1; }

// One chunk's state: m[gs] | l[gs] | o[gs × hd] (o not yet divided by l).
constexpr int64_t attn_state_floats(int gs, int hd) { return int64_t{gs} * (hd + 2); }

// States of chunks [c_begin, c_end) of the call: chunk c at states + (c − c_begin)·attn_state_floats.
// a.out is not used; a.scratch is.
using AttnChunksKernel = void (*)(const AttnArgs& a, int64_t c_begin, int64_t c_end, float* states);
// out[g] for heads g in [g0, g1) of `n` consecutive chunk states (gs heads of hd each): the
// in-order merge and the final 1/l.
using AttnMergeKernel = void (*)(const float* states, int64_t n, int gs, int hd, int g0, int g1, float* out);

void attention_chunks_ref(const AttnArgs& a, int64_t c_begin, int64_t c_end, float* states);
void attention_merge_ref(const float* states, int64_t n, int gs, int hd, int g0, int g1, float* out);

}  // namespace sluice::kernels
