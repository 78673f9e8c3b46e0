// Gemma 4 assistant (assistant.h): loading, target binding and the batched draft step, on the
// Gemma kernels (Linear matmuls, RowOps, the paged attention over the target's cache).
#include "models/gemma4/assistant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "base/error.h"
#include "gguf/reader.h"
#include "kernels/cpu_kernels.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "kernels/paged_attention.h"
#include "models/gemma/gemma_forward.h"
#include "models/gemma/gemma_model.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"

namespace sluice::models {

namespace {

using kernels::Linear;

// The weights of a Gemma layer without K/V (bind_gemma_layer) and their fused matmuls.
struct AsstLayer : GemmaLayerWeights {
  Linear q, o, gate_up, ffn_down;
};

struct AsstWeights {
  Mat tok_embd;  // [n_embd, n_vocab], also the output head
  std::vector<float> output_norm, rope_freqs;
  Mat pre, post, centroids;
  std::vector<int32_t> ordering;  // [n_vocab]: cluster c's ids at [c·per, (c+1)·per)
  std::vector<AsstLayer> layers;
};

// The first of `names` the file has (nullptr: none).
const char* first_present(const gguf::GgufFile& f, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (f.find_tensor(n)) return n;
  return nullptr;
}

const char* require(const gguf::GgufFile& f, std::initializer_list<const char*> names, const char* what) {
  const char* n = first_present(f, names);
  if (!n) fail("%s: assistant file has no %s tensor (looked for %s)", f.name().c_str(), what, *names.begin());
  return n;
}

AssistantSpec read_spec(const gguf::GgufFile& f, const std::string& arch) {
  const std::string a = arch + ".";
  AssistantSpec s;
  s.arch = arch;
  s.name = std::string(f.get_string_or("general.name", arch));
  s.n_layer = static_cast<int32_t>(f.get_uint(a + "block_count", 4096));
  s.n_embd = static_cast<int32_t>(f.get_uint(a + "embedding_length", 1 << 20));
  s.n_embd_target = static_cast<int32_t>(f.get_uint(a + "embedding_length_out", 1 << 20));
  s.eps = static_cast<float>(f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-6));
  Gemma4Layers g = read_gemma4_layers(f, a, s.n_layer, INT32_MAX - 1);
  s.layers = std::move(g.layers);
  for (LayerSpec& ls : s.layers) ls.has_kv = false;
  return s;
}

// The centroid head's tensors and keys (gemma4.md §5), when the file has them.
void bind_centroids(const gguf::GgufFile& f, AssistantSpec& s, AsstWeights& w) {
  const char* fn = f.name().c_str();
  const char* cn = first_present(f, {"masked_embd_centroids.weight", "mtp.centroids.weight"});
  if (!cn) return;
  const char* on = require(f, {"masked_embd_ordering", "masked_embd_ordering.weight", "mtp.token_ordering"},
                           "token ordering (masked_embd_ordering)");
  const std::string a = s.arch + ".";
  const int64_t rows = static_cast<int64_t>(f.tensor(cn).ne[1]);
  s.n_centroids = static_cast<int32_t>(f.get_uint_or(a + "centroid_count", static_cast<uint64_t>(rows), 1 << 24));
  s.centroid_top_k = static_cast<int32_t>(f.get_uint_or(a + "centroid_top_k", 32, 1 << 24));
  if (s.n_centroids <= 0 || s.n_vocab % s.n_centroids != 0)
    fail("%s: vocabulary %d is not a multiple of the centroid count %d", fn, s.n_vocab, s.n_centroids);
  if (s.centroid_top_k <= 0 || s.centroid_top_k > s.n_centroids)
    fail("%s: centroid top-k %d is outside 1..%d", fn, s.centroid_top_k, s.n_centroids);
  w.centroids = WeightBinder(f).matrix(cn, s.n_embd, s.n_centroids);
  const gguf::TensorInfo& ot = f.tensor(on);
  if (ot.type != DType::I32 || ot.n_elements() != static_cast<uint64_t>(s.n_vocab))
    fail("%s: tensor '%s' must be I32 with %d elements, it is %s", fn, on, s.n_vocab, ot.shape_string().c_str());
  w.ordering.resize(static_cast<size_t>(s.n_vocab));
  std::memcpy(w.ordering.data(), ot.data, 4 * w.ordering.size());
  std::vector<uint8_t> seen(static_cast<size_t>(s.n_vocab), 0);
  for (int32_t id : w.ordering) {
    if (id < 0 || id >= s.n_vocab || seen[id]) fail("%s: '%s' is not a permutation of the vocabulary", fn, on);
    seen[id] = 1;
  }
}

AsstWeights bind_weights(const gguf::GgufFile& f, AssistantSpec& s) {
  WeightBinder b(f);
  AsstWeights w;
  s.n_vocab = static_cast<int32_t>(f.tensor("token_embd.weight").ne[1]);
  w.tok_embd = b.matrix("token_embd.weight", s.n_embd, s.n_vocab);
  w.output_norm = b.vector_f32("output_norm.weight", s.n_embd);
  const int32_t rot_full = s.layers.empty() ? 0
                                            : std::max_element(s.layers.begin(), s.layers.end(), [](auto& x, auto& y) {
                                                return x.n_rot < y.n_rot;
                                              })->n_rot;
  if (b.has("rope_freqs.weight")) w.rope_freqs = b.vector_f32("rope_freqs.weight", rot_full / 2);
  w.pre = b.matrix(
      require(f, {"nextn.pre_projection.weight", "mtp.pre_projection.weight", "mtp_pre_proj.weight"}, "pre-projection"),
      2 * int64_t(s.n_embd_target), s.n_embd);
  w.post = b.matrix(require(f, {"nextn.post_projection.weight", "mtp.post_projection.weight", "mtp_post_proj.weight"},
                            "post-projection"),
                    s.n_embd, s.n_embd_target);
  bind_centroids(f, s, w);
  for (int il = 0; il < s.n_layer; ++il) {
    const LayerSpec& ls = s.layers[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    AsstLayer l;
    static_cast<GemmaLayerWeights&>(l) = bind_gemma_layer(b, s.n_embd, ls, il);
    if (b.has(p + "layer_output_scale.weight")) l.out_scale = b.vector_f32(p + "layer_output_scale.weight", 1)[0];
    w.layers.push_back(std::move(l));
  }
  return w;
}

class AssistantImpl final : public Gemma4Assistant {
 public:
  AssistantImpl(AssistantSpec s, AsstWeights w, ThreadPool& pool, const kernels::CpuKernels& isa);
  const AssistantSpec& spec() const override { return s_; }
  void bind_target(const gguf::GgufFile& target_file, const ModelSpec& target) override;
  void step(std::span<const DraftRow> rows, KvCache& kv, DraftHead head, DraftStepOut& out) override;

 private:
  void input(std::span<const DraftRow> rows);
  void layer(int il, std::span<const DraftRow> rows, KvCache& kv);
  void attend(int il, std::span<const DraftRow> rows, KvCache& kv);
  void centroid_head(DraftStepOut& out);
  void run(const Linear& l, const float* x, float* y) const { l.run(pool_, x, R_, y, scratch_, &isa_); }

  AssistantSpec s_;
  AsstWeights w_;
  ThreadPool& pool_;
  const kernels::CpuKernels& isa_;
  const kernels::RowOps ops_;
  Linear pre_, post_, head_, centroids_;
  Mat target_embd_;
  bool bound_ = false;
  std::vector<std::vector<double>> inv_;  // per layer: RoPE inverse frequencies
  // Step state (grows only).
  int64_t R_ = 0;
  std::vector<float> in_, x_, xn_, q_, o_, att_, act_, y_, cs_, row_;
  std::vector<kernels::PagedToken> toks_;
  kernels::PagedAttention attn_;
  mutable kernels::ActScratch scratch_;
};

AssistantImpl::AssistantImpl(AssistantSpec s, AsstWeights w, ThreadPool& pool, const kernels::CpuKernels& isa)
    : s_(std::move(s)), w_(std::move(w)), pool_(pool), isa_(isa), ops_(kernels::merged_ops(isa)) {
  pre_ = Linear::build({&w_.pre, 1}, pool_, "nextn.pre_projection");
  post_ = Linear::build({&w_.post, 1}, pool_, "nextn.post_projection");
  head_ = Linear::build({&w_.tok_embd, 1}, pool_, "assistant_head");
  if (!w_.centroids.empty()) centroids_ = Linear::build({&w_.centroids, 1}, pool_, "masked_embd_centroids");
  for (int il = 0; il < s_.n_layer; ++il) {
    AsstLayer& l = w_.layers[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    l.q = Linear::build({&l.wq, 1}, pool_, p + "attn_q");
    l.o = Linear::build({&l.wo, 1}, pool_, p + "attn_output");
    l.gate_up = Linear::build_glu(l.gate, l.up, pool_, p + "ffn_gate_up");
    l.ffn_down = Linear::build({&l.down, 1}, pool_, p + "ffn_down");
    const LayerSpec& ls = s_.layers[il];
    std::vector<double> inv;
    for (int64_t i = 0; i < ls.n_rot / 2; ++i) {
      double v = static_cast<double>(ls.rope_scale) * std::pow(static_cast<double>(ls.rope_base), -2.0 * i / ls.n_rot);
      if (ls.rope_freq_factors) v /= w_.rope_freqs[i];
      inv.push_back(v);
    }
    inv_.push_back(std::move(inv));
  }
}

void AssistantImpl::bind_target(const gguf::GgufFile& tf, const ModelSpec& t) {
  const char* an = s_.name.c_str();
  const char* tn = t.name.c_str();
  if (t.n_vocab != s_.n_vocab)
    fail("assistant '%s' has a vocabulary of %d tokens, the target '%s' %d", an, s_.n_vocab, tn, t.n_vocab);
  if (t.n_embd != s_.n_embd_target)
    fail("assistant '%s' expects a target width (embedding_length_out) of %d, the target '%s' has %d", an,
         s_.n_embd_target, tn, t.n_embd);
  // The last KV-owning layer of each attention type (gemma4.md §5).
  int src[2] = {-1, -1};  // [global, sliding]
  for (int il = 0; il < t.n_layer; ++il)
    if (t.layers[il].has_kv) src[t.layers[il].window > 0 ? 1 : 0] = il;
  for (int il = 0; il < s_.n_layer; ++il) {
    LayerSpec& ls = s_.layers[il];
    const bool swa = ls.window > 0;
    const int sl = src[swa ? 1 : 0];
    if (sl < 0)
      fail("target '%s' has no %s KV-owning layer for assistant layer %d", tn, swa ? "sliding" : "global", il);
    const LayerSpec& ts = t.layers[sl];
    if (ts.head_dim != ls.head_dim || ts.n_head_kv != ls.n_head_kv)
      fail(
          "assistant '%s' layer %d (head dim %d, %d KV heads) cannot read target '%s' layer %d (head dim %d, %d KV heads)",
          an, il, ls.head_dim, ls.n_head_kv, tn, sl, ts.head_dim, ts.n_head_kv);
    ls.kv_source = sl;
    ls.kv_group = ts.kv_group;
    ls.kv_index = ts.kv_index;
  }
  target_embd_ = WeightBinder(tf).matrix("token_embd.weight", t.n_embd, t.n_vocab);
  bound_ = true;
}

// in = concat(E_target[t]·sqrt(d_target), h); x = pre_projection(in)
void AssistantImpl::input(std::span<const DraftRow> rows) {
  const int64_t dt = s_.n_embd_target;
  const float sc = std::sqrt(static_cast<float>(dt));
  in_.resize(static_cast<size_t>(R_ * 2 * dt));
  for (int64_t r = 0; r < R_; ++r) {
    float* row = &in_[r * 2 * dt];
    kernels::dequant_row(target_embd_, rows[r].token, row);
    ops_.scale(row, dt, sc);
    std::memcpy(row + dt, rows[r].hidden, 4 * static_cast<size_t>(dt));
  }
  x_.resize(static_cast<size_t>(R_ * s_.n_embd));
  run(pre_, in_.data(), x_.data());
}

// Queries of the draft position over the target's cached positions 0 .. pos−1 (sliding: the
// last window+1 of them, transformers' bidirectional |q − kv| <= window then flipped).
void AssistantImpl::attend(int il, std::span<const DraftRow> rows, KvCache& kv) {
  const LayerSpec& ls = s_.layers[il];
  kernels::PagedLayer pl = paged_layer(ls, kv);
  pl.scale = 1.0f;  // QK-norm replaces 1/sqrt(d)
  pl.window = ls.window > 0 ? ls.window + 1 : 0;
  toks_.resize(static_cast<size_t>(R_));
  for (int64_t r = 0; r < R_; ++r) toks_[r] = {rows[r].block_tables[ls.kv_group].data(), rows[r].pos - 1};
  const int64_t cap = static_cast<int64_t>(kv.pool(ls.kv_group).n_total()) * kv.block_tokens();
  attn_.reserve(pool_.size(), ls.window > 0 ? std::min<int64_t>(ls.window + 1, cap) : cap, ls.n_head / ls.n_head_kv,
                ls.head_dim);
  const int64_t qw = static_cast<int64_t>(ls.n_head) * ls.head_dim;
  o_.resize(static_cast<size_t>(R_ * qw));
  attn_.run(pool_, isa_, pl, {toks_.data(), static_cast<size_t>(R_)}, q_.data(), qw, o_.data(), qw);
}

void AssistantImpl::layer(int il, std::span<const DraftRow> rows, KvCache& kv) {
  const LayerSpec& ls = s_.layers[il];
  const AsstLayer& l = w_.layers[il];
  const int64_t d = s_.n_embd, hd = ls.head_dim, qw = int64_t(ls.n_head) * hd;
  xn_.resize(static_cast<size_t>(R_ * d));
  for (int64_t r = 0; r < R_; ++r) ops_.rms_norm(&x_[r * d], l.attn_norm.data(), &xn_[r * d], d, s_.eps);
  q_.resize(static_cast<size_t>(R_ * qw));
  run(l.q, xn_.data(), q_.data());
  std::vector<float>& cs = row_;
  cs.resize(static_cast<size_t>(ls.n_rot));
  for (int64_t r = 0; r < R_; ++r) {
    const int64_t half = ls.n_rot / 2;
    for (int64_t i = 0; i < half; ++i) {
      const double theta = static_cast<double>(rows[r].pos) * inv_[il][i];
      cs[i] = static_cast<float>(std::cos(theta));
      cs[half + i] = static_cast<float>(std::sin(theta));
    }
    for (int64_t h = 0; h < ls.n_head; ++h) {
      float* qh = &q_[r * qw + h * hd];
      ops_.rms_norm(qh, l.q_norm.data(), qh, hd, s_.eps);
      ops_.rope(qh, cs.data(), ls.n_rot);
    }
  }
  attend(il, rows, kv);
  att_.resize(static_cast<size_t>(R_ * d));
  run(l.o, o_.data(), att_.data());
  for (int64_t r = 0; r < R_; ++r) {
    ops_.add_rms_norm(&x_[r * d], &att_[r * d], l.post_attn_norm.data(), d, s_.eps);
    ops_.rms_norm(&x_[r * d], l.ffn_norm.data(), &xn_[r * d], d, s_.eps);
  }
  act_.resize(static_cast<size_t>(R_ * ls.n_ff));
  l.gate_up.run_glu(pool_, xn_.data(), R_, act_.data(), scratch_, &isa_);
  run(l.ffn_down, act_.data(), att_.data());
  for (int64_t r = 0; r < R_; ++r) {
    ops_.add_rms_norm(&x_[r * d], &att_[r * d], l.post_ffw_norm.data(), d, s_.eps);
    if (l.out_scale != 1.0f) ops_.scale(&x_[r * d], d, l.out_scale);
  }
}

// Top-k clusters of centroids · y, then E·y for their tokens only; the mask is min − 1.
void AssistantImpl::centroid_head(DraftStepOut& out) {
  const int64_t d = s_.n_embd, C = s_.n_centroids, K = s_.centroid_top_k, per = s_.n_vocab / C;
  out.n_cand = static_cast<int32_t>(K * per);
  out.centroid_scores.resize(static_cast<size_t>(R_ * C));
  run(centroids_, y_.data(), out.centroid_scores.data());
  out.cand_ids.resize(static_cast<size_t>(R_ * out.n_cand));
  out.cand_logits.resize(out.cand_ids.size());
  out.mask.resize(static_cast<size_t>(R_));
  std::vector<int32_t> order(static_cast<size_t>(C));
  row_.resize(static_cast<size_t>(d));
  for (int64_t r = 0; r < R_; ++r) {
    const float* sc = &out.centroid_scores[r * C];
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t a, int32_t b) { return sc[a] > sc[b] || (sc[a] == sc[b] && a < b); });
    int32_t* ids = &out.cand_ids[r * out.n_cand];
    float* lg = &out.cand_logits[r * out.n_cand];
    float lo = INFINITY, best = -INFINITY;
    int32_t arg = -1;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < per; ++j) {
        const int32_t id = w_.ordering[order[k] * per + j];
        kernels::dequant_row(w_.tok_embd, id, row_.data());
        double acc = 0;
        for (int64_t i = 0; i < d; ++i) acc += double(row_[i]) * y_[r * d + i];
        const float v = static_cast<float>(acc);
        ids[k * per + j] = id;
        lg[k * per + j] = v;
        lo = std::min(lo, v);
        if (v > best || (v == best && id < arg)) best = v, arg = id;
      }
    out.mask[r] = lo - 1.0f;
    out.argmax[r] = arg;
  }
}

