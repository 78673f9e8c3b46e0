// Speculative decoding's proposers. A Drafter holds one sequence's drafting state: it sees the
// sequence's tokens as they become final (`observe`: the prompt, then each verified run) and
// proposes up to K tokens that might follow. The target model verifies them in one
// (K+1)-token step (src/spec/verify.h) and the accepted ones are observed in turn.
//
// Deterministic drafters (n-gram lookup, a draft model decoding greedily) return tokens only;
// their draft distribution is a point mass. Sampling drafters (a draft model sampling) also
// return, per token, the processed distribution q it was drawn from, which the rejection rule
// needs. A model drafter keeps its per-sequence state here too (how many of its KV positions
// are valid, to roll back with `truncate`); its forward runs batched inside the engine step,
// which fills the Draft.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"

namespace sluice::spec {

// One proposal: tokens d1 .. dK, and for sampling drafters the distribution of each.
class Draft {
 public:
  void clear();
  void push(int32_t token);                                // a deterministic draft
  void push(int32_t token, std::span<const TokenProb> q);  // a sampled draft and its q
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool empty() const { return tokens_.empty(); }
  std::span<const int32_t> tokens() const { return tokens_; }
  // True when every token carries its q (sampling drafters); false: point masses.
  bool has_q() const { return !tokens_.empty() && q_begin_.size() == tokens_.size() + 1; }
  std::span<const TokenProb> q(int32_t i) const;

  // Where the proposal came from, for statistics: an n-gram drafter's copy source (the index
  // of the first copied token in the sequence), -1 otherwise.
  int64_t source = -1;

 private:
  std::vector<int32_t> tokens_;
  std::vector<TokenProb> q_;       // every q, one after another
  std::vector<uint32_t> q_begin_;  // q(i) = q_[q_begin_[i] .. q_begin_[i + 1])
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Tokens appended to the sequence (the prompt first, then each accepted run).
  virtual void observe(std::span<const int32_t> tokens) = 0;
  // Up to max_k tokens to follow the sequence observed so far (out is cleared first; none when
  // the drafter has nothing to offer).
  virtual void propose(int32_t max_k, Draft& out) = 0;
  // The sequence is now its first n_tokens tokens (a rollback or a trimmed stop); n_tokens
  // above the observed count is an error.
  virtual void truncate(int64_t n_tokens) = 0;
  virtual void reset() = 0;
  virtual int64_t n_tokens() const = 0;
  // True when a proposal costs next to nothing (a lookup, no model pass): the scheduler may
  // then take proposals it does not verify, to score them (spec::ShadowDraft).
  virtual bool cheap() const { return false; }
};

}  // namespace sluice::spec
