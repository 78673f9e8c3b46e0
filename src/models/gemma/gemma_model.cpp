// Gemma forward pass over a batch of sequence slices (gemma4.md §2, gemma3.md §2): load-time
// weight preparation, the step's setup, embedding, RoPE tables, the layer loop and the output.
// The layer steps are in gemma_attention.cpp, gemma_ffn.cpp and gemma_ple.cpp (gemma_forward.h).
//
// Weights are repacked at load (kernels/linear.h) and fused: q|k|v of KV-owning layers and
// gate|up are single matmuls. Every op's result for a token depends only on that token's
// inputs, in a fixed operation order, so logits are bitwise identical alone or in any batch,
// for any thread count and on every ISA set. Step buffers only grow: a steady-state decode
// step allocates nothing.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/mmap_file.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "models/gemma/gemma_forward.h"
#include "quant/quant.h"

namespace sluice::models {

GemmaModel::GemmaModel(ModelSpec spec, GemmaWeights w, ThreadPool& pool, const kernels::CpuKernels& isa,
                       LmHeadFormat lm_head)
    : spec_(std::move(spec)), w_(std::move(w)), pool_(pool), isa_(isa), ops_(kernels::merged_ops(isa)) {
  for (int il = 0; il < spec_.n_layer; ++il) {
    const LayerSpec& ls = spec_.layers[il];
    if (ls.head_dim > kernels::kAttnMaxHeadDim || ls.n_head / ls.n_head_kv > kernels::kAttnMaxGroup * 4)
      fail("layer %d: head dim %d / %d query heads per KV head exceed what the attention kernel supports", il,
           ls.head_dim, ls.n_head / ls.n_head_kv);
  }
  build_layer_ops();
  // MoE steps run whole experts per thread (gemma_moe.cpp): a lane for each pool thread.
  const bool moe = std::any_of(spec_.layers.begin(), spec_.layers.end(),
                               [](const LayerSpec& l) { return l.n_expert > 0; });
  if (moe && pool_.size() > 1 && pool_.size() <= kMaxExpertLanes)
    for (int i = 0; i < pool_.size(); ++i) lanes_.push_back(std::make_unique<ExpertLane>());
  lm_head_ = build_lm_head(lm_head);
  if (spec_.ple_dim > 0)
    ple_model_proj_ = Linear::build({&w_.ple_model_proj, 1}, pool_, "per_layer_model_proj", false, &arena_, w_.release);
  keep_file_tables();
  w_.release = nullptr;  // the file may go before the model: nothing more is released
  build_rope_configs();
  tail_start_ = spec_.n_layer;
  while (tail_start_ > 0 && !spec_.layers[tail_start_ - 1].has_kv) --tail_start_;
}

// The tables read a row per token from the file (the PLE table; the token embeddings unless
// they come from the packed lm_head): their pages are mapped now, after the repacking dropped
// the pages of everything else, so that a step's row lookups do not pay a page fault each
// (docs/performance.md §2).
void GemmaModel::keep_file_tables() {
  const bool tied = w_.lm_head.data == w_.tok_embd.data;
  embd_packed_ = tied && lm_head_.packed_whole() && lm_head_.packed_whole()->type == w_.tok_embd.type
                     ? lm_head_.packed_whole()
                     : nullptr;
  if (!embd_packed_) prefault(w_.tok_embd.data, static_cast<size_t>(w_.tok_embd.rows) * w_.tok_embd.row_bytes);
  if (!w_.ple_tok.empty()) prefault(w_.ple_tok.data, static_cast<size_t>(w_.ple_tok.rows) * w_.ple_tok.row_bytes);
}

// Repacks and fuses every matrix once, releasing the file's pages of each as it goes.
void GemmaModel::build_layer_ops() {
  const ReleasePages& rel = w_.release;
  for (int il = 0; il < spec_.n_layer; ++il) {
    const GemmaLayerWeights& lw = w_.layers[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerOps ops;
    if (spec_.layers[il].has_kv) {
      const Mat qkv[3] = {lw.wq, lw.wk, lw.wv};
      const bool k_eq_v = spec_.layers[il].k_eq_v;
      ops.qkv = Linear::build({qkv, k_eq_v ? 2u : 3u}, pool_, p + (k_eq_v ? "attn_qk" : "attn_qkv"), false, &arena_,
                              rel);
    } else {
      ops.qkv = Linear::build({&lw.wq, 1}, pool_, p + "attn_q", false, &arena_, rel);
    }
    ops.o = Linear::build({&lw.wo, 1}, pool_, p + "attn_output", false, &arena_, rel);
    ops.gate_up = Linear::build_glu(lw.gate, lw.up, pool_, p + "ffn_gate_up", &arena_, rel);
    ops.down = Linear::build({&lw.down, 1}, pool_, p + "ffn_down", false, &arena_, rel);
    if (spec_.layers[il].n_expert > 0) build_expert_ops(il, ops);
    if (spec_.ple_dim > 0) {
      ops.inp_gate = Linear::build({&lw.inp_gate, 1}, pool_, p + "inp_gate", false, &arena_, rel);
      ops.proj = Linear::build({&lw.proj, 1}, pool_, p + "proj", false, &arena_, rel);
    }
    layer_ops_.push_back(std::move(ops));
  }
}

// The distinct RoPE configurations of the layers and their inverse frequencies.
void GemmaModel::build_rope_configs() {
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
        double v = static_cast<double>(ls.rope_scale) *
                   std::pow(static_cast<double>(ls.rope_base), -2.0 * i / ls.n_rot);
        if (ls.rope_freq_factors) v /= w_.rope_freqs[i];
        rc.inv.push_back(v);
      }
      rope_row_ += ls.n_rot;
      ropes_.push_back(std::move(rc));
    }
    layer_rope_.push_back(static_cast<int>(c));
  }
}

