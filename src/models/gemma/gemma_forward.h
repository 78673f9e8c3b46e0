// The Gemma forward pass (private to src/models/gemma/): the model class and the helpers its
// steps share. One file per step: gemma_model.cpp (load, embedding, RoPE, the layer loop,
// output), gemma_attention.cpp, gemma_ffn.cpp, gemma_ple.cpp. A new FFN kind (e.g. MoE) is one
// more step file and one branch in the layer loop.
//
// Shapes: T = tokens in the step, d = n_embd, H/Hkv = query/KV heads, hd = head dim,
// P = PLE width, L = layers, ff = FFN width. Activations are f32, row-major [T × width].
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "kernels/linear.h"
#include "kernels/paged_attention.h"
#include "models/gemma/gemma_model.h"
#include "threading/thread_pool.h"

namespace sluice::models {

using kernels::Linear;

// The fused matmuls of one layer.
struct LayerOps {
  Linear qkv;  // [q | k | v] (KV-owning layers) or q alone
  Linear o, gate_up, down, inp_gate, proj;
  // MoE layers (gemma_moe.cpp): the router [d -> E] and each expert's fused gate|up and down.
  Linear router;
  std::vector<Linear> exp_gate_up, exp_down;
};

// The buffers a gated MLP call works in: the matmuls' scratch, the GLU's output act [m × ff]
// and, in decode-sized steps, act quantized for the down matrix.
struct GluBuffers {
  kernels::ActScratch scratch;
  std::vector<float> act;
  std::vector<uint8_t> act_q;
};

class ProfileMarks;

// y[m × d] = Wdown · (gelu_tanh(Wgate·x) ⊙ Wup·x) for m rows of x through a fused gate|up
// (gemma_ffn.cpp), on `pool`; each matmul's bytes and time go to `prof` (when given) under
// classes gu and dn.
void run_gated_mlp(ThreadPool& pool, const kernels::CpuKernels* isa, GluBuffers& buf, const Linear& gate_up,
                   const Linear& down, const float* x, int64_t m, float* y, ProfileMarks* prof, OpClass gu, OpClass dn);

// Pools of more threads than this run each MoE expert on the whole pool instead of by lane.
inline constexpr int kMaxExpertLanes = 64;

// A pool thread's own state for running whole experts of a MoE step by itself (gemma_moe.cpp):
// a one-thread pool (runs inline) and its own buffers.
struct ExpertLane {
  ThreadPool serial{1};
  GluBuffers buf;
};

// One token's choice of an expert in a MoE layer: its row in the step, its weight, and the row
// of the expert-grouped buffers that holds the token's input and output for that expert.
struct ExpertRoute {
  int32_t expert = 0;
  float weight = 0.0f;
  int64_t row = 0;
};

// One distinct RoPE configuration (layers share them): inv[i] = scale·base^(−2i/n_rot)/ff[i].
struct RopeConfig {
  float base = 0, scale = 0;
  int32_t n_rot = 0;
  bool factors = false;
  std::vector<double> inv;
  int64_t offset = 0;  // floats before this config's table in a token's row of rope_cs_
};

// Paged-attention geometry of layer ls over its slot in kv, with the layer's own scale and
// window (callers with another masking convention override them).
kernels::PagedLayer paged_layer(const LayerSpec& ls, KvCache& kv);

template <class T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// Work of the per-row ops, per element of a row, in units of one streaming vector op (a scale,
// an RMSNorm): relative weights that only decide whether a row op is worth a pool job.
inline constexpr int64_t kCostCopy = 1;            // RMSNorm, scale, an embedding row
inline constexpr int64_t kCostNormRope = 4;        // per-head RMSNorm then RoPE, in place
inline constexpr int64_t kCostTranscendental = 8;  // an exp/tanh or a cos/sin per element
// Below this much work (T · width · cost) a row op runs inline on the calling thread: waking
// the workers and meeting at the job's end costs about as much as this many units on one core.
inline constexpr int64_t kInlineRowWork = 8192;

// fn(t) for t in [0, T), rows split over the pool's threads unless the work (T · cost units)
// is too small to pay for a job.
template <class Fn>
void for_rows(ThreadPool& pool, int64_t T, int64_t cost, Fn&& fn) {
  if (pool.size() == 1 || T == 1 || T * cost < kInlineRowWork) {
    for (int64_t t = 0; t < T; ++t) fn(t);
    return;
  }
  pool.run([&](int ith, int nth) {
    int64_t r0, r1;
    split_range(T, ith, nth, &r0, &r1);
    for (int64_t t = r0; t < r1; ++t) fn(t);
  });
}

// The step's time and weight bytes per op class, for a StepProfile (set_profile).
class ProfileMarks {
 public:
  void set(StepProfile* p) { profile_ = p; }
  bool on() const { return profile_ != nullptr; }
  void start_step() {
    if (!profile_) return;
    last_ = std::chrono::steady_clock::now();
    ++profile_->steps;
  }
  // Time since the last mark goes to class c.
  void mark(OpClass c) {
    if (!profile_) return;
    const auto now = std::chrono::steady_clock::now();
    profile_->seconds[static_cast<int>(c)] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  void bytes(OpClass c, uint64_t n) {
    if (profile_) profile_->bytes[static_cast<int>(c)] += n;
  }
  // A finished call of l: its weight bytes and the time since the last mark.
  void account(const Linear& l, OpClass c) {
    bytes(c, l.stream_bytes());
    mark(c);
  }
  void layer_tokens(int64_t n) {
    if (profile_) profile_->layer_tokens += n;
  }

 private:
  StepProfile* profile_ = nullptr;
  std::chrono::steady_clock::time_point last_;
};

class GemmaModel final : public Model {
 public:
  GemmaModel(ModelSpec spec, GemmaWeights w, ThreadPool& pool, const kernels::CpuKernels& isa, LmHeadFormat lm_head);

