// Gemma 4's assistant (MTP drafter, gemma4.md §5): a small Q-only Gemma 4 decoder with no K/V
// of its own. One draft step for a batch of sequences: per row the token t, the hidden state
// h [n_embd_target] (the target's post-final-norm state, then the assistant's own h'), the
// constant draft position n (the number of cached target positions) and the sequence's block
// tables into the TARGET's paged KV cache. Its sliding layers read the target's last sliding
// KV-owning layer, its global layers the last global one; the query sees the cached positions
// bidirectionally (0 .. n−1, or the last window+1 of them on sliding layers, as transformers).
//
//   x = pre_projection(concat(E_target[t]·sqrt(d_target), h))          [R × d]
//   layers: x += RMSNorm(o(attn(RoPE(q_norm(q(RMSNorm(x))))))); x += RMSNorm(FFN(RMSNorm(x))); x ·= scalar
//   y = RMSNorm(x; output_norm);  h' = post_projection(y) [R × d_target]
//   full head: logits = E_assistant · y (no softcap)
//   centroid head: top-k of centroids · y; the tokens of those clusters get E·y, all others
//   min(selected) − 1 (per row).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/model.h"

namespace sluice::models {

struct AssistantSpec {
  std::string arch, name;
  int32_t n_layer = 0, n_embd = 0, n_embd_target = 0, n_vocab = 0;
  int32_t n_centroids = 0, centroid_top_k = 0;  // 0: no centroid head in the file
  float eps = 1e-6f;
  std::vector<LayerSpec> layers;  // kv_group / kv_index: the target's cache slot it reads
};

// One sequence's row of a draft step.
struct DraftRow {
  int32_t token = 0;
  const float* hidden = nullptr;  // [n_embd_target]
  int32_t pos = 0;                // cached target positions (>= 1); also the query's RoPE position
  std::span<const BlockId> block_tables[kMaxKvGroups];  // the target's
};

enum class DraftHead { kFull, kCentroid };

// A step's results, row-major over the step's rows. Buffers only grow.
struct DraftStepOut {
  int64_t rows = 0;
  std::vector<float> next_hidden;  // [rows × n_embd_target]
  std::vector<int32_t> argmax;     // [rows]: the greedy draft (first on ties / lowest id)
  std::vector<float> logits;       // kFull: [rows × n_vocab]
  // kCentroid: [rows × n_cand] candidate ids (the top clusters in descending score order,
  // each cluster's ids in its ordering) and their logits; mask[r] = the others' logit.
  int32_t n_cand = 0;
  std::vector<int32_t> cand_ids;
  std::vector<float> cand_logits, mask;
  std::vector<float> centroid_scores;  // kCentroid: [rows × n_centroids]
  // The full-vocabulary logits of row r (kFull: a copy; kCentroid: the masked expansion).
  std::vector<float> expand(int64_t r, int32_t n_vocab) const;
  // The probability softmax(expand(r)) gives argmax[r], without expanding: the centroid
  // head's n_vocab − n_cand masked ids count at the mask logit. `--draft-p-min` reads it.
  double argmax_probability(int64_t r, int32_t n_vocab) const;
};

class Gemma4Assistant {
 public:
  virtual ~Gemma4Assistant() = default;
  virtual const AssistantSpec& spec() const = 0;
  // Binds the target: its token embedding (read from `target_file`, which must outlive this)
  // and the cache slots of its last sliding and global KV-owning layers. Throws sluice::Error
  // when vocabularies, widths or attention shapes differ (naming both values).
  virtual void bind_target(const gguf::GgufFile& target_file, const ModelSpec& target) = 0;
  virtual void step(std::span<const DraftRow> rows, KvCache& target_kv, DraftHead head, DraftStepOut& out) = 0;
};

// Opens an assistant GGUF: its token ordering is an I32 tensor, which the default reader
// refuses (no weight type); the weight binder still rejects I32 wherever it expects weights.
std::unique_ptr<gguf::GgufFile> open_gemma4_assistant_file(const std::string& path);

// Accepts general.architecture "gemma4-assistant" (llama.cpp) or "gemma4_assistant", and the
// tensor aliases of gemma4.md §5. Throws sluice::Error naming the file and the problem.
std::unique_ptr<Gemma4Assistant> load_gemma4_assistant(const gguf::GgufFile& f, const LoadOptions& opt);

}  // namespace sluice::models