// The tied table's file pages are released with the rest only when its embedding rows can come
// from the packed lm_head (keep_file_tables); a requantized head leaves them to the embeddings.
Linear GemmaModel::build_lm_head(LmHeadFormat f) {
  const Mat& m = w_.lm_head;
  const bool tied = m.data == w_.tok_embd.data;
  if (f == LmHeadFormat::kPacked || (f == LmHeadFormat::kQ4_0 && m.type == DType::Q4_0))
    return Linear::build({&m, 1}, pool_, "lm_head", false, &arena_, w_.release);
  if (f == LmHeadFormat::kInt8)
    return Linear::build({&m, 1}, pool_, "lm_head", /*wide_q6_k=*/true, &arena_, w_.release);
  // Q4_0: every row decoded and requantized (ggml's reference quantizer), then packed.
  if (m.cols % 32 != 0)
    fail("--lm-head q4_0: rows of %lld columns are not a multiple of 32", static_cast<long long>(m.cols));
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
  if (!tied && w_.release) w_.release(m.data, m.row_bytes * static_cast<uint64_t>(m.rows));
  const Mat mq{"lm_head (q4_0 requantized)", DType::Q4_0, q.data(), m.cols, m.rows, rb};
  return Linear::build({&mq, 1}, pool_, "lm_head", false, &arena_);
}

std::vector<std::string> GemmaModel::describe_weights() const {
  std::vector<std::string> out;
  for (const LayerOps& l : layer_ops_) {
    for (const Linear* m : {&l.qkv, &l.o, &l.gate_up, &l.down, &l.router, &l.inp_gate, &l.proj})
      if (!m->empty()) out.push_back(m->describe());
    // Experts: one line per kind, for the first expert (all share shape and format).
    for (const std::vector<Linear>* v : {&l.exp_gate_up, &l.exp_down})
      if (!v->empty()) out.push_back(std::to_string(v->size()) + " experts × " + v->front().describe());
  }
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
    if (!s.embd.empty() && s.embd.size() != s.tokens.size())
      fail("a slice has %zu soft-token rows for %zu tokens", s.embd.size(), s.tokens.size());
    const int64_t end = static_cast<int64_t>(s.pos0) + static_cast<int64_t>(s.tokens.size());
    if (s.pos0 < 0) fail("negative position %d", s.pos0);
    for (int32_t g = 0; g < kv.n_groups(); ++g) {
      if (static_cast<int64_t>(s.block_tables[g].size()) * bt < end)
        fail("block table of KV group %d covers %zu positions, the step needs %lld", g, s.block_tables[g].size() * bt,
             static_cast<long long>(end));
      // Every position a query of this step can see must be backed by a block.
      const int32_t w = kv.group(g).window;
      const int64_t lo = w > 0 ? std::max<int64_t>(0, s.pos0 - w + 1) : 0;
      for (int64_t blk = lo / bt; blk * bt < end; ++blk)
        if (s.block_tables[g][blk] == kNoBlock)
          fail("KV group %d: block %lld is released but still visible", g, static_cast<long long>(blk));
    }
  }
}

