// The model interface the engine and tools use. A step runs a batch of sequences, each with
// its new tokens, their positions and its block tables into the paged KV cache; the same call
// serves prefill, chunked prefill, decode, batched decode and multi-token verification.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"

namespace sluice::gguf {
class GgufFile;
}

namespace sluice {
class ThreadPool;
}

namespace sluice::kernels {
struct CpuKernels;
}

namespace sluice::models {

inline constexpr int kMaxKvGroups = 4;

// Per-layer structure, derived from GGUF metadata (never from "is this model size X").
struct LayerSpec {
  int32_t n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
  int32_t window = 0;  // 0: global (full causal) attention; else sliding window
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;         // multiplies positions (1 / linear scaling factor)
  int32_t n_rot = 0;               // rotary width (NeoX pairs (i, i + n_rot/2))
  bool rope_freq_factors = false;  // divide frequencies by rope_freqs (Gemma 4 proportional RoPE)
  bool has_kv = true;              // computes and writes its own K/V
  int32_t kv_source = -1;          // layer whose K/V this layer reads (itself when has_kv)
  int32_t kv_group = -1;           // cache group of kv_source, and its index within the group
  int32_t kv_index = -1;
  float attn_scale = 1.0f;  // multiplies q·k
  bool v_norm = false;      // weightless RMSNorm on V (Gemma 4)
  bool k_eq_v = false;      // no V projection: V is the raw K projection (Gemma 4 31B global layers)
  // Mixture-of-experts FFN beside the dense one (Gemma 4 26B-A4B, gemma4.md §2.9): n_expert
  // experts of width n_ff_exp, n_expert_used of them per token. 0: a dense layer.
  int32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
};

struct ModelSpec {
  std::string arch;
  std::string name;
  int32_t n_layer = 0, n_embd = 0, n_vocab = 0, n_ctx_train = 0;
  float eps = 1e-6f;
  float embed_scale = 1.0f;    // token embedding multiplier (sqrt(n_embd) for Gemma)
  float final_softcap = 0.0f;  // 0: none; else logits = c·tanh(logits / c)
  int32_t ple_dim = 0;         // Gemma 4 per-layer embedding width (0: none)
  std::vector<LayerSpec> layers;
  std::vector<KvGroupSpec> kv_groups;  // cache layout the model needs
};

enum class LogitsWanted { kNone, kLast, kAll };

// One sequence's part of a step: tokens at positions pos0 .. pos0 + n - 1; its block tables
// (one per KV group) back at least positions [0, pos0 + n) where visible.
struct SeqSlice {
  std::span<const int32_t> tokens;
  int32_t pos0 = 0;
  std::span<const BlockId> block_tables[kMaxKvGroups];
  LogitsWanted logits = LogitsWanted::kLast;
  // Soft tokens (images, docs/spec/gemma4.md §9.4): empty, or one entry per token — nullptr
  // for the token's own embedding, else a row of n_embd floats used as the token's embedding
  // as is (no embed_scale); such tokens read the pad row (id 0) of the per-layer table.
  std::span<const float* const> embd;
  // Each contiguous run of soft tokens in `embd` attends to itself bidirectionally on the
  // sliding-window layers (Gemma 4 26B/31B images; full layers stay causal); the run must lie
  // wholly in this slice. false: causal everywhere (E2B/E4B).
  bool embd_blocks = false;
};

struct ForwardBatch {
  std::vector<SeqSlice> seqs;
  // When set: receives the post-final-norm hidden state of every logits row, in the logits'
  // order [n_logit_rows × n_embd] (the state Gemma 4's assistant drafts from, gemma4.md §5).
  float* hidden = nullptr;
  int64_t n_tokens() const;
  int64_t n_logit_rows() const;  // rows forward() writes: per slice 0, 1 or n
};

// Where a step's time goes, for `sluice bench`: the weight-streaming op classes, attention,
// and everything else. A model given a profile adds each op's time (and the weight bytes it
// streamed) to its class; `other` is the rest of the step's wall time.
// kFfnExperts: a MoE layer's routed experts (gate|up and down of the picked ones; gemma4.md §2.9).
enum class OpClass { kFfnGateUp, kFfnDown, kFfnExperts, kAttnQkv, kAttnOutput, kLmHead, kAttention, kOther };
inline constexpr int kOpClassCount = 8;
const char* op_class_name(OpClass c);  // "ffn_gate_up", "ffn_down", "attn_qkv", ...

struct StepProfile {
  double seconds[kOpClassCount] = {};
  uint64_t bytes[kOpClassCount] = {};
  int64_t steps = 0;
  int64_t layer_tokens = 0;  // Σ over steps and layers of the tokens a layer computed
};

// A named activation of a step, for debugging and for the per-layer golden test:
//   "embd" (layer −1)        token embedding · embed_scale            [rows × n_embd]
//   "ple" (−1)               Gemma 4 per-layer inputs                 [rows × n_layer·ple_dim]
//   "attn_out" (layer i)     attention output projection, before its post-norm [rows × n_embd]
//   "ffn_out" (i)            FFN down projection, before its post-norm          [rows × n_embd]
//   "l_out" (i)              the residual stream after layer i                  [rows × n_embd]
//   "result_norm" (−1)       the final norm's output of the rows whose logits are computed
// Rows are the step's tokens in slice order; from the first of the trailing layers that own no
// K/V on, only those whose logits the batch wants (all of them with LogitsWanted::kAll).
struct TapView {
  const char* name;
  int layer;
  const float* data;
  int64_t rows, width;
};
using Tap = std::function<void(const TapView&)>;

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelSpec& spec() const = 0;
  // Runs one step. Writes n_logit_rows() rows of n_vocab floats to `logits`, in slice order.
  virtual void forward(const ForwardBatch& batch, KvCache& kv, float* logits) = 0;
  // Accumulates per-op-class timings of later steps into *p (nullptr: stop). Costs a clock
  // read per op while set.
  virtual void set_profile(StepProfile* p) { (void)p; }
  // Calls `tap` with each TapView of later steps, synchronously (empty: stop). Costs nothing
  // while unset.
  virtual void set_tap(Tap tap) { (void)tap; }
  // Human-readable lines describing the repacked weights (formats, fused matrices, bytes).
  virtual std::vector<std::string> describe_weights() const { return {}; }
  // The memory the repacked weights occupy (resident since the load): `sluice bench` reads it to
  // measure the bus, with no buffer of its own beside the weights. Empty: none.
  virtual std::vector<std::span<const uint8_t>> weight_memory() const { return {}; }
};

