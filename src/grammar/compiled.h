// A grammar compiled against a vocabulary: the grammar plus, for every byte-class position,
// the tokens it accepts or rejects whatever lies below it on the stack.
//
// Mask algorithm (the idea XGrammar calls context-independent tokens). For a position p,
// walk the vocabulary trie from the stack [p] alone, with the empty stack standing for
// "p's rule instance has ended". A token whose bytes keep a parse alive inside the rule
// (or end exactly where the rule ends) is accepted in every context; one that dies before
// the rule could end is rejected in every context; only a token that outlives the rule's
// end is *dependent*: whether it fits depends on the frames below. The walk runs once per
// position at compile time, sharing prefixes (a dead prefix skips its whole subtree) and
// memoizing byte transitions. At run time a stack with top p contributes p's accepted set
// plus those of p's dependent tokens that the full stack accepts (a second, small trie walk
// over just the dependent tokens). The union over the state's stacks is the mask.
//
// Compile analyses positions in order until Limits::eager_compile_ms is spent; the rest are
// analysed on first use by a mask (under a lock, so a CompiledGrammar stays shareable). A
// grammar with many positions (counted repetition unrolls: `maxLength: 40` is 40 copies of
// the character loop, each a walk over most of the trie) then compiles in bounded time, and
// a request pays only for the positions its output actually reaches.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/background.h"
#include "grammar/grammar.h"
#include "grammar/item_tracker.h"
#include "grammar/vocab.h"

namespace sluice::grammar {

// The tokens a position accepts in every context, in the cheapest of three forms to OR into
// a mask: a list of ids, a list of the byte tokens it does NOT accept, or (large) a bitset.
struct PositionMask {
  bool complement = false;         // `ids` lists the byte tokens NOT accepted
  std::vector<int32_t> ids;        // ascending
  std::vector<uint64_t> bits;      // when not empty: the accepted set (ids unused)
  std::vector<int32_t> dependent;  // trie order
  std::vector<uint16_t> dep_lcp;   // common prefix length with the previous dependent token
};

struct CompileStats {
  double ms = 0;
  size_t positions = 0;        // byte-class positions analysed
  size_t dependent_total = 0;  // sum of dependent-token list lengths, over positions analysed at compile
  size_t states = 0;           // analysis states interned at the end of the compile
  size_t deferred = 0;         // positions left to be analysed on first use
};

class CompiledGrammar {
 public:
  // Throws sluice::Error naming the limit when the analysis exceeds Limits::max_compile_ms.
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocab> vocab, Limits limits = {});
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Grammar& grammar() const { return g_; }
  const TokenVocab& vocab() const { return *vocab_; }
  const Limits& limits() const { return limits_; }
  const CompileStats& stats() const { return stats_; }
  // Mask data of a byte-class position (nullptr for other positions); analyses the
  // position first if the compile deferred it. Thread-safe.
  const PositionMask* position_mask(uint32_t pos) const {
    const int32_t i = mask_index_[pos];
    if (i < 0) return nullptr;
    if (!ready_[i].load(std::memory_order_acquire)) analyse_deferred(static_cast<size_t>(i));
    return &masks_[i];
  }
  // Positions analysed so far (compile plus first uses).
  size_t analysed() const;
  bool fully_analysed() const;
  // Analyses positions the compile deferred, for up to `budget_ms`, on the calling thread: a
  // request's worker does this before the request reaches the engine, so the engine's step
  // (which every stream waits for) meets few positions it must analyse first. Thread-safe;
  // true when none is left.
  bool warm(double budget_ms) const;
  // Bits of every token that has bytes (the base of a complement-form position mask).
  const std::vector<uint64_t>& byte_tokens() const { return byte_tokens_; }

 private:
  void analyse(class Pda& pda, uint32_t pos, PositionMask& out, std::vector<uint8_t>& flag) const;
  void analyse_deferred(size_t index) const;
  void release_workspace() const;

  Grammar g_;
  std::shared_ptr<const TokenVocab> vocab_;
  Limits limits_;
  std::vector<int32_t> mask_index_;
  std::vector<uint32_t> mask_pos_;  // per mask: its position
  // Sized once at construction; a deferred entry is written once under mu_, then published
  // by its ready_ flag.
  mutable std::vector<PositionMask> masks_;
  mutable std::unique_ptr<std::atomic<bool>[]> ready_;
  std::vector<uint64_t> byte_tokens_;
  CompileStats stats_;
  // The analysis workspace, kept while some position is still deferred.
  mutable std::mutex mu_;
  mutable std::unique_ptr<class Pda> pda_;
  mutable std::vector<uint8_t> flag_;
  mutable size_t pending_ = 0;
};

// Compiled grammars by key (e.g. the schema's canonical text + options) for one vocabulary;
// least recently used ones are dropped past `capacity`. Thread-safe. A miss is built, compiled
// and warmed (up to `warm_ms` of CPU) on the cache's low-priority worker while the caller waits.
class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity = 64, Limits limits = {}, double warm_ms = 0)
      : vocab_(std::move(vocab)), capacity_(capacity), limits_(limits), warm_ms_(warm_ms) {}
  std::shared_ptr<const CompiledGrammar> get(const std::string& key, const std::function<Grammar()>& build);
  // CompiledGrammar::warm on the low-priority worker, when some position is still deferred.
  bool warm(const std::shared_ptr<const CompiledGrammar>& g, double budget_ms);
  size_t size() const;
  size_t hits() const { return hits_; }

 private:
  std::shared_ptr<const TokenVocab> vocab_;
  size_t capacity_;
  Limits limits_;
  double warm_ms_;
  LowPriorityWorker worker_;  // declared after what its jobs read: destroyed (joined) first
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  size_t hits_ = 0;
};

}  // namespace sluice::grammar