// Decode attention keeps chunk states; sized once for the longest key range the cache can
// hold, so decode steps never allocate.
void GemmaModel::reserve_attention(const KvCache& kv) {
  for (const LayerSpec& ls : spec_.layers) {
    const int64_t cap = static_cast<int64_t>(kv.pool(ls.kv_group).n_total()) * kv.block_tokens();
    const int64_t visible = ls.window > 0 ? std::min<int64_t>(ls.window, cap) : cap;
    attn_.reserve(pool_.size(), visible, ls.n_head / ls.n_head_kv, ls.head_dim);
  }
}

// A slice's runs of soft tokens as bidirectional blocks: each token of a run gets the run's
// first and last positions (appended to block_ for the slice's tokens).
void GemmaModel::mark_soft_blocks(const SeqSlice& sl) {
  const int64_t n = static_cast<int64_t>(sl.tokens.size());
  block_.resize(tok_.size() - n, {-1, -1});
  for (int64_t i = 0; i < n;) {
    int64_t e = i;
    while (e < n && !sl.embd.empty() && sl.embd[e]) ++e;
    for (int64_t j = i; j < e; ++j)
      block_.push_back({sl.pos0 + static_cast<int32_t>(i), sl.pos0 + static_cast<int32_t>(e - 1)});
    if (e == i) block_.push_back({-1, -1}), ++e;
    i = e;
  }
}

// The step's tokens in slice order: ids, (sequence, position), and which want logits.
void GemmaModel::gather_tokens(const ForwardBatch& b) {
  tok_.clear();
  ref_.clear();
  out_rows_.clear();
  soft_.clear();
  block_.clear();
  for (int32_t s = 0; s < static_cast<int32_t>(b.seqs.size()); ++s) {
    const SeqSlice& sl = b.seqs[s];
    const int64_t n = static_cast<int64_t>(sl.tokens.size());
    const int64_t first = sl.logits == LogitsWanted::kAll ? 0 : sl.logits == LogitsWanted::kLast ? n - 1 : n;
    for (int64_t i = 0; i < n; ++i) {
      if (i >= first) out_rows_.push_back(static_cast<int64_t>(tok_.size()));
      tok_.push_back(sl.tokens[i]);
      ref_.push_back({s, sl.pos0 + static_cast<int32_t>(i)});
      soft_.push_back(sl.embd.empty() ? nullptr : sl.embd[i]);
    }
    if (sl.embd_blocks) mark_soft_blocks(sl);
    block_.resize(tok_.size(), {-1, -1});
  }
}

void GemmaModel::forward(const ForwardBatch& b, KvCache& kv, float* logits) {
  check_batch(b, kv);
  reserve_attention(kv);
  T_ = b.n_tokens();
  if (T_ == 0) return;
  ThreadPool::StepScope hot(pool_);
  prof_.start_step();
  gather_tokens(b);
  const int64_t d = spec_.n_embd;
  embed();
  tap("embd", -1, x_.data(), T_, d);
  if (spec_.ple_dim > 0) {
    per_layer_inputs();
    tap("ple", -1, ple_.data(), T_, static_cast<int64_t>(spec_.n_layer) * spec_.ple_dim);
  }
  rope_tables();
  prof_.mark(OpClass::kOther);
  for (int il = 0; il < spec_.n_layer; ++il) {
    // Layers from tail_start_ on write no K/V: only tokens whose logits are wanted matter.
    if (il == tail_start_ && static_cast<int64_t>(out_rows_.size()) < T_) keep_only_output_rows();
    if (T_ == 0) break;
    attention(il, b, kv);
    ffn(il);
    if (spec_.ple_dim > 0) ple_block(il);
    tap("l_out", il, x_.data(), T_, d);
    prof_.layer_tokens(T_);
    prof_.mark(OpClass::kOther);
  }
  if (T_ > 0) output(logits, b.hidden);
}

