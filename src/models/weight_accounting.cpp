#include "models/weight_accounting.h"

#include <string_view>

#include "gguf/reader.h"

namespace sluice::models {

const char* weight_group_name(WeightGroup g) {
  switch (g) {
    case WeightGroup::kAttnQKV: return "attn q|k|v";
    case WeightGroup::kAttnOutput: return "attn output";
    case WeightGroup::kFfnGateUp: return "ffn gate|up";
    case WeightGroup::kFfnDown: return "ffn down";
    case WeightGroup::kFfnExperts: return "ffn experts (k of E)";
    case WeightGroup::kLmHead: return "lm_head";
    case WeightGroup::kEmbeddingRows: return "embedding rows";
    case WeightGroup::kPle: return "per-layer embedding";
    case WeightGroup::kSmall: return "norms and small";
    case WeightGroup::kUnused: return "unused";
  }
  return "?";
}

uint64_t StreamAccount::group_bytes(WeightGroup g) const {
  uint64_t s = 0;
  for (const TensorAccount& t : tensors)
    if (t.group == g) s += t.streamed_bytes;
  return s;
}

namespace {

// "blk.12.attn_q.weight" -> layer 12 and "attn_q.weight"; -1 for global tensors.
int layer_of(std::string_view name, std::string_view* rest) {
  if (name.substr(0, 4) != "blk.") return -1;
  size_t i = 4;
  int l = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && l < 1000000) l = l * 10 + (name[i++] - '0');
  if (i == 4 || i >= name.size() || name[i] != '.') return -1;
  *rest = name.substr(i + 1);
  return l;
}

WeightGroup layer_group(std::string_view rest) {
  if (rest.starts_with("attn_q.") || rest.starts_with("attn_k.") || rest.starts_with("attn_v.") ||
      rest.starts_with("attn_qkv."))
    return WeightGroup::kAttnQKV;
  if (rest.starts_with("attn_output.")) return WeightGroup::kAttnOutput;
  if (rest.starts_with("ffn_gate_up_exps.") || rest.starts_with("ffn_gate_exps.") || rest.starts_with("ffn_up_exps.") ||
      rest.starts_with("ffn_down_exps.weight"))
    return WeightGroup::kFfnExperts;
  if (rest.starts_with("ffn_gate.") || rest.starts_with("ffn_up.") || rest.starts_with("ffn_gate_inp.weight"))
    return WeightGroup::kFfnGateUp;
  if (rest.starts_with("ffn_down.")) return WeightGroup::kFfnDown;
  if (rest.starts_with("inp_gate.") || rest.starts_with("proj.")) return WeightGroup::kPle;
  return WeightGroup::kSmall;
}

}  // namespace

StreamAccount account_decode_stream(const gguf::GgufFile& f) {
  StreamAccount acc;
  const std::string arch(f.get_string_or("general.architecture", ""));
  // Gemma 4: layers >= n_layer - shared_kv_layers read another layer's K/V cache.
  uint64_t first_shared = UINT64_MAX;
  if (arch == "gemma4" && f.has("gemma4.block_count")) {
    const uint64_t n_layer = f.get_uint("gemma4.block_count", 1u << 16);
    const uint64_t shared = f.get_uint_or("gemma4.attention.shared_kv_layers", 0, n_layer);
    first_shared = n_layer - shared;
  }
  const bool tied = f.find_tensor("output.weight") == nullptr;
  if (!arch.empty() && f.has(arch + ".expert_count")) {
    acc.expert_count = f.get_uint(arch + ".expert_count", 1u << 16);
    acc.expert_used = f.get_uint_or(arch + ".expert_used_count", acc.expert_count, acc.expert_count);
  }

  for (const gguf::TensorInfo& t : f.tensors()) {
    TensorAccount a{t.name, WeightGroup::kSmall, t.type, t.nbytes, t.nbytes};
    std::string_view rest;
    const int layer = layer_of(t.name, &rest);
    if (t.name == "token_embd.weight") {
      // Tied: the lm_head streams the whole table (the embedding row is then in cache).
      a.group = tied ? WeightGroup::kLmHead : WeightGroup::kEmbeddingRows;
      a.streamed_bytes = tied ? t.nbytes : t.row_bytes();
    } else if (t.name == "output.weight") {
      a.group = WeightGroup::kLmHead;
    } else if (t.name == "per_layer_token_embd.weight") {
      a.group = WeightGroup::kEmbeddingRows;
      a.streamed_bytes = t.row_bytes();
    } else if (t.name == "per_layer_model_proj.weight") {
      a.group = WeightGroup::kPle;
    } else if (layer >= 0) {
      a.group = layer_group(rest);
      const bool shared = static_cast<uint64_t>(layer) >= first_shared;
      if (shared && (rest.starts_with("attn_k.") || rest.starts_with("attn_v.") || rest.starts_with("attn_k_norm."))) {
        a.group = WeightGroup::kUnused;
        a.streamed_bytes = 0;
      }
      if (a.group == WeightGroup::kFfnExperts) {
        acc.expert_file_bytes += t.nbytes;
        if (acc.expert_count > 0) a.streamed_bytes = t.nbytes / acc.expert_count * acc.expert_used;
      }
    }
    acc.streamed_bytes += a.streamed_bytes;
    acc.tensors.push_back(std::move(a));
  }
  return acc;
}

}  // namespace sluice::models
