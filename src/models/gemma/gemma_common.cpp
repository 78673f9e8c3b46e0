#include <cmath>
#include <string>
#include <tuple>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/gemma/gemma_model.h"

namespace sluice::models {

ModelSpec read_gemma_common(const gguf::GgufFile& f, const std::string& arch, int64_t default_ctx) {
  const std::string a = arch + ".";
  ModelSpec s;
  s.arch = arch;
  s.name = std::string(f.get_string_or("general.name", arch));
  s.n_layer = static_cast<int32_t>(f.get_uint(a + "block_count", 4096));
  s.n_embd = static_cast<int32_t>(f.get_uint(a + "embedding_length", 1 << 20));
  s.n_ctx_train = static_cast<int32_t>(f.get_uint_or(a + "context_length", default_ctx, INT32_MAX));
  s.eps = static_cast<float>(f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-6));
  s.embed_scale = std::sqrt(static_cast<float>(s.n_embd));
  s.final_softcap = static_cast<float>(f.get_float_or(a + "final_logit_softcapping", 0.0));
  return s;
}

void assign_kv_groups(ModelSpec& spec) {
  spec.kv_groups.clear();
  std::vector<std::tuple<int32_t, int32_t, int32_t>> keys;  // (window, kv heads, head dim)
  for (LayerSpec& ls : spec.layers) {
    if (!ls.has_kv) continue;
    const auto key = std::make_tuple(ls.window, ls.n_head_kv, ls.head_dim);
    size_t g = 0;
    while (g < keys.size() && keys[g] != key) ++g;
    if (g == keys.size()) {
      if (g >= static_cast<size_t>(kMaxKvGroups)) fail("model needs more than %d KV layer groups", kMaxKvGroups);
      keys.push_back(key);
      spec.kv_groups.push_back({0, ls.n_head_kv, ls.head_dim, ls.window});
    }
    ls.kv_group = static_cast<int32_t>(g);
    ls.kv_index = spec.kv_groups[g].n_layers++;
  }
  for (size_t il = 0; il < spec.layers.size(); ++il) {
    LayerSpec& ls = spec.layers[il];
    if (ls.has_kv) continue;
    const LayerSpec& src = spec.layers[ls.kv_source];
    if (!src.has_kv || src.head_dim != ls.head_dim || src.n_head_kv != ls.n_head_kv || src.window != ls.window)
      fail("layer %zu cannot read the K/V of layer %d: different attention shape", il, ls.kv_source);
    ls.kv_group = src.kv_group;
    ls.kv_index = src.kv_index;
  }
}

GemmaLayerWeights bind_gemma_layer(const WeightBinder& b, const ModelSpec& spec, int il) {
  return bind_gemma_layer(b, spec.n_embd, spec.layers[il], il);
}

GemmaLayerWeights bind_gemma_layer(const WeightBinder& b, int64_t n_embd, const LayerSpec& ls, int il) {
  const int64_t d = n_embd, hd = ls.head_dim, qw = int64_t(ls.n_head) * hd, kvw = int64_t(ls.n_head_kv) * hd;
  const std::string p = "blk." + std::to_string(il) + ".";
  GemmaLayerWeights w;
  w.attn_norm = b.vector_f32(p + "attn_norm.weight", d);
  w.wq = b.matrix(p + "attn_q.weight", d, qw);
  w.q_norm = b.vector_f32(p + "attn_q_norm.weight", hd);
  if (ls.has_kv) {
    w.wk = b.matrix(p + "attn_k.weight", d, kvw);
    if (!ls.k_eq_v) w.wv = b.matrix(p + "attn_v.weight", d, kvw);
    w.k_norm = b.vector_f32(p + "attn_k_norm.weight", hd);
  }
  w.wo = b.matrix(p + "attn_output.weight", qw, d);
  w.post_attn_norm = b.vector_f32(p + "post_attention_norm.weight", d);
  w.ffn_norm = b.vector_f32(p + "ffn_norm.weight", d);
  w.gate = b.matrix(p + "ffn_gate.weight", d, ls.n_ff);
  w.up = b.matrix(p + "ffn_up.weight", d, ls.n_ff);
  w.down = b.matrix(p + "ffn_down.weight", ls.n_ff, d);
  w.post_ffw_norm = b.vector_f32(p + "post_ffw_norm.weight", d);
  return w;
}

}  // namespace sluice::models