// x[T × d] = token_embd[t] · embed_scale (tied: the row unpacked from the lm_head to the file's
// bytes, then decoded as the file's row would be: the same floats), or the token's soft-token row as is
void GemmaModel::embed() {
  const int64_t d = spec_.n_embd;
  grow(x_, static_cast<size_t>(T_ * d));
  const uint64_t rb = w_.tok_embd.row_bytes;
  if (embd_packed_) grow(embd_raw_, static_cast<size_t>(T_) * rb);
  const auto to_f32 = quant::traits(w_.tok_embd.type)->to_f32_ref;
  for_rows(pool_, T_, d * kCostCopy, [&](int64_t t) {
    float* row = x_.data() + t * d;
    if (soft_[t]) {
      std::copy_n(soft_[t], d, row);
      return;
    }
    if (embd_packed_) {
      uint8_t* raw = embd_raw_.data() + static_cast<uint64_t>(t) * rb;
      kernels::unpack_row(*embd_packed_, tok_[t], raw);
      to_f32(raw, row, d);
    } else {
      kernels::dequant_row(w_.tok_embd, tok_[t], row);
    }
    ops_.scale(row, d, spec_.embed_scale);
  });
}

// cos/sin of every RoPE configuration for every token: rope_cs_[t][config] = cos[half] | sin[half].
void GemmaModel::rope_tables() {
  grow(rope_cs_, static_cast<size_t>(T_ * rope_row_));
  for_rows(pool_, T_, rope_row_ * kCostTranscendental, [&](int64_t t) {
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

// The residual op that ends layer il, fused per row: x += RMSNorm(att; w); x ·= layer scalar;
// xn = RMSNorm(x; next layer's attn_norm).
void GemmaModel::end_layer(int il, const std::vector<float>& w) {
  const int64_t d = spec_.n_embd;
  const float sc = w_.layers[il].out_scale;
  const float* next_norm = il + 1 < spec_.n_layer ? w_.layers[il + 1].attn_norm.data() : nullptr;
  for_rows(pool_, T_, d * 3 * kCostCopy, [&](int64_t t) {
    ops_.add_rms_norm(&x_[t * d], &att_[t * d], w.data(), d, spec_.eps);
    if (sc != 1.0f) ops_.scale(&x_[t * d], d, sc);
    if (next_norm) ops_.rms_norm(&x_[t * d], next_norm, &xn_[t * d], d, spec_.eps);
  });
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
    block_[i] = block_[t];
    out_rows_[i] = i;
  }
  T_ = n;
}

// logits for the requested rows: softcap(lm_head · RMSNorm(x; output_norm))
void GemmaModel::output(float* logits, float* hidden) {
  const int64_t d = spec_.n_embd;
  const int64_t R = static_cast<int64_t>(out_rows_.size());
  if (R == 0) return;
  grow(xn_, static_cast<size_t>(R * d));
  for (int64_t r = 0; r < R; ++r)
    ops_.rms_norm(&x_[out_rows_[r] * d], w_.output_norm.data(), &xn_[r * d], d, spec_.eps);
  tap("result_norm", -1, xn_.data(), R, d);
  if (hidden) std::copy_n(xn_.data(), R * d, hidden);
  prof_.mark(OpClass::kOther);
  // The softcap rides in the lm_head call (linear.h Epilogue): no second pass over R·V logits.
  const kernels::Epilogue cap{ops_.softcap, spec_.final_softcap};
  matmul(lm_head_, xn_.data(), R, logits, OpClass::kLmHead, spec_.final_softcap > 0 ? &cap : nullptr);
}

const char* op_class_name(OpClass c) {
  static const char* const kNames[kOpClassCount] = {"ffn_gate_up", "ffn_down", "ffn_experts", "attn_qkv",
                                                    "attn_output", "lm_head",  "attention",   "other"};
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
    n += s.logits == LogitsWanted::kAll    ? static_cast<int64_t>(s.tokens.size())
         : s.logits == LogitsWanted::kLast ? (s.tokens.empty() ? 0 : 1)
                                           : 0;
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
