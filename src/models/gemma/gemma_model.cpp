// Gemma forward pass over a batch of sequence slices (gemma4.md §2, gemma3.md §2).
// Shapes: T = tokens in the step, d = n_embd, H/Hkv = query/KV heads, hd = head dim,
// P = PLE width, L = layers, ff = FFN width. Activations are f32, row-major [T × width].
//
// Weights are repacked at load (kernels/linear.h) and fused: q|k|v of KV-owning layers and
// gate|up are single matmuls. Every op's result for a token depends only on that token's
// inputs, in a fixed operation order, so logits are bitwise identical alone or in any batch,
// for any thread count and on every ISA set. Step buffers only grow: a steady-state decode
// step allocates nothing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/mmap_file.h"
#include "kernels/attention.h"
#include "kernels/cpu_kernels.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "models/gemma/gemma_model.h"
#include "quant/quant.h"
#include "threading/thread_pool.h"

namespace sluice::models {

namespace {

using kernels::Linear;

// The fused matmuls of one layer.
struct LayerOps {
  Linear qkv;       // [q | k | v] (KV-owning layers) or q alone
  Linear o, gate_up, down, inp_gate, proj;
};

// One distinct RoPE configuration (layers share them): inv[i] = scale·base^(−2i/n_rot)/ff[i].
struct RopeConfig {
  float base = 0, scale = 0;
  int32_t n_rot = 0;
  bool factors = false;
  std::vector<double> inv;
  int64_t offset = 0;   // floats before this config's table in a token's row of rope_cs_
};

// Steps of at most this many tokens have the FFN down's input quantized by gate|up (ffn()).
constexpr int64_t kPrequantizeMaxRows = 8;

template <class T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

class GemmaModel final : public Model {
 public:
  GemmaModel(ModelSpec spec, GemmaWeights w, ThreadPool& pool, const kernels::CpuKernels& isa, LmHeadFormat lm_head);

  const ModelSpec& spec() const override { return spec_; }
  void forward(const ForwardBatch& batch, KvCache& kv, float* logits) override;
  void set_profile(StepProfile* p) override { profile_ = p; }
  std::vector<std::string> describe_weights() const override;

 private:
  struct TokenRef { int32_t seq; int32_t pos; };

  void check_batch(const ForwardBatch& b, const KvCache& kv) const;
  void embed();
  void per_layer_inputs();
  void rope_tables();
  void attention(int il, const ForwardBatch& b, KvCache& kv);
  void ffn(int il);
  void ple_block(int il);
  void end_layer(int il, const std::vector<float>& post_norm);
  void keep_only_output_rows();
  void store_kv(KvCache& kv, const LayerSpec& ls, BlockId blk, int32_t slot, const float* k, const float* v, int64_t n);
  Linear build_lm_head(LmHeadFormat f);
  void output(float* logits);

  // fn(t) per row, rows split over the threads (inline when small).
  template <class Fn>
  void rows(int64_t T, int64_t cost, Fn&& fn) {
    if (pool_.size() == 1 || T == 1 || T * cost < 8192) {
      for (int64_t t = 0; t < T; ++t) fn(t);
      return;
    }
    pool_.run([&](int ith, int nth) {
      int64_t r0, r1;
      split_range(T, ith, nth, &r0, &r1);
      for (int64_t t = r0; t < r1; ++t) fn(t);
    });
  }

  void matmul(const Linear& l, const float* x, int64_t m, float* y, OpClass c, const kernels::Epilogue* post = nullptr) {
    l.run(pool_, x, m, y, scratch_, &isa_, post);
    account(l, c);
  }
  // A finished call of l, for the profile: its weight bytes and the time since the last mark.
  void account(const Linear& l, OpClass c) {
    if (profile_) profile_->bytes[static_cast<int>(c)] += l.stream_bytes();
    mark(c);
  }
  void mark(OpClass c) {
    if (!profile_) return;
    const auto now = std::chrono::steady_clock::now();
    profile_->seconds[static_cast<int>(c)] += std::chrono::duration<double>(now - last_mark_).count();
    last_mark_ = now;
  }

  ModelSpec spec_;
  GemmaWeights w_;
  ThreadPool& pool_;
  const kernels::CpuKernels& isa_;
  const kernels::RowOps ops_;
  // Every repacked matrix, in the order a step reads them, in huge-page-backed chunks (the
  // Linears below borrow from it, so it is declared first and destroyed last).
  ByteArena arena_;
  std::vector<LayerOps> layer_ops_;
  Linear lm_head_, ple_model_proj_;
  std::vector<RopeConfig> ropes_;
  std::vector<int> layer_rope_;     // config index per layer
  int64_t rope_row_ = 0;            // floats of all configs' tables for one token
  int tail_start_ = 0;              // first layer of the trailing run of layers that own no K/V

  StepProfile* profile_ = nullptr;
  std::chrono::steady_clock::time_point last_mark_;

