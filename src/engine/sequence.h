// The engine's state for one request: its tokens (prompt, then generated), how many of them
// have K/V in the cache (n_computed), its blocks, its sampler, and its lifecycle.
//
// The scheduler only ever asks "how many tokens does this sequence still need computed":
// n_tokens() - n_computed. A prefix-cache hit raises n_computed without compute; a
// preemption drops it to 0 (blocks freed, recomputed later, output so far kept); drafts are
// appended for one step and the rejected ones removed again (Scheduler::accept).
//
// Speculation runs one way: after a step, the engine's proposer writes each decoding
// sequence's `proposal` (EngineCore::propose, from the step's sampled tokens and hidden rows);
// the next schedule() takes a prefix of it, or none. A proposer that remembers something per
// sequence (an n-gram index, a draft model's K/V) keeps it in `proposer`, owned here so that it
// goes with the sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/request.h"
#include "grammar/matcher.h"
#include "kv/block_manager.h"
#include "sampling/sampler.h"
#include "spec/policy.h"

namespace sluice::engine {

enum class SeqState : uint8_t { kWaiting, kRunning, kFinished };

// Where a proposal's drafts were copied from: the prompt, or the sequence's own output
// (self-repetition) for a copying proposer (n-gram lookup); kOther for proposers that do not copy.
enum class DraftOrigin : uint8_t { kOther, kPrompt, kOutput };

// The drafts proposed to follow a sequence's tokens.
struct Proposal {
  std::vector<int32_t> tokens;
  DraftOrigin origin = DraftOrigin::kOther;
  int32_t for_n_tokens = -1;  // the token count it continues; at any other count it is stale
  bool cheap = false;         // made by a lookup: may be scored unverified (spec::ShadowDraft)
  void clear() {
    tokens.clear();
    origin = DraftOrigin::kOther;
    for_n_tokens = -1;
    cheap = false;
  }
};

// A proposer's memory of one sequence (BatchProposer::make_state). Destroyed when the sequence
// finishes or is aborted; reset() when it is preempted (its tokens are recomputed later).
class ProposerState {
 public:
  virtual ~ProposerState() = default;
  virtual void reset() = 0;
};

struct Sequence {
  Sequence(EngineRequest r, int32_t n_vocab, uint64_t arrival_order)
      : req(std::move(r)), tokens(req.prompt), sampler(req.sampling, n_vocab), arrival(arrival_order) {}

  EngineRequest req;
  std::vector<int32_t> tokens;  // prompt + generated; the last one may not be computed yet
  int32_t n_computed = 0;       // positions [0, n_computed) have K/V in the cache
  int32_t n_generated = 0;
  int32_t n_cached = 0;  // prompt positions the first admission took from the cache
  bool admitted_once = false;
  int32_t n_logits_sent = 0;  // all_logits: positions whose rows were reported
  SeqBlocks blocks;
  // Soft tokens (images): the prompt as the prefix cache hashes it (media_keys.h). Empty
  // without soft tokens: the ids themselves.
  std::vector<int32_t> keyed_prompt;
  Sampler sampler;                          // private seeded stream: same seed, same tokens
  std::unique_ptr<ProposerState> proposer;  // null: the proposer keeps nothing per sequence
  Proposal proposal;
  // The armed grammar constraint (req.constraint) over the tokens generated since it armed;
  // null while the sequence runs free (before the trigger, or disarmed in lazy mode).
  std::unique_ptr<grammar::Matcher> matcher;
  spec::AcceptanceEstimate acceptance;    // recent acceptance, for the adaptive draft length
  spec::ShadowDraft shadow;               // a proposal scored but not verified (policy.h)
  int32_t n_drafted = 0, n_accepted = 0;  // drafts verified, of which kept (all steps)
  uint64_t arrival;                       // admission order: higher = newer
  SeqState state = SeqState::kWaiting;

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_prompt() const { return static_cast<int32_t>(req.prompt.size()); }
  int32_t n_pending() const { return n_tokens() - n_computed; }
};

}  // namespace sluice::engine
