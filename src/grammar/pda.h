// The pushdown automaton over bytes that runs a Grammar, with memoized transitions.
//
// A stack is a chain of frames (position, parent) interned in a table, so equal stacks are
// equal ids; stack 0 is the empty stack ("the grammar, or the rule being analysed, is
// done"). Stacks are kept normalised: the top frame's position is a byte class or a token
// terminal, never a rule reference or an end (those are expanded/popped eagerly). A state
// is a sorted set of stacks (the parses still alive), interned too; state 0 is the empty
// set (dead). Both tables only grow, so a state id stays valid for the workspace's life —
// this is what makes rollback exact and cheap.
#pragma once

#include <cstdint>
#include <exception>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace sluice::grammar {

class Pda {
 public:
  // dense: per-state 256-entry transition tables (fast; 1 KiB per state, for the compile-time
  // analysis); otherwise a hash map (for long-lived matchers).
  Pda(const Grammar& g, const Limits& limits, bool dense);

  static constexpr uint32_t kDead = 0;
  static constexpr uint32_t kEmptyStack = 0;
  // Compile-time analysis only (see CompiledGrammar) uses three special frames, with a rule
  // id as their parent: Ended(R), a stack meaning "the analysed instance of R has just
  // ended"; W0(R), the unknown caller below the analysed rule; W1(R), an unknown caller
  // reached after a pop. Stepping past Ended(R) or popping W1(R) continues at every place
  // the grammar refers to R, so a token that dies in all of them dies in every real context.

  struct Frame {
    uint32_t pos, parent;
  };

  // The state holding the expansion of frame (pos, parent) — pos may be any position.
  uint32_t start(uint32_t pos, uint32_t parent);
  // The analysis start for a position: [pos], over the frames every real stack with this top
  // has below it (rules with one call site), over W0 of the first rule with several.
  uint32_t start_local(uint32_t pos);
  // Some stack of the state is still inside the analysed rule instance (or has just ended it).
  bool has_internal(uint32_t state) const { return internal_[state]; }
  // State after consuming one byte / one token terminal.
  uint32_t step(uint32_t state, uint8_t byte) {
    if (dense_) {
      const size_t at = size_t{state} * 256 + byte;
      if (table_[at] == kUnknown) {
        const uint32_t next = compute_step(state, byte);  // may grow table_
        table_[at] = next;
      }
      return table_[at];
    }
    const uint64_t key = uint64_t{state} << 8 | byte;
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    const uint32_t next = compute_step(state, byte);
    memo_.emplace(key, next);
    return next;
  }
  // step() for the compile-time analysis (dense only): a step over the limits is kOverflow,
  // remembered like any transition, instead of an error thrown (and the step recomputed)
  // each time the trie walk meets it again.
  static constexpr uint32_t kOverflow = UINT32_MAX - 1;
  uint32_t try_step(uint32_t state, uint8_t byte) {
    const size_t at = size_t{state} * 256 + byte;
    if (table_[at] == kUnknown) {
      uint32_t next;
      try {
        next = compute_step(state, byte);  // may grow table_
      } catch (const std::exception&) {
        next = kOverflow;
      }
      table_[at] = next;
    }
    return table_[at];
  }
  uint32_t step_token(uint32_t state, int32_t token);
  // The state holding exactly one stack; the union of two states.
  uint32_t single(uint32_t stack);
  uint32_t merge(uint32_t a, uint32_t b);
  // The state without the stacks whose top frame, or the frame below it, is at a flagged
  // position (flag: per position).
  uint32_t without_tops(uint32_t state, const std::vector<uint8_t>& flag);
  // Some stack's top frame, or the frame below it, is at a flagged position.
  bool any_top(uint32_t state, const std::vector<uint8_t>& flag) const {
    auto flagged = [&](uint32_t s) { return s != kEmptyStack && frames_[s].pos < flag.size() && flag[frames_[s].pos]; };
    for (uint32_t s : stacks(state))
      if (flagged(s) || (s != kEmptyStack && flagged(frames_[s].parent))) return true;
    return false;
  }
  // The state without the stacks whose top frame's position p has drop(p).
  template <class Drop>
  uint32_t without_top_if(uint32_t state, Drop drop) {
    std::vector<uint32_t> keep;
    for (uint32_t s : stacks(state))
      if (s == kEmptyStack || !drop(frames_[s].pos)) keep.push_back(s);
    if (keep.size() == stacks(state).size()) return state;
    return intern_state(keep);
  }
  uint32_t step_bytes(uint32_t state, std::string_view bytes) {
    for (unsigned char c : bytes) {
      if (state == kDead) break;
      state = step(state, c);
    }
    return state;
  }

  std::span<const uint32_t> stacks(uint32_t state) const {
    return {stack_pool_.data() + state_off_[state], state_off_[state + 1] - state_off_[state]};
  }
  const Frame& frame(uint32_t stack) const { return frames_[stack]; }
  bool has_empty_stack(uint32_t state) const { return state != kDead && stacks(state)[0] == kEmptyStack; }
  size_t n_states() const { return state_off_.size() - 1; }
  const Grammar& grammar() const { return g_; }

 private:
  static constexpr uint32_t kUnknown = UINT32_MAX;
  uint32_t intern_frame(uint32_t pos, uint32_t parent);
  uint32_t intern_state(std::vector<uint32_t>& stacks);
  void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, int depth);
  uint32_t compute_step(uint32_t state, uint8_t byte);
  void wild_pop(uint32_t rule, std::vector<uint32_t>& out, int depth);
  void find_callers();
  static constexpr uint32_t kWild0 = UINT32_MAX - 1, kWild1 = UINT32_MAX - 2, kEndedPos = UINT32_MAX - 3,
                            kWildEndPos = UINT32_MAX - 4, kRootCaller = UINT32_MAX;

  const Grammar& g_;
  Limits limits_;
  bool dense_;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, uint32_t> frame_ids_;
  std::vector<uint32_t> stack_pool_;
  std::vector<uint32_t> state_off_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> state_ids_;  // hash -> candidate ids
  std::vector<uint32_t> table_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::vector<uint32_t> scratch_;
  std::vector<uint8_t> internal_;                    // per state: has_internal()
  std::vector<uint8_t> bottom_;                      // per frame: 0 real, 1 W0/kEnded, 2 W1
  std::vector<uint32_t> rule_of_;                    // per position (analysis only)
  std::vector<std::vector<uint32_t>> return_sites_;  // per rule: positions after each reference
  std::vector<uint32_t> caller_;                     // per rule: its one non-tail call site, or kNone
  static constexpr uint32_t kNone = UINT32_MAX - 1;
  std::vector<uint32_t> seen_;  // per rule: epoch of the last wild pop
  uint32_t epoch_ = 0;
};

}  // namespace sluice::grammar