// How the (tied or separate) lm_head is held in memory (docs/performance.md has the numbers
// behind the default):
//   kPacked  the file's type, repacked (Q6_K: 6.56 bits/weight) — the default
//   kInt8    Q6_K codes widened to bytes at load (same results, 30% more bytes, no unpacking)
//   kQ4_0    requantized to Q4_0 at load (31% fewer bytes than Q6_K; logits drift, opt-in)
enum class LmHeadFormat { kPacked, kInt8, kQ4_0 };
LmHeadFormat parse_lm_head_format(const std::string& s);  // "packed" | "int8" | "q4_0"

struct LoadOptions {
  ThreadPool* pool = nullptr;  // required
  // The ISA set the model computes with (kernels/cpu_kernels.h); nullptr: the best this CPU
  // runs (or SLUICE_ISA). Tests load the same file once per set to compare them.
  const kernels::CpuKernels* isa = nullptr;
  LmHeadFormat lm_head = LmHeadFormat::kPacked;
  // Called with the spec derived from the file, before weights are bound: for experiments
  // and for tests that switch a feature off to show the golden comparison would catch it.
  std::function<void(ModelSpec&)> adjust_spec;
};

// The registry: picks the architecture from general.architecture. Throws sluice::Error.
std::unique_ptr<Model> load_model(const gguf::GgufFile& f, const LoadOptions& opt);

}  // namespace sluice::models