void AssistantImpl::step(std::span<const DraftRow> rows, KvCache& kv, DraftHead head, DraftStepOut& out) {
  if (!bound_) fail("assistant '%s': bind_target() was not called", s_.name.c_str());
  if (head == DraftHead::kCentroid && s_.n_centroids == 0)
    fail("assistant '%s' has no centroid head (masked_embd_centroids); use the full head", s_.name.c_str());
  const int32_t bt = kv.block_tokens();
  for (const DraftRow& r : rows) {
    if (r.token < 0 || r.token >= s_.n_vocab)
      fail("draft token %d is outside the vocabulary (%d)", r.token, s_.n_vocab);
    if (r.pos < 1) fail("draft position %d: the target has cached nothing to attend to", r.pos);
    for (const LayerSpec& ls : s_.layers) {
      const auto& tab = r.block_tables[ls.kv_group];
      const int64_t lo = ls.window > 0 ? std::max<int64_t>(0, r.pos - 1 - ls.window) : 0;
      if (static_cast<int64_t>(tab.size()) * bt < r.pos)
        fail("draft row's block table is shorter than position %d", r.pos);
      for (int64_t b = lo / bt; b * bt < r.pos; ++b)
        if (tab[b] == kNoBlock) fail("draft row: KV block %lld of the target is released but visible", (long long)b);
    }
  }
  R_ = static_cast<int64_t>(rows.size());
  out.rows = R_;
  if (R_ == 0) return;
  ThreadPool::StepScope hot(pool_);
  input(rows);
  for (int il = 0; il < s_.n_layer; ++il) layer(il, rows, kv);
  const int64_t d = s_.n_embd;
  y_.resize(static_cast<size_t>(R_ * d));
  for (int64_t r = 0; r < R_; ++r) ops_.rms_norm(&x_[r * d], w_.output_norm.data(), &y_[r * d], d, s_.eps);
  out.next_hidden.resize(static_cast<size_t>(R_ * s_.n_embd_target));
  run(post_, y_.data(), out.next_hidden.data());
  out.argmax.resize(static_cast<size_t>(R_));
  out.n_cand = 0;
  if (head == DraftHead::kCentroid) return centroid_head(out);
  out.logits.resize(static_cast<size_t>(R_ * s_.n_vocab));
  run(head_, y_.data(), out.logits.data());
  for (int64_t r = 0; r < R_; ++r)
    out.argmax[r] = static_cast<int32_t>(ops_.argmax(&out.logits[r * s_.n_vocab], s_.n_vocab));
}

}  // namespace

