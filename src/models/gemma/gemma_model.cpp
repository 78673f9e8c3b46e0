// Gemma forward pass over a batch of sequence slices (gemma4.md §2, gemma3.md §2).
// Shapes: T = tokens in the step, d = n_embd, H/Hkv = query/KV heads, hd = head dim,
// P = PLE width, L = layers. Activations are f32, row-major [T × width].
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/ops.h"
#include "models/gemma/gemma_model.h"
#include "threading/thread_pool.h"

namespace sluice::models {

namespace {

class GemmaModel final : public Model {
 public:
  GemmaModel(ModelSpec spec, GemmaWeights w, ThreadPool& pool)
      : spec_(std::move(spec)), w_(std::move(w)), pool_(pool) {}

  const ModelSpec& spec() const override { return spec_; }
  void forward(const ForwardBatch& batch, KvCache& kv, float* logits) override;

 private:
  // Per-token bookkeeping for a step: which slice, absolute position.
  struct TokenRef { int32_t seq; int32_t pos; };

  void check_batch(const ForwardBatch& b, const KvCache& kv) const;
  void embed(const ForwardBatch& b);
  void per_layer_inputs(int64_t T);
  void attention(int il, const ForwardBatch& b, KvCache& kv, int64_t T);
  void ffn(int il, int64_t T);
  void ple_block(int il, int64_t T);
  void add_post_normed(const std::vector<float>& w, int64_t T);
  void output(const ForwardBatch& b, float* logits);

  // Applies fn(row) to rows [0, n) split across the pool.
  template <class Fn>
  void parallel_rows(int64_t n, Fn&& fn) {
    pool_.run([&](int ith, int nth) {
      int64_t r0, r1;
      split_range(n, ith, nth, &r0, &r1);
      for (int64_t r = r0; r < r1; ++r) fn(r);
    });
  }

