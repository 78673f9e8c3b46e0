#include "tiny_model.h"

#include <cmath>
#include <cstring>
#include <random>

#include "gguf/writer.h"
#include "quant/quant.h"

namespace sluice::test {

namespace {
using gguf::GgufWriter;
using gguf::ValueType;

struct Gen {
  std::mt19937_64 rng;
  std::vector<uint8_t> f32(size_t n, float scale, float mean = 0.0f) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<uint8_t> out(n * 4);
    for (size_t i = 0; i < n; ++i) {
      const float v = mean + scale * nd(rng);
      std::memcpy(&out[i * 4], &v, 4);
    }
    return out;
  }
};
}  // namespace

std::vector<uint8_t> make_tiny_gguf(const TinyConfig& c) {
  Gen g{std::mt19937_64(c.seed)};
  GgufWriter w;
  const bool g4 = c.arch == "gemma4";
  const std::string a = c.arch + ".";
  w.add_string("general.architecture", c.arch);
  w.add_u32(a + "block_count", c.n_layer);
  w.add_u32(a + "embedding_length", c.n_embd);
  w.add_u32(a + "attention.head_count", c.n_head);
  w.add_u32(a + "attention.head_count_kv", c.n_head_kv);
  w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.add_u32(a + "attention.sliding_window", c.window);
  w.add_f32(a + "rope.freq_base", 1e6f);
  std::vector<int> sliding(c.n_layer), ff(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    sliding[l] = g4 ? (l % 5 != 4) : ((l + 1) % 6 != 0);
    ff[l] = (g4 && c.double_wide && l >= c.n_layer - c.n_shared) ? 2 * c.n_ff : c.n_ff;
  }
  if (g4) {
    std::vector<int32_t> ffa(ff.begin(), ff.end());
    w.add_array(a + "feed_forward_length", ValueType::I32, ffa);
    std::vector<uint8_t> pat(sliding.begin(), sliding.end());
    w.add_array(a + "attention.sliding_window_pattern", ValueType::BOOL, pat);
    w.add_u32(a + "attention.key_length", c.hd_full);
    w.add_u32(a + "attention.value_length", c.hd_full);
    w.add_u32(a + "attention.key_length_swa", c.hd_swa);
    w.add_u32(a + "attention.value_length_swa", c.hd_swa);
    w.add_f32(a + "rope.freq_base_swa", 10000.0f);
    w.add_u32(a + "attention.shared_kv_layers", c.n_shared);
    w.add_u32(a + "embedding_length_per_layer_input", c.ple);
    w.add_f32(a + "final_logit_softcapping", c.softcap);
    if (c.n_expert > 0) w.add_u32(a + "expert_count", c.n_expert);
  } else {
    w.add_u32(a + "feed_forward_length", c.n_ff);
    w.add_u32(a + "attention.key_length", c.hd_swa);
    w.add_u32(a + "attention.value_length", c.hd_swa);
  }

  DType last_type = DType::F32;  // the last tensor add() wrote, for output_copy
  std::vector<uint8_t> last_data;
  auto add = [&](const std::string& name, std::vector<uint64_t> ne, float scale, float mean = 0.0f) {
    if (c.omit.count(name)) return;
    if (name == c.wrong_shape) ne[0] += 1;
    size_t n = 1;
    for (uint64_t x : ne) n *= x;
    std::vector<uint8_t> data = g.f32(n, scale, mean);
    const uint32_t be = dtype_info(c.matrix_type).block_elems;
    if (c.matrix_type != DType::F32 && ne.size() == 2 && ne[0] % be == 0) {
      std::vector<uint8_t> q(dtype_row_bytes(c.matrix_type, ne[0]) * ne[1]);
      quant::quantize_ref(c.matrix_type, reinterpret_cast<const float*>(data.data()), q.data(),
                          static_cast<int64_t>(n));
      last_type = c.matrix_type;
      last_data = q;
      w.add_tensor(name, c.matrix_type, ne, std::move(q));
      return;
    }
    last_type = DType::F32;
    last_data = data;
    w.add_tensor(name, DType::F32, ne, std::move(data));
  };
  const uint64_t d = c.n_embd;
  add("token_embd.weight", {d, uint64_t(c.n_vocab)}, 0.3f);
  if (c.output_copy) w.add_tensor("output.weight", last_type, {d, uint64_t(c.n_vocab)}, last_data);
  add("output_norm.weight", {d}, 0.1f, 1.0f);
  if (g4) {
    const uint64_t LP = uint64_t(c.n_layer) * c.ple;
    add("per_layer_token_embd.weight", {LP, uint64_t(c.n_vocab)}, 0.3f);
    add("per_layer_model_proj.weight", {d, LP}, 0.3f);
    add("per_layer_proj_norm.weight", {uint64_t(c.ple)}, 0.1f, 1.0f);
    // Proportional RoPE: the first quarter of the frequencies rotate, the rest are divided by 1e30.
    std::vector<float> rf(c.hd_full / 2, 1e30f);
    for (int i = 0; i < c.hd_full / 8; ++i) rf[i] = 1.0f;
    if (!c.omit.count("rope_freqs.weight"))
      w.add_tensor("rope_freqs.weight", DType::F32, {uint64_t(c.hd_full / 2)},
                   std::vector<uint8_t>(reinterpret_cast<uint8_t*>(rf.data()),
                                        reinterpret_cast<uint8_t*>(rf.data()) + rf.size() * 4));
  }
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const uint64_t hd = g4 && !sliding[l] ? c.hd_full : c.hd_swa;
    const uint64_t qw = hd * c.n_head, kvw = hd * c.n_head_kv;
    const bool has_kv = !g4 || l < c.n_layer - c.n_shared;
    const float norm_mean = 1.0f;
    add(p + "attn_norm.weight", {d}, 0.1f, norm_mean);
    add(p + "attn_q.weight", {d, qw}, 0.15f);
    add(p + "attn_q_norm.weight", {hd}, 0.1f, norm_mean);
    if (has_kv) {
      add(p + "attn_k.weight", {d, kvw}, 0.15f);
      if (!(g4 && c.k_eq_v && !sliding[l])) add(p + "attn_v.weight", {d, kvw}, 0.15f);
      add(p + "attn_k_norm.weight", {hd}, 0.1f, norm_mean);
    }
    add(p + "attn_output.weight", {qw, d}, 0.15f);
    add(p + "post_attention_norm.weight", {d}, 0.1f, norm_mean);
    add(p + "ffn_norm.weight", {d}, 0.1f, norm_mean);
    add(p + "ffn_gate.weight", {d, uint64_t(ff[l])}, 0.15f);
    add(p + "ffn_up.weight", {d, uint64_t(ff[l])}, 0.15f);
    add(p + "ffn_down.weight", {uint64_t(ff[l]), d}, 0.15f);
    add(p + "post_ffw_norm.weight", {d}, 0.1f, norm_mean);
    if (g4) {
      add(p + "inp_gate.weight", {d, uint64_t(c.ple)}, 0.15f);
      add(p + "proj.weight", {uint64_t(c.ple), d}, 0.15f);
      add(p + "post_norm.weight", {d}, 0.1f, norm_mean);
      add(p + "layer_output_scale.weight", {1}, 0.1f, 0.8f);
    }
  }
  return w.to_bytes();
}

}  // namespace sluice::test
