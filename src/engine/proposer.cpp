#include "engine/proposer.h"

#include <algorithm>

namespace sluice::engine {

class NgramProposer::State final : public ProposerState {
 public:
  State(SeqStates<State>& registry, const Sequence& s, const spec::NgramConfig& cfg)
      : drafter(cfg), registry_(registry), seq_(&s) {
    registry_.add(seq_, this);
  }
  ~State() override { registry_.remove(seq_); }
  void reset() override { drafter.reset(); }

  spec::NgramDrafter drafter;

 private:
  SeqStates<State>& registry_;
  const Sequence* seq_;
};

NgramProposer::NgramProposer(const spec::NgramConfig& cfg) : cfg_(cfg) { spec::NgramDrafter check(cfg); }

NgramProposer::~NgramProposer() = default;

std::unique_ptr<ProposerState> NgramProposer::make_state(const Sequence& s) {
  return std::make_unique<State>(states_, s, cfg_);
}

void NgramProposer::propose(std::span<const ProposeSlot> slots) {
  for (const ProposeSlot& slot : slots) {
    Sequence& s = *slot.seq;
    Proposal& p = s.proposal;
    p.clear();
    p.for_n_tokens = s.n_tokens();
    State* st = states_.find(&s);
    if (!st) continue;
    // The tokens are final here, so the index only ever lags behind them: observe what is new.
    // A sequence shorter than what the index saw (a trim) rolls it back first.
    spec::NgramDrafter& d = st->drafter;
    const int64_t n = s.n_tokens();
    if (d.n_tokens() > n) d.truncate(n);
    if (d.n_tokens() < n) d.observe(std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(d.n_tokens())));
    d.propose(slot.k_max, draft_);
    p.tokens.assign(draft_.tokens().begin(), draft_.tokens().end());
    p.cheap = true;
    if (draft_.source >= 0) p.origin = draft_.source < s.n_prompt() ? DraftOrigin::kPrompt : DraftOrigin::kOutput;
  }
}

std::unique_ptr<ProposerState> HookProposer::make_state(const Sequence& s) {
  (void)s;
  return nullptr;
}

void HookProposer::propose(std::span<const ProposeSlot> slots) {
  for (const ProposeSlot& slot : slots) {
    Sequence& s = *slot.seq;
    drafts_.clear();
    hook_(s.req.id, s.tokens, slot.k_max, drafts_);
    Proposal& p = s.proposal;
    p.clear();
    p.for_n_tokens = s.n_tokens();
    p.tokens.assign(drafts_.begin(), drafts_.begin() + std::min<ptrdiff_t>(slot.k_max, std::ssize(drafts_)));
  }
}

}  // namespace sluice::engine