  ModelSpec spec_;
  GemmaWeights w_;
  ThreadPool& pool_;
  // Step buffers; they only grow (sized by the largest step seen).
  std::vector<int32_t> tok_;
  std::vector<TokenRef> ref_;
  std::vector<float> x_, xn_, q_, k_, v_, o_, att_, g_, u_, ple_, ple_g_;
};

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

void GemmaModel::forward(const ForwardBatch& b, KvCache& kv, float* logits) {
  check_batch(b, kv);
  const int64_t T = b.n_tokens();
  if (T == 0) return;
  tok_.clear();
  ref_.clear();
  for (int32_t s = 0; s < static_cast<int32_t>(b.seqs.size()); ++s)
    for (size_t i = 0; i < b.seqs[s].tokens.size(); ++i) {
      tok_.push_back(b.seqs[s].tokens[i]);
      ref_.push_back({s, b.seqs[s].pos0 + static_cast<int32_t>(i)});
    }
  embed(b);
  if (spec_.ple_dim > 0) per_layer_inputs(T);
  for (int il = 0; il < spec_.n_layer; ++il) {
    attention(il, b, kv, T);
    ffn(il, T);
    if (spec_.ple_dim > 0) ple_block(il, T);
    const float sc = w_.layers[il].out_scale;
    if (sc != 1.0f)
      for (int64_t i = 0; i < T * spec_.n_embd; ++i) x_[i] *= sc;
  }
  output(b, logits);
}

// x[T × d] = token_embd[t] · embed_scale
void GemmaModel::embed(const ForwardBatch&) {
  const int64_t d = spec_.n_embd, T = static_cast<int64_t>(tok_.size());
  x_.resize(T * d);
  parallel_rows(T, [&](int64_t t) {
    float* row = x_.data() + t * d;
    kernels::dequant_row(w_.tok_embd, tok_[t], row);
    for (int64_t i = 0; i < d; ++i) row[i] *= spec_.embed_scale;
  });
}

// PLE (gemma4.md §2.3): ple[T × L·P] = (RMSNorm_P(Wpm·x0 / √d) + Tpl[t]·√P) / √2
void GemmaModel::per_layer_inputs(int64_t T) {
  const int64_t d = spec_.n_embd, P = spec_.ple_dim, LP = static_cast<int64_t>(spec_.n_layer) * P;
  ple_.resize(T * LP);
  kernels::matmul(pool_, w_.ple_model_proj, x_.data(), T, ple_.data());
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float tok_scale = std::sqrt(static_cast<float>(P));
  const float combine = 1.0f / std::sqrt(2.0f);
  parallel_rows(T, [&](int64_t t) {
    thread_local std::vector<float> tok_row;
    tok_row.resize(LP);
    kernels::dequant_row(w_.ple_tok, tok_[t], tok_row.data());
    float* row = ple_.data() + t * LP;
    for (int64_t l = 0; l < spec_.n_layer; ++l) {
      float* sl = row + l * P;
      for (int64_t i = 0; i < P; ++i) sl[i] *= proj_scale;
      kernels::rms_norm(sl, w_.ple_proj_norm.data(), sl, P, spec_.eps);
      for (int64_t i = 0; i < P; ++i) sl[i] = (sl[i] + tok_row[l * P + i] * tok_scale) * combine;
    }
  });
}

void GemmaModel::attention(int il, const ForwardBatch& b, KvCache& kv, int64_t T) {
  const LayerSpec& ls = spec_.layers[il];
  const GemmaLayerWeights& lw = w_.layers[il];
  const int64_t d = spec_.n_embd, hd = ls.head_dim, H = ls.n_head, Hkv = ls.n_head_kv;
  const int64_t qw = H * hd, kvw = Hkv * hd;
  const int32_t bt = kv.block_tokens();
  const float* freq = ls.rope_freq_factors ? w_.rope_freqs.data() : nullptr;

  xn_.resize(T * d);
  parallel_rows(T, [&](int64_t t) { kernels::rms_norm(&x_[t * d], lw.attn_norm.data(), &xn_[t * d], d, spec_.eps); });
  q_.resize(T * qw);
  kernels::matmul(pool_, lw.wq, xn_.data(), T, q_.data());
  parallel_rows(T * H, [&](int64_t th) {
    float* qh = &q_[th * hd];   // [T × H × hd] is [T·H × hd]
    kernels::rms_norm(qh, lw.q_norm.data(), qh, hd, spec_.eps);
    kernels::rope_neox(qh, ls.n_rot, ref_[th / H].pos, ls.rope_base, ls.rope_scale, freq);
  });

  if (ls.has_kv) {
    k_.resize(T * kvw);
    v_.resize(T * kvw);
    kernels::matmul(pool_, lw.wk, xn_.data(), T, k_.data());
    kernels::matmul(pool_, lw.wv, xn_.data(), T, v_.data());
    parallel_rows(T, [&](int64_t t) {
      for (int64_t h = 0; h < Hkv; ++h) {
        float* kh = &k_[t * kvw + h * hd];
        float* vh = &v_[t * kvw + h * hd];
        kernels::rms_norm(kh, lw.k_norm.data(), kh, hd, spec_.eps);
        kernels::rope_neox(kh, ls.n_rot, ref_[t].pos, ls.rope_base, ls.rope_scale, freq);
        if (ls.v_norm) kernels::rms_norm(vh, nullptr, vh, hd, spec_.eps);
      }
      const int32_t pos = ref_[t].pos;
      const BlockId blk = b.seqs[ref_[t].seq].block_tables[ls.kv_group][pos / bt];
      kv.store(ls.kv_group, ls.kv_index, blk, pos % bt, &k_[t * kvw], &v_[t * kvw]);
    });
  }

  // o[t, h] = Σ_j softmax_j(scale · q[t,h]·K[j]) · V[j] over the visible keys j of t.
  // One work item per (token, kv head): each K/V row is loaded once for its query heads.
  o_.resize(T * qw);
  const int64_t group = H / Hkv;
  const int32_t win = ls.window;
  parallel_rows(T * Hkv, [&](int64_t item) {
    const int64_t t = item / Hkv, hk = item % Hkv;
    const SeqSlice& s = b.seqs[ref_[t].seq];
    const int64_t p = ref_[t].pos;
    const int64_t lo = win > 0 ? std::max<int64_t>(0, p - win + 1) : 0;
    const int64_t n = p - lo + 1;
    thread_local std::vector<float> scores, krow, vrow;
    scores.resize(n * group);
    krow.resize(kvw);
    vrow.resize(kvw);
    const std::span<const BlockId> table = s.block_tables[ls.kv_group];
    for (int64_t j = 0; j < n; ++j) {
      const int64_t pos = lo + j;
      kv.load_k(ls.kv_group, ls.kv_index, table[pos / bt], static_cast<int32_t>(pos % bt), krow.data());
      for (int64_t g = 0; g < group; ++g)
        scores[g * n + j] = ls.attn_scale * kernels::dot(&q_[(t * H + hk * group + g) * hd], &krow[hk * hd], hd);
    }
    for (int64_t g = 0; g < group; ++g) {
      float* sc = &scores[g * n];
      const float mx = *std::max_element(sc, sc + n);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        sc[j] = std::exp(sc[j] - mx);
        sum += sc[j];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < n; ++j) sc[j] *= inv;
      std::fill_n(&o_[(t * H + hk * group + g) * hd], hd, 0.0f);
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t pos = lo + j;
      kv.load_v(ls.kv_group, ls.kv_index, table[pos / bt], static_cast<int32_t>(pos % bt), vrow.data());
      for (int64_t g = 0; g < group; ++g) {
        float* oh = &o_[(t * H + hk * group + g) * hd];
        const float pj = scores[g * n + j];
        for (int64_t i = 0; i < hd; ++i) oh[i] += pj * vrow[hk * hd + i];
      }
    }
  });

