#include "tiny_model.h"

#include <cmath>
#include <cstring>
#include <random>

#include "base/fp16.h"
#include "gguf/writer.h"
#include "quant/blocks.h"
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

// Q4_K has no reference quantizer: blocks of random codes, sub-block scales and mins, with
// d and dmin chosen so the values have about the given scale (quants.md §7).
std::vector<uint8_t> random_q4_k(std::mt19937_64& rng, size_t blocks, float scale) {
  std::vector<uint8_t> out(blocks * sizeof(quant::BlockQ4_K));
  for (size_t b = 0; b < blocks; ++b) {
    quant::BlockQ4_K k;
    for (uint8_t& x : k.scales) x = static_cast<uint8_t>(rng());
    for (uint8_t& x : k.qs) x = static_cast<uint8_t>(rng());
    // value = d·sc·q − dmin·m with q in 0..15 and 6-bit sc, m: centred near 0, spread ~scale
    k.d = f32_to_f16(scale / 150.0f);
    k.dmin = f32_to_f16(scale / 40.0f);
    std::memcpy(&out[b * sizeof k], &k, sizeof k);
  }
  return out;
}

// The MoE tensors of one layer (prefix p, gemma4.md §2.9).
template <class Add>
void add_experts(Add& add, const TinyConfig& c, const std::string& p) {
  const uint64_t d = c.n_embd, E = c.n_expert, f = c.n_ff_exp;
  add(p + "ffn_gate_inp.weight", {d, E}, 0.3f);
  add(p + "ffn_gate_inp.scale", {d}, 0.2f, 1.0f);
  if (c.split_gate_up) {
    add(p + "ffn_gate_exps.weight", {d, f, E}, 0.15f);
    add(p + "ffn_up_exps.weight", {d, f, E}, 0.15f);
  } else {
    add(p + "ffn_gate_up_exps.weight", {d, 2 * f, E}, 0.15f);
  }
  add(p + "ffn_down_exps.weight", {f, d, E}, 0.15f);
  add(p + "ffn_down_exps.scale", {E}, 0.2f, 1.0f);
  add(p + "pre_ffw_norm_2.weight", {d}, 0.1f, 1.0f);
  add(p + "post_ffw_norm_1.weight", {d}, 0.1f, 1.0f);
  add(p + "post_ffw_norm_2.weight", {d}, 0.1f, 1.0f);
}
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
  if (g4 && c.n_head_kv_global > 0) {
    std::vector<int32_t> kv(c.n_layer);
    for (int l = 0; l < c.n_layer; ++l) kv[l] = l % 5 != 4 ? c.n_head_kv : c.n_head_kv_global;
    w.add_array(a + "attention.head_count_kv", ValueType::I32, kv);
  } else {
    w.add_u32(a + "attention.head_count_kv", c.n_head_kv);
  }
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
    if (c.n_expert > 0) {
      w.add_u32(a + "expert_count", c.n_expert);
      w.add_u32(a + "expert_used_count", c.n_expert_used);
      w.add_u32(a + "expert_feed_forward_length", c.n_ff_exp);
    }
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
    if (name == c.wrong_experts) ne[2] -= 1;
    if (name == c.wrong_rows) ne[1] += 32;
    size_t n = 1;
    for (uint64_t x : ne) n *= x;
    std::vector<uint8_t> data = g.f32(n, scale, mean);
    const uint32_t be = dtype_info(c.matrix_type).block_elems;
    if (c.matrix_type == DType::Q4_K && ne.size() >= 2 && ne[0] % be == 0) {
      w.add_tensor(name, DType::Q4_K, ne, random_q4_k(g.rng, n / be, scale));
      return;
    }
    if (c.matrix_type != DType::F32 && ne.size() >= 2 && ne[0] % be == 0) {
      std::vector<uint8_t> q(dtype_row_bytes(c.matrix_type, ne[0]) * (n / ne[0]));
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
  if (g4 && c.ple > 0) {
    const uint64_t LP = uint64_t(c.n_layer) * c.ple;
    add("per_layer_token_embd.weight", {LP, uint64_t(c.n_vocab)}, 0.3f);
    add("per_layer_model_proj.weight", {d, LP}, 0.3f);
    add("per_layer_proj_norm.weight", {uint64_t(c.ple)}, 0.1f, 1.0f);
  }
  if (g4) {
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
    const int kv_heads = g4 && !sliding[l] && c.n_head_kv_global > 0 ? c.n_head_kv_global : c.n_head_kv;
    const uint64_t qw = hd * c.n_head, kvw = hd * kv_heads;
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
    if (g4 && c.n_expert > 0) add_experts(add, c, p);
    if (g4 && c.ple > 0) {
      add(p + "inp_gate.weight", {d, uint64_t(c.ple)}, 0.15f);
      add(p + "proj.weight", {uint64_t(c.ple), d}, 0.15f);
      add(p + "post_norm.weight", {d}, 0.1f, norm_mean);
    }
    if (g4) add(p + "layer_output_scale.weight", {1}, 0.1f, 0.8f);
  }
  return w.to_bytes();
}

TinyConfig tiny_moe_config(TinyConfig c) {
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_shared = 0;
  c.ple = 0;
  c.double_wide = false;
  c.k_eq_v = true;
  c.n_head_kv = 2;
  c.n_head_kv_global = 1;
  return c;
}

}  // namespace sluice::test
