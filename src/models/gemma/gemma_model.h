// The Gemma decoder family (Gemma 3, Gemma 4) as one forward pass that branches only on
// ModelSpec / LayerSpec fields. Architecture files (gemma3/, gemma4/) turn GGUF metadata
// and tensors into a spec and bound weights; this file runs them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "tensor/weights.h"

namespace sluice::models {

// The routed experts of a mixture-of-experts layer (gemma4.md §2.9): E experts of width f over
// n_embd d. Expert matrices are views of the file's [cols, rows, E] tensors, one per expert.
struct GemmaExpertWeights {
  Mat router;                                                       // ffn_gate_inp [d -> E]
  std::vector<float> router_scale;                                  // ffn_gate_inp.scale [d]
  std::vector<float> expert_scale;                                  // ffn_down_exps.scale [E]
  std::vector<float> pre_norm, post_norm_dense, post_norm_experts;  // pre_ffw_norm_2, post_ffw_norm_1/_2 [d]
  std::vector<Mat> gate, up, down;                                  // per expert: [d -> f], [d -> f], [f -> d]
};

struct GemmaLayerWeights {
  std::vector<float> attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffw_norm;
  Mat wq, wk, wv, wo;  // wk/wv empty when the layer reads shared K/V; wv when k_eq_v
  Mat gate, up, down;
  Mat inp_gate, proj;            // PLE (Gemma 4)
  std::vector<float> post_norm;  // PLE post-norm
  float out_scale = 1.0f;        // Gemma 4 layer scalar (1 when absent)
  GemmaExpertWeights moe;        // MoE layers only (LayerSpec::n_expert > 0)
};

struct GemmaWeights {
  Mat tok_embd;  // [n_embd, n_vocab]
  Mat lm_head;   // output.weight, or tok_embd when tied
  std::vector<float> output_norm;
  std::vector<float> rope_freqs;     // Gemma 4 proportional RoPE divisors (may be empty)
  Mat ple_tok;                       // [n_layer·ple, n_vocab]
  Mat ple_model_proj;                // [n_embd, n_layer·ple]
  std::vector<float> ple_proj_norm;  // [ple]
  std::vector<GemmaLayerWeights> layers;
  // Told the file bytes of each matrix once it is repacked, so the file's pages of it leave
  // memory as the load goes (WeightBinder::release_pages): the weights are held once, and the
  // load never holds two copies of more than a slab (docs/architecture.md). Empty: kept.
  ReleasePages release;
};

// The hyper-parameters every Gemma file has under "<arch>.": layers, width, context,
// epsilon, embedding scale sqrt(n_embd), optional final softcap.
ModelSpec read_gemma_common(const gguf::GgufFile& f, const std::string& arch, int64_t default_ctx);

// Fills kv_group / kv_index of every layer and spec.kv_groups: KV-owning layers are grouped
// by (window, KV heads, head dim); layers without K/V take their source layer's slot.
void assign_kv_groups(ModelSpec& spec);

// Binds the tensors every Gemma layer has (norms, q/k/v/o, FFN); arch files add the rest.
GemmaLayerWeights bind_gemma_layer(const WeightBinder& b, const ModelSpec& spec, int il);

// The same for a layer of width n_embd described by ls (models without a ModelSpec).
GemmaLayerWeights bind_gemma_layer(const WeightBinder& b, int64_t n_embd, const LayerSpec& ls, int il);

// Per-layer shapes of a Gemma 4 file's decoder layers (gemma4.md §1), keys under `a` ("<arch>."):
// heads, head dim, FFN width, window (sliding_window, default max_window, on sliding layers),
// RoPE base and width, proportional RoPE on global layers when the file has rope_freqs.
struct Gemma4Layers {
  std::vector<LayerSpec> layers;  // the fields above set; K/V sharing and scales left at defaults
  std::vector<bool> swa;          // [n_layer] sliding-window layer
  int32_t rot_full = 0;           // rotary width of global layers
  bool has_rope_freqs = false;
};
Gemma4Layers read_gemma4_layers(const gguf::GgufFile& f, const std::string& a, int32_t n_layer, int32_t max_window);

// Gemma 4 MoE layers (gemma4_moe.cpp): the expert counts of the file's keys into every layer
// of `spec` (none when the file has no expert_count), and the expert tensors of layer il.
void read_gemma4_experts(const gguf::GgufFile& f, const std::string& a, ModelSpec& spec);
GemmaExpertWeights bind_gemma4_experts(const gguf::GgufFile& f, const WeightBinder& b, const ModelSpec& spec, int il);

std::unique_ptr<Model> make_gemma_model(ModelSpec spec, GemmaWeights w, const LoadOptions& opt);

// Architecture entry points (registry.cpp).
std::unique_ptr<Model> load_gemma3(const gguf::GgufFile& f, const LoadOptions& opt);
std::unique_ptr<Model> load_gemma4(const gguf::GgufFile& f, const LoadOptions& opt);

}  // namespace sluice::models
