// The mixture-of-experts layers of a Gemma 4 file (26B-A4B, gemma4.md §2.9): llama.cpp's keys
// (expert_count, expert_used_count, expert_feed_forward_length) and tensors (ffn_gate_inp and
// its .scale, ffn_gate_up_exps or ffn_gate_exps + ffn_up_exps, ffn_down_exps and its .scale,
// pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2). An inconsistent file fails naming the key
// or tensor at fault.
#include "base/error.h"
#include "gguf/reader.h"
#include "models/gemma/gemma_model.h"
#include "quant/quant.h"

namespace sluice::models {

namespace {

// The E per-expert matrices [cols, rows] of the 3-D tensor `name` = [cols, rows_total, E],
// taking rows [row0, row0 + rows) of each expert's rows_total (a fused gate|up holds gate rows
// first, then up). Each is a view of the file's bytes: expert e starts at row e·rows_total.
std::vector<Mat> expert_views(const gguf::GgufFile& f, const std::string& name, int64_t cols, int64_t rows_total,
                              int64_t row0, int64_t rows, int64_t n_expert, const char* rows_rule) {
  const char* fn = f.name().c_str();
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t)
    fail("%s: missing tensor '%s' (expected shape [%lld, %lld, %lld])", fn, name.c_str(), static_cast<long long>(cols),
         static_cast<long long>(rows_total), static_cast<long long>(n_expert));
  if (t->n_dims != 3 || t->ne[3] != 1 || t->ne[0] != static_cast<uint64_t>(cols))
    fail("%s: tensor '%s' has shape %s, expected [%lld, %lld, %lld] (inputs, rows per expert, experts)", fn,
         name.c_str(), t->shape_string().c_str(), static_cast<long long>(cols), static_cast<long long>(rows_total),
         static_cast<long long>(n_expert));
  if (t->ne[2] != static_cast<uint64_t>(n_expert))
    fail("%s: tensor '%s' has shape %s: its third dimension %llu is not expert_count = %lld", fn, name.c_str(),
         t->shape_string().c_str(), static_cast<unsigned long long>(t->ne[2]), static_cast<long long>(n_expert));
  if (t->ne[1] != static_cast<uint64_t>(rows_total))
    fail("%s: tensor '%s' has shape %s: %llu rows per expert, expected %lld (%s)", fn, name.c_str(),
         t->shape_string().c_str(), static_cast<unsigned long long>(t->ne[1]), static_cast<long long>(rows_total),
         rows_rule);
  if (!quant::traits(t->type))
    fail("%s: tensor '%s' has type %s, which sluice cannot compute with", fn, name.c_str(),
         std::string(dtype_name(t->type)).c_str());
  const uint64_t rb = t->row_bytes();
  std::vector<Mat> out;
  out.reserve(static_cast<size_t>(n_expert));
  for (int64_t e = 0; e < n_expert; ++e) {
    const uint8_t* p = t->data + (static_cast<uint64_t>(e * rows_total + row0)) * rb;
    out.push_back(Mat{name + "[" + std::to_string(e) + "]", t->type, p, cols, rows, rb});
  }
  return out;
}

}  // namespace

void read_gemma4_experts(const gguf::GgufFile& f, const std::string& a, ModelSpec& spec) {
  const uint64_t n_expert = f.get_uint_or(a + "expert_count", 0, 1 << 16);
  if (n_expert == 0) return;
  const char* fn = f.name().c_str();
  const uint64_t used = f.get_uint(a + "expert_used_count", 1 << 16);
  if (used == 0 || used > n_expert)
    fail("%s: key '%sexpert_used_count' = %llu must be between 1 and '%sexpert_count' = %llu", fn, a.c_str(),
         static_cast<unsigned long long>(used), a.c_str(), static_cast<unsigned long long>(n_expert));
  const uint64_t ff = f.get_uint(a + "expert_feed_forward_length", 1 << 20);
  if (ff == 0) fail("%s: key '%sexpert_feed_forward_length' is 0", fn, a.c_str());
  for (LayerSpec& ls : spec.layers) {
    ls.n_expert = static_cast<int32_t>(n_expert);
    ls.n_expert_used = static_cast<int32_t>(used);
    ls.n_ff_exp = static_cast<int32_t>(ff);
  }
}

GemmaExpertWeights bind_gemma4_experts(const gguf::GgufFile& f, const WeightBinder& b, const ModelSpec& spec, int il) {
  const LayerSpec& ls = spec.layers[il];
  const int64_t d = spec.n_embd, E = ls.n_expert, ff = ls.n_ff_exp;
  const std::string p = "blk." + std::to_string(il) + ".";
  GemmaExpertWeights w;
  w.router = b.matrix(p + "ffn_gate_inp.weight", d, E);
  w.router_scale = b.vector_f32(p + "ffn_gate_inp.scale", d);
  w.expert_scale = b.vector_f32(p + "ffn_down_exps.scale", E);
  w.pre_norm = b.vector_f32(p + "pre_ffw_norm_2.weight", d);
  w.post_norm_dense = b.vector_f32(p + "post_ffw_norm_1.weight", d);
  w.post_norm_experts = b.vector_f32(p + "post_ffw_norm_2.weight", d);
  if (b.has(p + "ffn_gate_up_exps.weight")) {
    const std::string n = p + "ffn_gate_up_exps.weight";
    const char* rule = "2 x expert_feed_forward_length: gate rows, then up rows";
    w.gate = expert_views(f, n, d, 2 * ff, 0, ff, E, rule);
    w.up = expert_views(f, n, d, 2 * ff, ff, ff, E, rule);
  } else {
    if (!b.has(p + "ffn_gate_exps.weight") && !b.has(p + "ffn_up_exps.weight"))
      fail(
          "%s: missing tensor '%sffn_gate_up_exps.weight' (or the split '%sffn_gate_exps.weight' and "
          "'%sffn_up_exps.weight') of a layer with expert_count = %lld",
          f.name().c_str(), p.c_str(), p.c_str(), p.c_str(), static_cast<long long>(E));
    const char* rule = "expert_feed_forward_length";
    w.gate = expert_views(f, p + "ffn_gate_exps.weight", d, ff, 0, ff, E, rule);
    w.up = expert_views(f, p + "ffn_up_exps.weight", d, ff, 0, ff, E, rule);
  }
  w.down = expert_views(f, p + "ffn_down_exps.weight", ff, d, 0, d, E, "embedding_length");
  return w;
}

}  // namespace sluice::models