  // Step state; buffers only grow (sized by the largest step seen).
  int64_t T_ = 0;
  std::vector<int32_t> tok_;
  std::vector<TokenRef> ref_;
  std::vector<int64_t> out_rows_;   // tokens whose logits the batch wants, in slice order
  std::vector<float> x_, xn_, qkv_, o_, att_, act_, ple_, pg_, rope_cs_, ple_row_;
  std::vector<uint8_t> act_q_;   // act_ quantized for the down matrix (kernels::ActRows, kA8_32)
  std::vector<float> attn_scratch_;   // one attn_scratch_floats() area per thread
  void reserve_attention_states(const KvCache& kv);
  std::vector<int64_t> attn_first_;   // decode attention: first chunk state of each (token, KV head)
  std::vector<int64_t> attn_bounds_;  // decode attention: each thread's first run of chunks
  std::vector<float> attn_states_;    // decode attention: chunk states (kernels/attention.h)
  kernels::ActScratch scratch_;
};

GemmaModel::GemmaModel(ModelSpec spec, GemmaWeights w, ThreadPool& pool, const kernels::CpuKernels& isa,
                       LmHeadFormat lm_head)
    : spec_(std::move(spec)), w_(std::move(w)), pool_(pool), isa_(isa), ops_(kernels::merged_ops(isa)) {
  for (int il = 0; il < spec_.n_layer; ++il) {
    const LayerSpec& ls = spec_.layers[il];
    if (ls.head_dim > kernels::kAttnMaxHeadDim || ls.n_head / ls.n_head_kv > kernels::kAttnMaxGroup * 4)
      fail("layer %d: head dim %d / %d query heads per KV head exceed what the attention kernel supports", il,
           ls.head_dim, ls.n_head / ls.n_head_kv);
  }
  // The embedding tables stay in the file map, read a row per token: map their pages now
  // (E2B: 2.2 GB). On our VMs a minor fault costs ~70 µs; a step's PLE-row dequant took
  // 41-242 µs without this and 16-96 µs with it (docs/performance.md §2).
  for (const Mat* t : {&w_.tok_embd, &w_.ple_tok})
    if (!t->empty()) prefault(t->data, static_cast<size_t>(t->rows) * t->row_bytes);
  // Repack and fuse every matrix once (the file's own rows stay mapped for embedding lookups).
  const std::string blk = "blk.";
  for (int il = 0; il < spec_.n_layer; ++il) {
    const GemmaLayerWeights& lw = w_.layers[il];
    const std::string p = blk + std::to_string(il) + ".";
    LayerOps ops;
    if (spec_.layers[il].has_kv) {
      const Mat qkv[3] = {lw.wq, lw.wk, lw.wv};
      ops.qkv = Linear::build(qkv, pool_, p + "attn_qkv", false, &arena_);
    } else {
      ops.qkv = Linear::build({&lw.wq, 1}, pool_, p + "attn_q", false, &arena_);
    }
    ops.o = Linear::build({&lw.wo, 1}, pool_, p + "attn_output", false, &arena_);
    ops.gate_up = Linear::build_glu(lw.gate, lw.up, pool_, p + "ffn_gate_up", &arena_);
    ops.down = Linear::build({&lw.down, 1}, pool_, p + "ffn_down", false, &arena_);
    if (spec_.ple_dim > 0) {
      ops.inp_gate = Linear::build({&lw.inp_gate, 1}, pool_, p + "inp_gate", false, &arena_);
      ops.proj = Linear::build({&lw.proj, 1}, pool_, p + "proj", false, &arena_);
    }
    layer_ops_.push_back(std::move(ops));
  }
  lm_head_ = build_lm_head(lm_head);
  if (spec_.ple_dim > 0) ple_model_proj_ = Linear::build({&w_.ple_model_proj, 1}, pool_, "per_layer_model_proj", false, &arena_);

  // RoPE configurations and their inverse frequencies.
  for (const LayerSpec& ls : spec_.layers) {
    size_t c = 0;
    while (c < ropes_.size() && !(ropes_[c].base == ls.rope_base && ropes_[c].scale == ls.rope_scale &&
                                  ropes_[c].n_rot == ls.n_rot && ropes_[c].factors == ls.rope_freq_factors))
      ++c;
    if (c == ropes_.size()) {
      RopeConfig rc;
      rc.base = ls.rope_base;
      rc.scale = ls.rope_scale;
      rc.n_rot = ls.n_rot;
      rc.factors = ls.rope_freq_factors;
      rc.offset = rope_row_;
      for (int64_t i = 0; i < ls.n_rot / 2; ++i) {
        double v = static_cast<double>(ls.rope_scale) * std::pow(static_cast<double>(ls.rope_base), -2.0 * i / ls.n_rot);
        if (ls.rope_freq_factors) v /= w_.rope_freqs[i];
        rc.inv.push_back(v);
      }
      rope_row_ += ls.n_rot;
      ropes_.push_back(std::move(rc));
    }
    layer_rope_.push_back(static_cast<int>(c));
  }
  tail_start_ = spec_.n_layer;
  while (tail_start_ > 0 && !spec_.layers[tail_start_ - 1].has_kv) --tail_start_;
  attn_scratch_.resize(static_cast<size_t>(kernels::attn_scratch_floats() * pool_.size()));
}

Linear GemmaModel::build_lm_head(LmHeadFormat f) {
  const Mat& m = w_.lm_head;
  if (f == LmHeadFormat::kPacked || (f == LmHeadFormat::kQ4_0 && m.type == DType::Q4_0))
    return Linear::build({&m, 1}, pool_, "lm_head", false, &arena_);
  if (f == LmHeadFormat::kInt8) return Linear::build({&m, 1}, pool_, "lm_head", /*wide_q6_k=*/true, &arena_);
  // Q4_0: every row decoded and requantized (ggml's reference quantizer), then packed.
  if (m.cols % 32 != 0) fail("--lm-head q4_0: rows of %lld columns are not a multiple of 32", static_cast<long long>(m.cols));
  const uint64_t rb = dtype_row_bytes(DType::Q4_0, static_cast<uint64_t>(m.cols));
  std::vector<uint8_t> q(rb * static_cast<uint64_t>(m.rows));
  const auto to_f32 = quant::traits(m.type)->to_f32_ref;
  std::vector<float> rows(static_cast<size_t>(m.cols) * pool_.size());
  pool_.run([&](int ith, int nth) {
    int64_t r0, r1;
    split_range(m.rows, ith, nth, &r0, &r1);
    float* row = rows.data() + static_cast<size_t>(ith) * m.cols;
    for (int64_t r = r0; r < r1; ++r) {
      to_f32(m.row(r), row, m.cols);
      quant::quantize_ref(DType::Q4_0, row, q.data() + static_cast<uint64_t>(r) * rb, m.cols);
    }
  });
  const Mat mq{"lm_head (q4_0 requantized)", DType::Q4_0, q.data(), m.cols, m.rows, rb};
  return Linear::build({&mq, 1}, pool_, "lm_head", false, &arena_);
}

std::vector<std::string> GemmaModel::describe_weights() const {
  std::vector<std::string> out;
  for (const LayerOps& l : layer_ops_)
    for (const Linear* m : {&l.qkv, &l.o, &l.gate_up, &l.down, &l.inp_gate, &l.proj})
      if (!m->empty()) out.push_back(m->describe());
  if (!ple_model_proj_.empty()) out.push_back(ple_model_proj_.describe());
  out.push_back(lm_head_.describe());
  return out;
}

void GemmaModel::check_batch(const ForwardBatch& b, const KvCache& kv) const {
  if (kv.n_groups() != static_cast<int32_t>(spec_.kv_groups.size()))
    fail("KV cache has %d layer groups, the model needs %zu", kv.n_groups(), spec_.kv_groups.size());
  const int32_t bt = kv.block_tokens();
  for (const SeqSlice& s : b.seqs) {
    for (int32_t t : s.tokens)
      if (t < 0 || t >= spec_.n_vocab) fail("token id %d is outside the vocabulary (%d)", t, spec_.n_vocab);
    const int64_t end = static_cast<int64_t>(s.pos0) + static_cast<int64_t>(s.tokens.size());
    if (s.pos0 < 0) fail("negative position %d", s.pos0);
    for (int32_t g = 0; g < kv.n_groups(); ++g) {
      if (static_cast<int64_t>(s.block_tables[g].size()) * bt < end)
        fail("block table of KV group %d covers %zu positions, the step needs %lld", g,
             s.block_tables[g].size() * bt, static_cast<long long>(end));
      // Every position a query of this step can see must be backed by a block.
      const int32_t w = kv.group(g).window;
      const int64_t lo = w > 0 ? std::max<int64_t>(0, s.pos0 - w + 1) : 0;
      for (int64_t blk = lo / bt; blk * bt < end; ++blk)
        if (s.block_tables[g][blk] == kNoBlock)
          fail("KV group %d: block %lld is released but still visible", g, static_cast<long long>(blk));
    }
  }
}

// Decode attention keeps the chunk states of up to nth − 1 (token, KV head) pairs; sized once
// for the longest key range the cache can hold, so decode steps never allocate.
void GemmaModel::reserve_attention_states(const KvCache& kv) {
  if (pool_.size() == 1) return;
  int64_t need = 0;
  for (const LayerSpec& ls : spec_.layers) {
    const int64_t cap = static_cast<int64_t>(kv.pool(ls.kv_group).n_total()) * kv.block_tokens();
    const int64_t visible = ls.window > 0 ? std::min<int64_t>(ls.window, cap) : cap;
    const int64_t chunks = visible / kernels::kAttnChunk + 2;
    need = std::max(need, chunks * kernels::attn_state_floats(ls.n_head / ls.n_head_kv, ls.head_dim));
  }
  grow(attn_states_, static_cast<size_t>(need * (pool_.size() - 1)));
  grow(attn_first_, static_cast<size_t>(pool_.size()));
  grow(attn_bounds_, static_cast<size_t>(pool_.size() + 1));
}

void GemmaModel::forward(const ForwardBatch& b, KvCache& kv, float* logits) {
  check_batch(b, kv);
  reserve_attention_states(kv);
  T_ = b.n_tokens();
  if (T_ == 0) return;
  ThreadPool::StepScope hot(pool_);
  if (profile_) {
    last_mark_ = std::chrono::steady_clock::now();
    ++profile_->steps;
  }
  tok_.clear();
  ref_.clear();
  out_rows_.clear();
  for (int32_t s = 0; s < static_cast<int32_t>(b.seqs.size()); ++s) {
    const SeqSlice& sl = b.seqs[s];
    const int64_t n = static_cast<int64_t>(sl.tokens.size());
    const int64_t first = sl.logits == LogitsWanted::kAll ? 0 : sl.logits == LogitsWanted::kLast ? n - 1 : n;
    for (int64_t i = 0; i < n; ++i) {
      if (i >= first) out_rows_.push_back(static_cast<int64_t>(tok_.size()));
      tok_.push_back(sl.tokens[i]);
      ref_.push_back({s, sl.pos0 + static_cast<int32_t>(i)});
    }
  }
  embed();
  if (spec_.ple_dim > 0) per_layer_inputs();
  rope_tables();
  mark(OpClass::kOther);
  for (int il = 0; il < spec_.n_layer; ++il) {
    // Layers from tail_start_ on write no K/V: only tokens whose logits are wanted matter.
    if (il == tail_start_ && static_cast<int64_t>(out_rows_.size()) < T_) keep_only_output_rows();
    if (T_ == 0) break;
    attention(il, b, kv);
    ffn(il);
    if (spec_.ple_dim > 0) ple_block(il);
    if (profile_) profile_->layer_tokens += T_;
    mark(OpClass::kOther);
  }
  if (T_ > 0) output(logits);
}

// x[T × d] = token_embd[t] · embed_scale
void GemmaModel::embed() {
  const int64_t d = spec_.n_embd;
  grow(x_, static_cast<size_t>(T_ * d));
  rows(T_, d, [&](int64_t t) {
    float* row = x_.data() + t * d;
    kernels::dequant_row(w_.tok_embd, tok_[t], row);
    ops_.scale(row, d, spec_.embed_scale);
  });
}

// PLE (gemma4.md §2.3): ple[T × L·P] = (RMSNorm_P(Wpm·x0 / √d) + Tpl[t]·√P) / √2
void GemmaModel::per_layer_inputs() {
  const int64_t d = spec_.n_embd, P = spec_.ple_dim, LP = static_cast<int64_t>(spec_.n_layer) * P;
  grow(ple_, static_cast<size_t>(T_ * LP));
  ple_model_proj_.run(pool_, x_.data(), T_, ple_.data(), scratch_, &isa_);
  if (profile_) profile_->bytes[static_cast<int>(OpClass::kOther)] += ple_model_proj_.stream_bytes();
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float tok_scale = std::sqrt(static_cast<float>(P));
  const float combine = 1.0f / std::sqrt(2.0f);
  grow(ple_row_, static_cast<size_t>(LP * pool_.size()));
  auto one = [&](int64_t t, float* tok_row) {
    kernels::dequant_row(w_.ple_tok, tok_[t], tok_row);
    float* row = ple_.data() + t * LP;
    for (int64_t l = 0; l < spec_.n_layer; ++l) {
      float* sl = row + l * P;
      for (int64_t i = 0; i < P; ++i) sl[i] *= proj_scale;
      ops_.rms_norm(sl, w_.ple_proj_norm.data(), sl, P, spec_.eps);
      for (int64_t i = 0; i < P; ++i) sl[i] = (sl[i] + tok_row[l * P + i] * tok_scale) * combine;
    }
  };
  if (T_ == 1 || pool_.size() == 1) {
    for (int64_t t = 0; t < T_; ++t) one(t, ple_row_.data());
    return;
  }
  pool_.run([&](int ith, int nth) {
    int64_t r0, r1;
    split_range(T_, ith, nth, &r0, &r1);
    for (int64_t t = r0; t < r1; ++t) one(t, ple_row_.data() + ith * LP);
  });
}

// cos/sin of every RoPE configuration for every token: rope_cs_[t][config] = cos[half] | sin[half].
void GemmaModel::rope_tables() {
  grow(rope_cs_, static_cast<size_t>(T_ * rope_row_));
  rows(T_, rope_row_ * 8, [&](int64_t t) {
    const double pos = ref_[t].pos;
    for (const RopeConfig& rc : ropes_) {
      float* cs = rope_cs_.data() + t * rope_row_ + rc.offset;
      const int64_t half = rc.n_rot / 2;
      for (int64_t i = 0; i < half; ++i) {
        const double theta = pos * rc.inv[i];
        cs[i] = static_cast<float>(std::cos(theta));
        cs[half + i] = static_cast<float>(std::sin(theta));
      }
    }
  });
}

void GemmaModel::attention(int il, const ForwardBatch& b, KvCache& kv) {
  const LayerSpec& ls = spec_.layers[il];
  const GemmaLayerWeights& lw = w_.layers[il];
  const LayerOps& lo = layer_ops_[il];
  const int64_t d = spec_.n_embd, hd = ls.head_dim, H = ls.n_head, Hkv = ls.n_head_kv;
  const int64_t qw = H * hd, kvw = Hkv * hd, stride = lo.qkv.rows();
  const int32_t bt = kv.block_tokens();
  const int64_t rope_off = ropes_[layer_rope_[il]].offset;

  grow(xn_, static_cast<size_t>(T_ * d));
  if (il == 0 || il == tail_start_) {
    // Other layers get their input norm from the previous layer's last residual op.
    rows(T_, d, [&](int64_t t) { ops_.rms_norm(&x_[t * d], lw.attn_norm.data(), &xn_[t * d], d, spec_.eps); });
  }
  grow(qkv_, static_cast<size_t>(T_ * stride));
  matmul(lo.qkv, xn_.data(), T_, qkv_.data(), OpClass::kAttnQkv);

  // Per token: q-norm + RoPE on every query head; for KV-owning layers k-norm + RoPE,
  // V-norm, and the K/V rows stored in the cache.
  const int64_t heads = ls.has_kv ? H + Hkv : H;
  rows(T_, heads * hd * 4, [&](int64_t t) {
    float* row = &qkv_[t * stride];
    const float* cs = &rope_cs_[t * rope_row_ + rope_off];
    for (int64_t h = 0; h < H; ++h) {
      ops_.rms_norm(row + h * hd, lw.q_norm.data(), row + h * hd, hd, spec_.eps);
      ops_.rope(row + h * hd, cs, ls.n_rot);
    }
    if (!ls.has_kv) return;
    for (int64_t h = 0; h < Hkv; ++h) {
      float* kh = row + qw + h * hd;
      float* vh = row + qw + kvw + h * hd;
      ops_.rms_norm(kh, lw.k_norm.data(), kh, hd, spec_.eps);
      ops_.rope(kh, cs, ls.n_rot);
      if (ls.v_norm) ops_.rms_norm(vh, nullptr, vh, hd, spec_.eps);
    }
    const int32_t pos = ref_[t].pos;
    const BlockId blk = b.seqs[ref_[t].seq].block_tables[ls.kv_group][pos / bt];
    store_kv(kv, ls, blk, pos % bt, row + qw, row + qw + kvw, kvw);
  });
  mark(OpClass::kOther);

  // o[t, h] = Σ_j softmax_j(scale · q[t,h]·K[j]) · V[j] over the visible keys j of t, each
  // K/V row read once for all query heads of its KV head. With many (token, KV head) pairs
  // each is one work item; with few (decode), every pair's keys are cut into chunks spread
  // over the threads, whose states are then merged in order — bit-identical either way
  // (kernels/attention.h), and each K/V byte is read from memory once per step.
  grow(o_, static_cast<size_t>(T_ * qw));
  const int64_t G = H / Hkv;
  const KvCache::Layout lay = kv.layout(ls.kv_group);
  const auto elem = kv.type() == KvType::F32 ? kernels::KvElem::kF32
                    : kv.type() == KvType::F16 ? kernels::KvElem::kF16 : kernels::KvElem::kBF16;
  const uint64_t es = kv_type_size(kv.type());
  const int32_t win = ls.window;
  // Arguments for token t, KV head hk, query heads [g0, g0 + gs) of it.
  // The first key position a query at position p sees (its window's start on sliding layers).
  auto first_key = [&](int64_t p) { return win > 0 ? std::max<int64_t>(0, p - win + 1) : 0; };
  auto args = [&](int64_t t, int64_t hk, int64_t g0, int64_t gs, int ith) {
    const SeqSlice& s = b.seqs[ref_[t].seq];
    const int64_t p = ref_[t].pos;
    kernels::AttnArgs a;
    a.q = &qkv_[t * stride + (hk * G + g0) * hd];
    a.out = &o_[t * qw + (hk * G + g0) * hd];
    a.gs = static_cast<int>(gs);
    a.hd = static_cast<int>(hd);
    a.scale = ls.attn_scale;
    a.base = lay.base;
    a.block_stride = lay.block_stride;
    a.k_off = static_cast<uint64_t>(ls.kv_index) * lay.layer_stride + static_cast<uint64_t>(hk * hd) * es;
    a.v_off = a.k_off + lay.kv_stride;
    a.slot_stride = lay.slot_stride;
    a.table = s.block_tables[ls.kv_group].data();
    a.block_tokens = bt;
    a.elem = elem;
    a.lo = first_key(p);
    a.hi = p;
    a.scratch = &attn_scratch_[static_cast<size_t>(ith) * kernels::attn_scratch_floats()];
    return a;
  };
  const int nth = pool_.size();
  const int64_t pairs = T_ * Hkv;
  // Key range [pair_lo, pair_hi] of (token, KV head) pair pr.
  auto pair_hi = [&](int64_t pr) { return static_cast<int64_t>(ref_[pr / Hkv].pos); };
  auto pair_lo = [&](int64_t pr) { return first_key(pair_hi(pr)); };
  // Keys of unit u (chunk u − attn_first_[pr] of its pair pr).
  auto unit_keys = [&](int64_t u) {
    const int64_t pr = std::upper_bound(attn_first_.begin(), attn_first_.begin() + pairs + 1, u) - attn_first_.begin() - 1;
    const int64_t first = pair_lo(pr), last = pair_hi(pr);
    const int64_t c0 = (first / kernels::kAttnChunk + u - attn_first_[pr]) * kernels::kAttnChunk;
    return std::min(c0 + kernels::kAttnChunk - 1, last) - std::max(c0, first) + 1;
  };
  // Chunks per pair, laid end to end (only needed for the split below).
  int64_t units = 0;
  if (nth > 1 && pairs < nth) {
    attn_first_[0] = 0;
    for (int64_t pr = 0; pr < pairs; ++pr) attn_first_[pr + 1] = attn_first_[pr] + kernels::attn_chunks(pair_lo(pr), pair_hi(pr));
    units = attn_first_[pairs];
  }
  if (units < 2 * nth) {
    // One item per (token, KV head, some of its query heads): all of them when there are
    // enough pairs, else fewer so every thread has work.
    int64_t per = std::min<int64_t>(G, kernels::kAttnMaxGroup);
    while (per > 1 && pairs * ((G + per - 1) / per) < nth) per = (per + 1) / 2;
    const int64_t splits = (G + per - 1) / per;
    const int64_t items = pairs * splits;
    const kernels::AttnKernel attn = kernels::cpu_attention(isa_);
    auto item = [&](int64_t it, int ith) {
      const int64_t sp = it % splits, g0 = sp * per;
      attn(args(it / (Hkv * splits), (it / splits) % Hkv, g0, std::min(per, G - g0), ith));
    };
    if (nth == 1) {
      for (int64_t it = 0; it < items; ++it) item(it, 0);
    } else {
      // Later tokens of a prefill see more keys: a static split would leave threads idle.
      WorkSplit& split = scratch_.split();
      split.reset(items, nth);
      pool_.run([&](int ith, int) {
        int64_t it;
        while (split.next(ith, &it)) item(it, ith);
      });
    }
  } else {
    // Few pairs with many keys (decode): the chunk states of every pair, spread over the
    // threads, then merged per query head.
    const int64_t sf = kernels::attn_state_floats(static_cast<int>(G), static_cast<int>(hd));
    if (static_cast<size_t>(units * sf) > attn_states_.size()) fail("internal: attention states not reserved");
    const kernels::AttnChunksKernel chunks = kernels::cpu_attention_chunks(isa_);
    const kernels::AttnMergeKernel merge = kernels::cpu_attention_merge(isa_);
    // Each thread starts with a run of chunks holding about 1/nth of the keys. A window's first
    // and last chunks are partial (at depth 512: 63 + 7×64 + 1 keys); equal counts of chunks
    // (5 + 4) left the second thread a chunk short, and it took its partner's last chunk cold
    // every layer (attention at depth 512, far-apart cores: 1.77-2.03 → 1.66-1.98 ms).
    int64_t keys = 0;
    for (int64_t pr = 0; pr < pairs; ++pr) keys += pair_hi(pr) - pair_lo(pr) + 1;
    attn_bounds_[0] = 0;
    int64_t cut = 0, before = 0;   // keys in units [0, cut)
    for (int i = 1; i < nth; ++i) {
      const int64_t target = keys * i / nth;
      while (cut < units) {
        const int64_t k = unit_keys(cut);
        if (before + k > target && target - before <= before + k - target) break;   // nearer to cut here
        before += k;
        ++cut;
      }
      attn_bounds_[i] = cut;
    }
    attn_bounds_[nth] = units;
    WorkSplit& split = scratch_.split();
    split.reset(attn_bounds_.data(), nth);
    pool_.run([&](int ith, int n) {
      // Units (chunks) of this thread's run in order, then others' from their backs.
      int64_t u, prev = -2;
      while (split.next(ith, &u)) {
        const int64_t pr = std::upper_bound(attn_first_.begin(), attn_first_.begin() + pairs + 1, u) - attn_first_.begin() - 1;
        kernels::AttnArgs a = args(pr / Hkv, pr % Hkv, 0, G, ith);
        a.cold = u != prev + 1 || u == attn_first_[pr];   // else the previous chunk prefetched it
        chunks(a, u - attn_first_[pr], u + 1 - attn_first_[pr], &attn_states_[u * sf]);
        prev = u;
      }
      pool_.barrier();
      int64_t h0, h1;
      split_range(pairs * G, ith, n, &h0, &h1);
      for (int64_t h = h0; h < h1;) {
        const int64_t pr2 = h / G, g0 = h % G, g1 = std::min<int64_t>(G, g0 + (h1 - h));
        merge(&attn_states_[attn_first_[pr2] * sf], attn_first_[pr2 + 1] - attn_first_[pr2], static_cast<int>(G),
              static_cast<int>(hd), static_cast<int>(g0), static_cast<int>(g1), &o_[(pr2 / Hkv) * qw + (pr2 % Hkv) * G * hd]);
        h += g1 - g0;
      }
    });
  }
  mark(OpClass::kAttention);

  grow(att_, static_cast<size_t>(T_ * d));
  matmul(lo.o, o_.data(), T_, att_.data(), OpClass::kAttnOutput);
  // x += RMSNorm(att; post_attn_norm); xn = RMSNorm(x; ffn_norm)   (one pass per row)
  rows(T_, d * 2, [&](int64_t t) {
    ops_.add_rms_norm(&x_[t * d], &att_[t * d], lw.post_attn_norm.data(), d, spec_.eps);
    ops_.rms_norm(&x_[t * d], lw.ffn_norm.data(), &xn_[t * d], d, spec_.eps);
  });
  mark(OpClass::kOther);
}

// One position's K and V rows into the cache, converted with the ISA set's row ops.
void GemmaModel::store_kv(KvCache& kv, const LayerSpec& ls, BlockId blk, int32_t slot, const float* k, const float* v,
                          int64_t n) {
  const KvCache::Layout lay = kv.layout(ls.kv_group);
  for (int32_t part = 0; part < 2; ++part) {
    uint8_t* dst = lay.row(ls.kv_index, blk, part, slot);
    const float* src = part == 0 ? k : v;
    switch (kv.type()) {
      case KvType::F32: std::memcpy(dst, src, 4 * static_cast<size_t>(n)); break;
      case KvType::F16: ops_.to_f16(src, reinterpret_cast<uint16_t*>(dst), n); break;
      case KvType::BF16: ops_.to_bf16(src, reinterpret_cast<uint16_t*>(dst), n); break;
    }
  }
}

// x += RMSNorm(Wdown · (gelu_tanh(Wgate·m) ⊙ Wup·m)),  m = xn (ffn_norm applied by attention())
void GemmaModel::ffn(int il) {
  const GemmaLayerWeights& lw = w_.layers[il];
  const LayerOps& lo = layer_ops_[il];
  const int64_t d = spec_.n_embd, ff = spec_.layers[il].n_ff;
  // act = gelu_tanh(gate) ⊙ up, taken inside the fused gate|up matmul (kernels/linear.h).
  grow(act_, static_cast<size_t>(T_ * ff));
  // Decode steps (a few rows): when the down matrix reads 32-blocks, the gate|up call quantizes
  // act for it as it goes (Linear::run_glu), so the down call starts streaming at once instead
  // of each thread first quantizing the whole 6144-12288-wide row. Not in prefill: there a
  // run's act rows no longer fit L1, and prefill measured 1.5-2.3% slower that way
  // (docs/performance.md §2).
  const bool preq = T_ <= kPrequantizeMaxRows && lo.down.quantized_input() == kernels::ActFormat::kA8_32 &&
                    ff % 32 == 0;
  kernels::ActRows q{kernels::ActFormat::kA8_32, nullptr, kernels::act_row_stride(kernels::ActFormat::kA8_32, ff), ff};
  if (preq) {
    grow(act_q_, static_cast<size_t>(T_) * q.stride);
    q.base = act_q_.data();
  }
  lo.gate_up.run_glu(pool_, xn_.data(), T_, act_.data(), scratch_, &isa_, preq ? &q : nullptr);
  account(lo.gate_up, OpClass::kFfnGateUp);
  if (preq) {
    lo.down.run_quantized(pool_, q, T_, att_.data(), scratch_, &isa_);
    account(lo.down, OpClass::kFfnDown);
  } else {
    matmul(lo.down, act_.data(), T_, att_.data(), OpClass::kFfnDown);
  }
  if (spec_.ple_dim > 0) {
    rows(T_, d * 2, [&](int64_t t) { ops_.add_rms_norm(&x_[t * d], &att_[t * d], lw.post_ffw_norm.data(), d, spec_.eps); });
  } else {
    end_layer(il, lw.post_ffw_norm);
  }
  mark(OpClass::kOther);
}

// The residual op that ends layer il, fused per row: x += RMSNorm(att; w); x ·= layer scalar;
// xn = RMSNorm(x; next layer's attn_norm).
void GemmaModel::end_layer(int il, const std::vector<float>& w) {
  const int64_t d = spec_.n_embd;
  const float sc = w_.layers[il].out_scale;
  const float* next_norm = il + 1 < spec_.n_layer ? w_.layers[il + 1].attn_norm.data() : nullptr;
  rows(T_, d * 3, [&](int64_t t) {
    ops_.add_rms_norm(&x_[t * d], &att_[t * d], w.data(), d, spec_.eps);
    if (sc != 1.0f) ops_.scale(&x_[t * d], d, sc);
    if (next_norm) ops_.rms_norm(&x_[t * d], next_norm, &xn_[t * d], d, spec_.eps);
  });
}

// x += RMSNorm(Wproj · (gelu_tanh(Winp_gate · x) ⊙ ple[:, l, :]); post_norm)
void GemmaModel::ple_block(int il) {
  const GemmaLayerWeights& lw = w_.layers[il];
  const LayerOps& lo = layer_ops_[il];
  const int64_t P = spec_.ple_dim, LP = static_cast<int64_t>(spec_.n_layer) * P;
  grow(pg_, static_cast<size_t>(T_ * P));
  lo.inp_gate.run(pool_, x_.data(), T_, pg_.data(), scratch_, &isa_);
  rows(T_, P * 8, [&](int64_t t) { ops_.gelu_mul(&pg_[t * P], &ple_[t * LP + il * P], &pg_[t * P], P); });
  lo.proj.run(pool_, pg_.data(), T_, att_.data(), scratch_, &isa_);
  if (profile_) profile_->bytes[static_cast<int>(OpClass::kOther)] += lo.inp_gate.stream_bytes() + lo.proj.stream_bytes();
  end_layer(il, lw.post_norm);
}

// Drops every token whose logits are not wanted (only layers without K/V remain): their
// residual rows, PLE rows and references move down to rows 0..n-1.
void GemmaModel::keep_only_output_rows() {
  const int64_t d = spec_.n_embd, LP = static_cast<int64_t>(spec_.n_layer) * spec_.ple_dim;
  const int64_t n = static_cast<int64_t>(out_rows_.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = out_rows_[i];
    if (t == i) continue;
    std::copy_n(&x_[t * d], d, &x_[i * d]);
    if (LP > 0) std::copy_n(&ple_[t * LP], LP, &ple_[i * LP]);
    std::copy_n(&rope_cs_[t * rope_row_], rope_row_, &rope_cs_[i * rope_row_]);
    tok_[i] = tok_[t];
    ref_[i] = ref_[t];
    out_rows_[i] = i;
  }
  T_ = n;
}

// logits for the requested rows: softcap(lm_head · RMSNorm(x; output_norm))
void GemmaModel::output(float* logits) {
  const int64_t d = spec_.n_embd;
  const int64_t R = static_cast<int64_t>(out_rows_.size());
  if (R == 0) return;
  grow(xn_, static_cast<size_t>(R * d));
  for (int64_t r = 0; r < R; ++r) ops_.rms_norm(&x_[out_rows_[r] * d], w_.output_norm.data(), &xn_[r * d], d, spec_.eps);
  mark(OpClass::kOther);
  // The softcap rides in the lm_head call (linear.h Epilogue): no second pass over R·V logits.
  const kernels::Epilogue cap{ops_.softcap, spec_.final_softcap};
  matmul(lm_head_, xn_.data(), R, logits, OpClass::kLmHead, spec_.final_softcap > 0 ? &cap : nullptr);
}

}  // namespace

const char* op_class_name(OpClass c) {
  static const char* const kNames[kOpClassCount] = {"ffn_gate_up", "ffn_down", "attn_qkv", "attn_output",
                                                    "lm_head",     "attention", "other"};
  return kNames[static_cast<int>(c)];
}

int64_t ForwardBatch::n_tokens() const {
  int64_t n = 0;
  for (const SeqSlice& s : seqs) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

int64_t ForwardBatch::n_logit_rows() const {
  int64_t n = 0;
  for (const SeqSlice& s : seqs)
    n += s.logits == LogitsWanted::kAll ? static_cast<int64_t>(s.tokens.size())
         : s.logits == LogitsWanted::kLast ? (s.tokens.empty() ? 0 : 1) : 0;
  return n;
}

std::unique_ptr<Model> make_gemma_model(ModelSpec spec, GemmaWeights w, const LoadOptions& opt) {
  const kernels::CpuKernels& isa = opt.isa ? *opt.isa : kernels::cpu_kernels();
  return std::make_unique<GemmaModel>(std::move(spec), std::move(w), *opt.pool, isa, opt.lm_head);
}

LmHeadFormat parse_lm_head_format(const std::string& s) {
  if (s == "packed") return LmHeadFormat::kPacked;
  if (s == "int8") return LmHeadFormat::kInt8;
  if (s == "q4_0") return LmHeadFormat::kQ4_0;
  fail("unknown lm_head format '%s' (expected packed, int8 or q4_0)", s.c_str());
}

}  // namespace sluice::models