std::vector<float> DraftStepOut::expand(int64_t r, int32_t n_vocab) const {
  if (n_cand == 0) return {logits.begin() + r * n_vocab, logits.begin() + (r + 1) * n_vocab};
  std::vector<float> full(static_cast<size_t>(n_vocab), mask[r]);
  for (int32_t j = 0; j < n_cand; ++j) full[cand_ids[r * n_cand + j]] = cand_logits[r * n_cand + j];
  return full;
}

double DraftStepOut::argmax_probability(int64_t r, int32_t n_vocab) const {
  // p(best) = 1 / Σ_i exp(l_i − l_best), in double over the row's logits.
  const auto sum_over = [](const float* l, int64_t n, double best) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(l[i]) - best);
    return s;
  };
  if (n_cand == 0) {
    const float* l = &logits[r * n_vocab];
    return 1.0 / sum_over(l, n_vocab, l[argmax[r]]);
  }
  const float* l = &cand_logits[r * n_cand];
  double best = mask[r];
  for (int32_t j = 0; j < n_cand; ++j) best = std::max(best, static_cast<double>(l[j]));
  const double masked = static_cast<double>(n_vocab - n_cand) * std::exp(static_cast<double>(mask[r]) - best);
  return 1.0 / (sum_over(l, n_cand, best) + masked);
}

std::unique_ptr<gguf::GgufFile> open_gemma4_assistant_file(const std::string& path) {
  gguf::ReadOptions o;
  o.allow_unsupported_types = true;
  return gguf::GgufFile::open(path, o);
}

std::unique_ptr<Gemma4Assistant> load_gemma4_assistant(const gguf::GgufFile& f, const LoadOptions& opt) {
  if (!opt.pool) fail("load_gemma4_assistant: no thread pool");
  const std::string arch(f.get_string("general.architecture"));
  if (arch != "gemma4-assistant" && arch != "gemma4_assistant")
    fail("%s: architecture '%s' is not a Gemma 4 assistant (expected gemma4-assistant)", f.name().c_str(),
         arch.c_str());
  AssistantSpec s = read_spec(f, arch);
  AsstWeights w = bind_weights(f, s);
  const kernels::CpuKernels& isa = opt.isa ? *opt.isa : kernels::cpu_kernels();
  return std::make_unique<AssistantImpl>(std::move(s), std::move(w), *opt.pool, isa);
}

}  // namespace sluice::models
