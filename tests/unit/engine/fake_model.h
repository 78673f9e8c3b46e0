// A model with no weights, for scheduler and block-manager tests (docs/conventions.md §6.3).
//
// forward() writes every new token and its position into the KV cache as the K row of layer
// 0 of each group, then, for each query that wants logits, reads back every key the query
// can see (all earlier positions for a global group, the window for a sliding one). A key
// that holds the wrong position counts as an error. The logits peak at a token derived from
// the tokens read back, so a wrong block table, a bad prefix-cache hit or a reused block
// changes what the model generates — and `reference_next` computes the same function from
// the plain token list, without any cache, as the oracle.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "models/model.h"

namespace sluice::test {

class FakeModel : public models::Model {
 public:
  FakeModel(int32_t n_vocab, std::vector<KvGroupSpec> groups, int32_t n_ctx = 4096);

  const models::ModelSpec& spec() const override { return spec_; }
  void forward(const models::ForwardBatch& batch, KvCache& kv, float* logits) override;

  // The token id the logits peak at after `tokens` (the oracle, no cache).
  int32_t reference_next(const std::vector<int32_t>& tokens) const;
  // Greedy continuation of `prompt` by the oracle, n tokens.
  std::vector<int32_t> reference_greedy(std::vector<int32_t> prompt, int n) const;
  // The logits row the model writes after `tokens`.
  std::vector<float> reference_logits(const std::vector<int32_t>& tokens) const;

  std::chrono::microseconds delay{0};            // per forward(), to make steps take time
  std::chrono::microseconds delay_per_token{0};  // per token of a forward(): long prefill steps
  int64_t throw_on_call = -1;                    // this forward() call (0-based) throws: a failed step
  int64_t errors = 0;                            // keys that held the wrong position, missing blocks
  std::vector<int64_t> tokens_per_call;          // one entry per forward()
  std::vector<int64_t> seqs_per_call;
  int64_t tokens_computed() const;

 private:
  void fill_row(int32_t target, float* row) const;
  models::ModelSpec spec_;
};

// Tokens 0..n-1 of a deterministic pseudo-random prompt.
std::vector<int32_t> make_prompt(int n, int32_t n_vocab, uint64_t seed);

}  // namespace sluice::test