  const ModelSpec& spec() const override { return spec_; }
  void forward(const ForwardBatch& batch, KvCache& kv, float* logits) override;
  void set_profile(StepProfile* p) override { prof_.set(p); }
  void set_tap(Tap tap) override { tap_ = std::move(tap); }
  std::vector<std::string> describe_weights() const override;
  std::vector<std::span<const uint8_t>> weight_memory() const override { return arena_.spans(); }

 private:
  struct TokenRef {
    int32_t seq;
    int32_t pos;
  };

  // Load (gemma_model.cpp).
  void build_layer_ops();
  void build_rope_configs();
  Linear build_lm_head(LmHeadFormat f);
  void keep_file_tables();
  // Step (gemma_model.cpp).
  void check_batch(const ForwardBatch& b, const KvCache& kv) const;
  void reserve_attention(const KvCache& kv);
  void gather_tokens(const ForwardBatch& b);
  void embed();
  void mark_soft_blocks(const SeqSlice& sl);
  void rope_tables();
  void end_layer(int il, const std::vector<float>& post_norm);
  void keep_only_output_rows();
  void output(float* logits, float* hidden);
  // Attention step (gemma_attention.cpp): x → xn = RMSNorm(x + RMSNorm(attn(x))) of layer il.
  void attention(int il, const ForwardBatch& b, KvCache& kv);
  void qk_norm_rope_store(int il, const ForwardBatch& b, KvCache& kv);
  void store_kv(KvCache& kv, const LayerSpec& ls, BlockId blk, int32_t slot, const float* k, const float* v, int64_t n);
  void paged_attention(int il, const ForwardBatch& b, KvCache& kv);
  // FFN step (gemma_ffn.cpp).
  void ffn(int il);
  // MoE FFN step (gemma_moe.cpp): the routed experts beside the dense FFN, att_ → the layer's
  // FFN output before post_ffw_norm.
  void build_expert_ops(int il, LayerOps& ops);
  void moe(int il);
  void route(int il);
  void run_experts(int il);
  void run_experts_by_lane(int il);
  // Per-layer embeddings (gemma_ple.cpp).
  void per_layer_inputs();
  void ple_block(int il);

  void matmul(const Linear& l, const float* x, int64_t m, float* y, OpClass c,
              const kernels::Epilogue* post = nullptr) {
    l.run(pool_, x, m, y, scratch_, &isa_, post);
    prof_.account(l, c);
  }
  // Hands rows [T_ × width] of `data` to the tap, when one is set.
  void tap(const char* name, int layer, const float* data, int64_t rows, int64_t width) const {
    if (tap_) tap_(TapView{name, layer, data, rows, width});
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
  // Tied embeddings: the token embedding rows come from the packed lm_head (unpack_row), and
  // the file's copy of the table leaves memory; nullptr: they are read from the file's rows.
  const kernels::PackedMatrix* embd_packed_ = nullptr;
  std::vector<RopeConfig> ropes_;
  std::vector<int> layer_rope_;  // config index per layer
  int64_t rope_row_ = 0;         // floats of all configs' tables for one token
  int tail_start_ = 0;           // first layer of the trailing run of layers that own no K/V

  ProfileMarks prof_;
  Tap tap_;

  // Step state; buffers only grow (sized by the largest step seen).
  int64_t T_ = 0;
  std::vector<int32_t> tok_;
  std::vector<TokenRef> ref_;
  std::vector<int64_t> out_rows_;  // tokens whose logits the batch wants, in slice order
  std::vector<float> x_, xn_, qkv_, v_, o_, att_, ple_, pg_, rope_cs_, ple_row_;
  GluBuffers glu_;  // the dense FFN's (and the serially run experts') GLU buffers
  // MoE step: router input and logits [T × d], [T × E]; the k routes of each token [T × k];
  // per expert the first grouped row and the count; grouped expert inputs and outputs [T·k × d].
  std::vector<float> moe_in_, moe_logits_, moe_xg_, moe_yg_, moe_y_, moe_tap_;
  std::vector<ExpertRoute> routes_;
  std::vector<int64_t> expert_row0_, expert_rows_, expert_fill_;
  std::vector<int32_t> picked_, picked_lane_;       // the step's picked experts, each one's lane
  std::vector<std::unique_ptr<ExpertLane>> lanes_;  // one per pool thread (MoE models only)
  std::vector<uint8_t> embd_raw_;                   // embd_packed_'s rows of the step, in the file layout
  std::vector<const float*> soft_;                  // per step token: its soft-token row (SeqSlice::embd) or nullptr
  std::vector<std::pair<int32_t, int32_t>> block_;  // per step token: its bidirectional block, or (-1, -1)
  std::vector<kernels::PagedToken> attn_tok_;       // the step's tokens for the paged attention
  kernels::PagedAttention attn_;
  kernels::ActScratch scratch_;
};

}  // namespace sluice::models
