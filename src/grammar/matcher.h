// Runs a compiled grammar over generated tokens: advance, roll back, check one token, or
// compute the mask of allowed tokens for the next step.
//
// Not thread-safe (one matcher per sequence); the CompiledGrammar it reads is shared.
// The state after each accepted token is kept, so rollback(n) returns exactly to the state
// n tokens back (speculative drafts advance tentatively, rejected ones roll back).
//
// uniqueItems (Grammar::unique_close): the matcher also follows the accepted text
// (ItemTracker) and, before a ',' or ']' that would close an item equal to an earlier one,
// drops the parses where that byte closes a unique array's item. Tokens holding such a byte
// are then checked one by one when a mask is filled.
//
// uniqueItems over a finite set of values (Grammar::unique_values): after each byte, the
// parses about to write the first byte of a value the array already holds are dropped, and
// a ',' that would leave no value unwritten is refused, so every live prefix still has an
// unwritten value to become (the mask is never empty). Tokens that start with whitespace
// (they may reach an item's first byte) are checked one by one between items.
//
// End of generation: once the grammar is complete, the vocabulary's end-of-generation ids
// are allowed; accepting one terminates the matcher (nothing more is allowed after it).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/compiled.h"
#include "grammar/item_tracker.h"
#include "grammar/pda.h"

namespace sluice::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> g);

  // Fast path: would `token` be accepted now? (No state change.)
  bool accepts(int32_t token);
  // Advances on `token`; returns false, leaving the state unchanged, if it is not allowed.
  bool advance(int32_t token);
  // Undoes the last n accepted tokens (n <= n_tokens(), else sluice::Error).
  void rollback(size_t n);
  size_t n_tokens() const { return history_.size() - 1; }

  // The grammar has matched a complete string (an end-of-generation token is allowed).
  bool is_complete() const;
  // Complete, and nothing but an end-of-generation token may follow (the value is closed).
  bool only_end() const;
  // An end-of-generation token was accepted: the sequence is finished.
  bool is_terminated() const { return history_.back() == kTerminated; }

  // Writes the allowed-token bitset (bit id of word id/64) for the next token.
  // mask.size() must be vocab().mask_words().
  void fill_mask(std::span<uint64_t> mask);

  // Opaque id of the current state, equal for equal states (tests compare rollbacks).
  uint32_t state_id() const { return history_.back(); }
  const CompiledGrammar& compiled() const { return *g_; }

 private:
  static constexpr uint32_t kTerminated = UINT32_MAX;
  uint32_t next_state(int32_t token, ItemTracker* track = nullptr);
  uint32_t step_checked(uint32_t state, std::string_view piece, ItemTracker* track);
  void drop_duplicates(std::span<uint64_t> mask);
  uint32_t drop_written_values(uint32_t state, const ItemTracker& t);
  uint32_t drop_last_comma(uint32_t state, const ItemTracker& t);
  void apply_fixed(const PositionMask& m, std::span<uint64_t> mask);
  void add_dependent(uint32_t stack, const PositionMask& m, std::span<uint64_t> mask);

  std::shared_ptr<const CompiledGrammar> g_;
  Pda pda_;
  std::vector<uint32_t> history_;  // state after 0, 1, ... accepted tokens
  std::vector<uint32_t> stacks_;   // the current state's stacks, copied per mask
  std::vector<uint32_t> done_;     // positions whose fixed part is in the mask already
  std::vector<uint64_t> tmp_;
  std::vector<uint32_t> walk_;  // per-depth states of the dependent-token walk
  // uniqueItems only: per position, whether it is in Grammar::unique_close; the accepted
  // text (for rollback) and its length after each token; the tracker over that text.
  std::vector<uint8_t> unique_close_;
  bool tracked_ = false;  // the grammar has unique arrays: the text is followed
  // Grammar::unique_values per position: the value whose literal starts there, as
  // group << 32 | index (-1: none); the group whose ',' is there (-1: none).
  std::vector<int64_t> value_first_;
  std::vector<int32_t> value_comma_;
  std::string text_;
  std::vector<size_t> text_len_;
  ItemTracker track_;
};

}  // namespace sluice::grammar