  att_.resize(T * d);
  kernels::matmul(pool_, lw.wo, o_.data(), T, att_.data());
  add_post_normed(lw.post_attn_norm, T);
}

// x += RMSNorm(att; w) row by row: every Gemma sub-block ends with a post-norm residual.
void GemmaModel::add_post_normed(const std::vector<float>& w, int64_t T) {
  const int64_t d = spec_.n_embd;
  parallel_rows(T, [&](int64_t t) {
    float* a = &att_[t * d];
    kernels::rms_norm(a, w.data(), a, d, spec_.eps);
    for (int64_t i = 0; i < d; ++i) x_[t * d + i] += a[i];
  });
}

// x += RMSNorm(Wdown · (gelu_tanh(Wgate·m) ⊙ Wup·m)),  m = RMSNorm(x; ffn_norm)
void GemmaModel::ffn(int il, int64_t T) {
  const GemmaLayerWeights& lw = w_.layers[il];
  const int64_t d = spec_.n_embd, ff = spec_.layers[il].n_ff;
  parallel_rows(T, [&](int64_t t) { kernels::rms_norm(&x_[t * d], lw.ffn_norm.data(), &xn_[t * d], d, spec_.eps); });
  g_.resize(T * ff);
  u_.resize(T * ff);
  kernels::matmul(pool_, lw.gate, xn_.data(), T, g_.data());
  kernels::matmul(pool_, lw.up, xn_.data(), T, u_.data());
  parallel_rows(T, [&](int64_t t) {
    for (int64_t i = t * ff; i < (t + 1) * ff; ++i) g_[i] = kernels::gelu_tanh(g_[i]) * u_[i];
  });
  kernels::matmul(pool_, lw.down, g_.data(), T, att_.data());
  add_post_normed(lw.post_ffw_norm, T);
}

// x += RMSNorm(Wproj · (gelu_tanh(Winp_gate · x) ⊙ ple[:, l, :]); post_norm)
void GemmaModel::ple_block(int il, int64_t T) {
  const GemmaLayerWeights& lw = w_.layers[il];
  const int64_t P = spec_.ple_dim, LP = static_cast<int64_t>(spec_.n_layer) * P;
  ple_g_.resize(T * P);
  kernels::matmul(pool_, lw.inp_gate, x_.data(), T, ple_g_.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < P; ++i)
      ple_g_[t * P + i] = kernels::gelu_tanh(ple_g_[t * P + i]) * ple_[t * LP + il * P + i];
  kernels::matmul(pool_, lw.proj, ple_g_.data(), T, att_.data());
  add_post_normed(lw.post_norm, T);
}

// logits for the requested rows: softcap(lm_head · RMSNorm(x; output_norm))
void GemmaModel::output(const ForwardBatch& b, float* logits) {
  const int64_t d = spec_.n_embd, V = spec_.n_vocab;
  xn_.clear();
  int64_t t0 = 0;
  for (const SeqSlice& s : b.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n == 0) continue;
    const int64_t first = s.logits == LogitsWanted::kAll ? 0 : s.logits == LogitsWanted::kLast ? n - 1 : n;
    for (int64_t t = t0 + first; t < t0 + n; ++t) {
      xn_.resize(xn_.size() + d);
      kernels::rms_norm(&x_[t * d], w_.output_norm.data(), &xn_[xn_.size() - d], d, spec_.eps);
    }
    t0 += n;
  }
  const int64_t rows = static_cast<int64_t>(xn_.size()) / d;
  if (rows == 0) return;
  kernels::matmul(pool_, w_.lm_head, xn_.data(), rows, logits);
  if (spec_.final_softcap > 0) {
    const float c = spec_.final_softcap;
    parallel_rows(rows, [&](int64_t r) {
      for (int64_t i = r * V; i < (r + 1) * V; ++i) logits[i] = c * std::tanh(logits[i] / c);
    });
  }
}

}  // namespace

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

std::unique_ptr<Model> make_gemma_model(ModelSpec spec, GemmaWeights w, ThreadPool& pool) {
  return std::make_unique<GemmaModel>(std::move(spec), std::move(w), pool);
}

}  // namespace sluice::models
