// Byte accounting: how many weight bytes one decoded token must stream from memory.
// Decoding reads every matrix once per token, so this number divided by the DRAM read
// bandwidth is the floor for ms/token. Rules (in the file's own types):
//   * embedding tables are gathered, not streamed: one row per token
//     (token_embd, per_layer_token_embd);
//   * a tied lm_head (no output.weight) streams token_embd in full, counted once;
//   * tensors the forward never reads are excluded and reported (Gemma 4 KV-shared layers
//     keep attn_k / attn_v / attn_k_norm in real files, but use their source layer's cache);
//   * a mixture-of-experts layer's expert stacks (ffn_gate_up_exps or ffn_gate_exps +
//     ffn_up_exps, ffn_down_exps) count expert_used_count / expert_count of their bytes: the
//     experts one token's router picks (gemma4.md §2.9). A batched step that routes tokens to
//     different experts reads more, up to every expert.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace sluice::gguf {
class GgufFile;
}

namespace sluice::models {

// Where a tensor's bytes go in a decode step; the groups `sluice bench` will time.
enum class WeightGroup {
  kAttnQKV,
  kAttnOutput,
  kFfnGateUp,
  kFfnDown,
  kFfnExperts,
  kLmHead,
  kEmbeddingRows,
  kPle,
  kSmall,
  kUnused,
};
const char* weight_group_name(WeightGroup g);

struct TensorAccount {
  std::string name;
  WeightGroup group;
  DType type;
  uint64_t file_bytes;      // bytes the tensor occupies in the file
  uint64_t streamed_bytes;  // bytes one decoded token reads from it
};

struct StreamAccount {
  std::vector<TensorAccount> tensors;  // file order
  uint64_t streamed_bytes = 0;         // total per decoded token
  // Mixture of experts: experts per layer and per token (0 when dense), and the file bytes of
  // all expert stacks (of which streamed_bytes counts used / count).
  uint64_t expert_count = 0, expert_used = 0, expert_file_bytes = 0;
  uint64_t group_bytes(WeightGroup g) const;
};

StreamAccount account_decode_stream(const gguf::GgufFile& f);

}  // namespace sluice::models
