#include "engine/engine_core.h"

#include <algorithm>

#include "base/error.h"
#include "engine/media_keys.h"

namespace sluice::engine {

EngineCore::EngineCore(models::Model& model, KvCache& kv, const EngineConfig& cfg)
    : model_(model),
      cfg_(cfg),
      blocks_(kv, cfg.prefix_caching),
      sched_(cfg.sched, blocks_),
      runner_(model, kv, cfg.sample_pool) {
  if (cfg.spec == SpecMethod::kModel && !cfg.model_proposer)
    fail("engine: speculation by a model without its proposer");
  if (cfg.spec == SpecMethod::kNgram) own_proposer_ = std::make_unique<NgramProposer>(cfg.ngram);  // a bad n fails here
  else if (cfg.spec == SpecMethod::kNone && cfg.sched.draft_hook)
    own_proposer_ = std::make_unique<HookProposer>(cfg.sched.draft_hook);
  proposer_ = cfg.spec == SpecMethod::kModel ? cfg.model_proposer : own_proposer_.get();
  if (cfg.sched.draft_max <= 0) proposer_ = nullptr;
  blocks_.set_event_log(cfg.kv_events);
  if (proposer_) {
    runner_.set_export_hidden(proposer_->wants_hidden());
    blocks_.set_window_margin(proposer_->window_margin());
  }
}

EngineCore::~EngineCore() = default;

std::optional<std::string> EngineCore::check_admissible(int32_t n_prompt) const {
  const int32_t ctx = cfg_.sched.ctx_size;
  if (n_prompt <= 0) return std::string("the prompt is empty");
  if (n_prompt >= ctx)
    return strfmt("the prompt has %d tokens, but the context holds %d (prompt plus at least one generated token)",
                  n_prompt, ctx);
  // Room for the prompt and one generated token, computed in chunks of the token budget.
  if (!blocks_.fits_alone(n_prompt + 1, cfg_.sched.token_budget))
    return strfmt("the prompt has %d tokens, more than the KV cache memory can ever hold", n_prompt);
  return std::nullopt;
}

void EngineCore::add(EngineRequest r) {
  if (auto why = check_admissible(static_cast<int32_t>(r.prompt.size()))) fail("%s", why->c_str());
  if (r.max_tokens < 1) fail("max_tokens must be >= 1");
  const int32_t V = model_.spec().n_vocab;
  for (int32_t t : r.prompt)
    if (t < 0 || t >= V) fail("token id %d is outside the vocabulary (%d tokens)", t, V);
  if (r.constraint) {
    if (!r.constraint->grammar) fail("a grammar constraint without a grammar");
    if (r.constraint->grammar->vocab().n_vocab() > V)
      fail("the grammar was compiled for %d tokens, the model has %d", r.constraint->grammar->vocab().n_vocab(), V);
  }
  if (r.soft) {
    if (r.soft->at.size() != r.prompt.size())
      fail("soft tokens for %zu positions, the prompt has %zu", r.soft->at.size(), r.prompt.size());
    if (r.soft->width != model_.spec().n_embd)
      fail("soft tokens are %d wide, the model's embedding width is %d", r.soft->width, model_.spec().n_embd);
    r.keep_kv = false;
    r.resume_from.reset();
  }
  const std::optional<RequestId> from = r.resume_from;
  auto s = std::make_unique<Sequence>(std::move(r), V, arrivals_++);
  if (s->req.soft) s->keyed_prompt = media_keyed_prompt(s->req.prompt, *s->req.soft);
  if (s->req.constraint && !s->req.constraint->trigger)
    s->matcher = std::make_unique<grammar::Matcher>(s->req.constraint->grammar);
  if (proposer_ && !s->req.all_logits && s->req.draft_max != 0) s->proposer = proposer_->make_state(*s);
  if (from) resume(*s, *from);
  sched_.add(std::move(s));
}

void EngineCore::resume(Sequence& s, RequestId from) {
  std::vector<int32_t> had;
  SeqBlocks blocks;
  if (!sched_.take_parked(from, had, blocks)) return;
  // The longest common prefix, leaving at least one prompt token to compute (its logits
  // start the generation), if every block a query there needs is still held.
  int32_t keep = 0;
  const int32_t limit = std::min<int32_t>(static_cast<int32_t>(had.size()), s.n_prompt() - 1);
  while (keep < limit && had[keep] == s.tokens[keep]) ++keep;
  if (keep > 0 && !s.req.all_logits && blocks_.can_resume(blocks, keep)) keep = blocks_.truncate(blocks, keep);
  else keep = 0;
  if (keep == 0) {
    blocks_.free(blocks);  // full blocks stay in the prefix cache for the usual lookup
    return;
  }
  s.blocks = std::move(blocks);
  s.n_computed = keep;
  s.n_cached = keep;
}

void EngineCore::release_kv(RequestId id) { sched_.release_parked(id); }

void EngineCore::abort(RequestId id) {
  sched_.abort(id, pending_);
  sched_.release_finished();
}

void EngineCore::abort_all(FinishReason why) {
  sched_.abort_all(why, pending_);
  sched_.release_finished();
}

std::vector<TokenOutput> EngineCore::take_outputs() {
  std::vector<TokenOutput> out;
  out.swap(pending_);
  return out;
}

void EngineCore::propose(const ScheduledBatch& batch, std::span<const SliceSample> sampled) {
  const HiddenRows hidden = runner_.hidden_rows();
  slots_.clear();
  size_t si = 0;
  for (size_t i = 0; i < batch.slices.size(); ++i) {
    const ScheduledSlice& sl = batch.slices[i];
    if (!sl.sample) continue;
    const SliceSample& ss = sampled[si++];
    Sequence* s = sl.seq;  // finished ones stay readable until release_finished()
    if (s->state != SeqState::kRunning || s->n_pending() != 1 || s->req.all_logits) continue;
    // The scheduler's own room with the whole budget (the request's cap included): an upper
    // bound on what it will take, so no draft pass runs for tokens it could never verify.
    const int32_t k_max = sched_.draft_room(*s, cfg_.sched.token_budget);
    if (k_max <= 0) continue;
    ProposeSlot slot{s, k_max, nullptr};
    // The last accepted position computed: before the drafts, then one per accepted draft.
    // Its row is the step's when the sequence kept every position up to it.
    const int64_t accepted = static_cast<int64_t>(ss.tokens.size()) - 1;
    const int64_t next_pos = sl.pos0 + sl.n_tokens - sl.n_draft + accepted;
    if (hidden.data && next_pos == s->n_computed)
      slot.hidden = hidden.data + (hidden.first_row[i] + (sl.n_draft > 0 ? next_pos - 1 - sl.pos0 : 0)) * hidden.width;
    slots_.push_back(slot);
  }
  if (!slots_.empty()) proposer_->propose(slots_);
}

std::vector<TokenOutput> EngineCore::step() {
  ScheduledBatch batch = sched_.schedule(pending_);
  if (!batch.empty()) {
    const std::vector<SliceSample> sampled = runner_.execute(batch, pending_);
    sched_.update(batch, sampled, pending_);
    if (proposer_) propose(batch, sampled);
  }
  sched_.release_finished();
  return take_outputs();
}

EngineStats EngineCore::stats() const {
  EngineStats st;
  static_cast<SchedulerCounters&>(st) = sched_.counters();
  st.n_running = sched_.n_running();
  st.n_waiting = sched_.n_waiting();
  for (int32_t g = 0; g < blocks_.n_groups(); ++g) {
    st.kv_blocks_used += blocks_.n_used(g);
    st.kv_blocks_total += blocks_.n_total(g);
  }
  st.prefix = blocks_.prefix_stats();
  st.prefix_cached_blocks = blocks_.n_cached(blocks_.index_group());
  return st;
}

}  // namespace sluice::engine
