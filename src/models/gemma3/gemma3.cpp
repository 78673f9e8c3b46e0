// Gemma 3 from GGUF (gemma3.md §3). Norm weights already hold HF's 1 + w (the converter
// folds it in), so they are used as stored. No V-norm, no PLE, no layer scalar, no KV
// sharing; attention scale 1/sqrt(head_dim).
#include <cmath>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/gemma/gemma_model.h"

namespace sluice::models {

std::unique_ptr<Model> load_gemma3(const gguf::GgufFile& f, const LoadOptions& opt) {
  const std::string a = "gemma3.";
  ModelSpec s = read_gemma_common(f, "gemma3", 8192);
  const auto n_ff = f.get_uint_per_layer(a + "feed_forward_length", s.n_layer, 1 << 20);
  const auto n_head = f.get_uint_per_layer(a + "attention.head_count", s.n_layer, 4096);
  const auto n_head_kv = f.get_uint_per_layer(a + "attention.head_count_kv", s.n_layer, 4096);
  const int32_t window = static_cast<int32_t>(f.get_uint_or(a + "attention.sliding_window", 0, INT32_MAX));
  const float base = static_cast<float>(f.get_float_or(a + "rope.freq_base", 1e6));
  const float base_swa = static_cast<float>(f.get_float_or(a + "rope.freq_base_swa", 10000.0));
  float global_scale = 1.0f;
  if (f.get_string_or(a + "rope.scaling.type", "none") == "linear")
    global_scale = 1.0f / static_cast<float>(f.get_float(a + "rope.scaling.factor"));

  // Which layers slide: a bool array, a period (layer l slides iff l % period < period - 1),
  // or llama.cpp's hard-coded period of 6 (gemma3.md §3.2). No window key: all global.
  std::vector<bool> sliding(s.n_layer, false);
  if (window > 0) {
    const gguf::KeyValue* pat = f.find(a + "attention.sliding_window_pattern");
    if (pat && pat->type == gguf::ValueType::ARRAY) {
      const auto& arr = f.get_array(a + "attention.sliding_window_pattern", gguf::ValueType::BOOL);
      if (arr.count != static_cast<uint64_t>(s.n_layer))
        fail("%s: sliding_window_pattern has %llu entries for %d layers", f.name().c_str(),
             static_cast<unsigned long long>(arr.count), s.n_layer);
      for (int l = 0; l < s.n_layer; ++l) sliding[l] = arr.data[l] != 0;
    } else {
      const uint64_t period = pat ? f.get_uint(a + "attention.sliding_window_pattern", 4096) : 6;
      for (int l = 0; l < s.n_layer; ++l) sliding[l] = period > 0 && (static_cast<uint64_t>(l) % period) < period - 1;
    }
  }

  const int32_t head_dim_default = static_cast<int32_t>(s.n_embd / std::max<uint64_t>(1, n_head[0]));
  const int32_t head_dim = static_cast<int32_t>(f.get_uint_or(a + "attention.key_length", head_dim_default, 4096));
  if (f.get_uint_or(a + "attention.value_length", head_dim, 4096) != static_cast<uint64_t>(head_dim))
    fail("%s: value_length must equal key_length", f.name().c_str());
  // llama.cpp: 1/sqrt(key_length), except the 27B (62 layers) which uses n_embd / n_head.
  const float scale = s.n_layer == 62 ? 1.0f / std::sqrt(static_cast<float>(s.n_embd) / n_head[0])
                                      : 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int l = 0; l < s.n_layer; ++l) {
    LayerSpec ls;
    ls.n_head = static_cast<int32_t>(n_head[l]);
    ls.n_head_kv = static_cast<int32_t>(n_head_kv[l]);
    if (ls.n_head_kv == 0 || ls.n_head % ls.n_head_kv != 0)
      fail("%s: layer %d has %d query heads and %d KV heads", f.name().c_str(), l, ls.n_head, ls.n_head_kv);
    ls.head_dim = head_dim;
    ls.n_ff = static_cast<int32_t>(n_ff[l]);
    ls.window = sliding[l] ? window : 0;
    ls.rope_base = sliding[l] ? base_swa : base;
    ls.rope_scale = sliding[l] ? 1.0f : global_scale;
    ls.n_rot = static_cast<int32_t>(f.get_uint_or(a + "rope.dimension_count", head_dim, 4096));
    ls.kv_source = l;
    ls.attn_scale = scale;
    s.layers.push_back(ls);
  }
  if (opt.adjust_spec) opt.adjust_spec(s);
  assign_kv_groups(s);

  WeightBinder b(f);
  GemmaWeights w;
  const gguf::TensorInfo& te = f.tensor("token_embd.weight");
  s.n_vocab = static_cast<int32_t>(te.ne[1]);
  w.tok_embd = b.matrix("token_embd.weight", s.n_embd, s.n_vocab);
  w.lm_head = b.has("output.weight") ? b.matrix("output.weight", s.n_embd, s.n_vocab) : w.tok_embd;
  w.output_norm = b.vector_f32("output_norm.weight", s.n_embd);
  for (int l = 0; l < s.n_layer; ++l) w.layers.push_back(bind_gemma_layer(b, s, l));
  w.release = b.release_pages();
  return make_gemma_model(std::move(s), std::move(w), opt);
}

}  // namespace sluice::models
