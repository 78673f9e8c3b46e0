// Gemma 4 from GGUF (gemma4.md §3): sliding/global layers with their own head dims and RoPE,
// KV-shared layers, global layers whose V is their K projection (no attn_v), per-layer
// embeddings, V-norm, layer scalar, proportional RoPE through rope_freqs, final softcap, and the
// mixture-of-experts FFN of 26B-A4B (gemma4_moe.cpp). Norm weights are used as stored (no +1,
// unlike Gemma 3).
#include <cmath>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/gemma/gemma_model.h"

namespace sluice::models {

Gemma4Layers read_gemma4_layers(const gguf::GgufFile& f, const std::string& a, int32_t n_layer, int32_t max_window) {
  const char* fn = f.name().c_str();
  const auto n_ff = f.get_uint_per_layer(a + "feed_forward_length", n_layer, 1 << 20);
  const auto n_head = f.get_uint_per_layer(a + "attention.head_count", n_layer, 4096);
  const auto n_head_kv = f.get_uint_per_layer(a + "attention.head_count_kv", n_layer, 4096);
  const int32_t window = static_cast<int32_t>(f.get_uint(a + "attention.sliding_window", max_window));
  const auto& pattern = f.get_array(a + "attention.sliding_window_pattern", gguf::ValueType::BOOL);
  if (pattern.count != static_cast<uint64_t>(n_layer))
    fail("%s: key '%sattention.sliding_window_pattern' has %llu entries, expected %d", fn, a.c_str(),
         static_cast<unsigned long long>(pattern.count), n_layer);
  const int32_t hd_full = static_cast<int32_t>(f.get_uint(a + "attention.key_length", 4096));
  const int32_t hd_swa = static_cast<int32_t>(f.get_uint(a + "attention.key_length_swa", 4096));
  if (f.get_uint_or(a + "attention.value_length", hd_full, 4096) != static_cast<uint64_t>(hd_full) ||
      f.get_uint_or(a + "attention.value_length_swa", hd_swa, 4096) != static_cast<uint64_t>(hd_swa))
    fail("%s: value_length must equal key_length (also for _swa)", fn);
  Gemma4Layers g;
  g.rot_full = static_cast<int32_t>(f.get_uint_or(a + "rope.dimension_count", hd_full, 4096));
  const int32_t rot_swa = static_cast<int32_t>(f.get_uint_or(a + "rope.dimension_count_swa", hd_swa, 4096));
  const float base = static_cast<float>(f.get_float_or(a + "rope.freq_base", 1e6));
  const float base_swa = static_cast<float>(f.get_float_or(a + "rope.freq_base_swa", 10000.0));
  g.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
  for (int l = 0; l < n_layer; ++l) {
    const bool swa = pattern.data[l] != 0;
    LayerSpec ls;
    ls.n_head = static_cast<int32_t>(n_head[l]);
    ls.n_head_kv = static_cast<int32_t>(n_head_kv[l]);
    if (ls.n_head_kv == 0 || ls.n_head % ls.n_head_kv != 0)
      fail("%s: layer %d has %d query heads and %d KV heads", fn, l, ls.n_head, ls.n_head_kv);
    ls.head_dim = swa ? hd_swa : hd_full;
    ls.n_ff = static_cast<int32_t>(n_ff[l]);
    ls.window = swa ? window : 0;
    ls.rope_base = swa ? base_swa : base;
    ls.n_rot = swa ? rot_swa : g.rot_full;
    ls.rope_freq_factors = !swa && g.has_rope_freqs;
    g.layers.push_back(ls);
    g.swa.push_back(swa);
  }
  return g;
}

std::unique_ptr<Model> load_gemma4(const gguf::GgufFile& f, const LoadOptions& opt) {
  const std::string a = "gemma4.";
  const char* fn = f.name().c_str();
  ModelSpec s = read_gemma_common(f, "gemma4", 131072);
  s.ple_dim = static_cast<int32_t>(f.get_uint_or(a + "embedding_length_per_layer_input", 0, 1 << 16));

  const Gemma4Layers g = read_gemma4_layers(f, a, s.n_layer, INT32_MAX);
  const int32_t n_shared = static_cast<int32_t>(f.get_uint_or(a + "attention.shared_kv_layers", 0, s.n_layer));
  const int32_t first_shared = s.n_layer - n_shared;

  for (int l = 0; l < s.n_layer; ++l) {
    const bool swa = g.swa[l];
    LayerSpec ls = g.layers[l];
    ls.attn_scale = 1.0f;  // QK-norm replaces 1/sqrt(d)
    ls.v_norm = true;
    ls.has_kv = l < first_shared;
    // 31B/26B: global layers have no V projection, V is their raw K projection (gemma4.md §1.3).
    ls.k_eq_v = ls.has_kv && !swa && f.find_tensor("blk." + std::to_string(l) + ".attn_v.weight") == nullptr;
    ls.kv_source = l;
    if (!ls.has_kv) {
      // The last non-shared layer of the same type (gemma4.md §1.2).
      ls.kv_source = -1;
      for (int src = first_shared - 1; src >= 0; --src)
        if (g.swa[src] == swa) {
          ls.kv_source = src;
          break;
        }
      if (ls.kv_source < 0)
        fail("%s: KV-shared layer %d has no earlier %s layer to read from", fn, l, swa ? "sliding" : "global");
    }
    s.layers.push_back(ls);
  }
  read_gemma4_experts(f, a, s);
  if (opt.adjust_spec) opt.adjust_spec(s);
  assign_kv_groups(s);

  WeightBinder b(f);
  GemmaWeights w;
  s.n_vocab = static_cast<int32_t>(f.tensor("token_embd.weight").ne[1]);
  w.tok_embd = b.matrix("token_embd.weight", s.n_embd, s.n_vocab);
  w.lm_head = b.has("output.weight") ? b.matrix("output.weight", s.n_embd, s.n_vocab) : w.tok_embd;
  w.output_norm = b.vector_f32("output_norm.weight", s.n_embd);
  if (g.has_rope_freqs) w.rope_freqs = b.vector_f32("rope_freqs.weight", g.rot_full / 2);
  const int64_t LP = static_cast<int64_t>(s.n_layer) * s.ple_dim;
  if (s.ple_dim > 0) {
    w.ple_tok = b.matrix("per_layer_token_embd.weight", LP, s.n_vocab);
    w.ple_model_proj = b.matrix("per_layer_model_proj.weight", s.n_embd, LP);
    w.ple_proj_norm = b.vector_f32("per_layer_proj_norm.weight", s.ple_dim);
  }
  for (int l = 0; l < s.n_layer; ++l) {
    GemmaLayerWeights lw = bind_gemma_layer(b, s, l);
    const std::string p = "blk." + std::to_string(l) + ".";
    if (s.ple_dim > 0) {
      lw.inp_gate = b.matrix(p + "inp_gate.weight", s.n_embd, s.ple_dim);
      lw.proj = b.matrix(p + "proj.weight", s.ple_dim, s.n_embd);
      lw.post_norm = b.vector_f32(p + "post_norm.weight", s.n_embd);
    }
    if (b.has(p + "layer_output_scale.weight")) lw.out_scale = b.vector_f32(p + "layer_output_scale.weight", 1)[0];
    if (s.layers[l].n_expert > 0) lw.moe = bind_gemma4_experts(f, b, s, l);
    w.layers.push_back(std::move(lw));
  }
  w.release = b.release_pages();
  return make_gemma_model(std::move(s), std::move(w), opt);
}

}  // namespace sluice::models
