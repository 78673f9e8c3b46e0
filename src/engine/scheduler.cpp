#include "engine/scheduler.h"

#include <algorithm>

#include "base/error.h"

namespace sluice::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "?";
}

Scheduler::Scheduler(const SchedulerConfig& cfg, BlockManager& blocks) : cfg_(cfg), blocks_(blocks) {
  if (cfg.max_running < 1) fail("scheduler: max_running must be >= 1");
  if (cfg.token_budget < 1) fail("scheduler: token budget must be >= 1");
  if (cfg.ctx_size < 2) fail("scheduler: context must hold at least 2 positions");
  if (cfg.policy.adaptive) cfg.policy.curve.validate();
  if (!(cfg.policy.margin >= 0)) fail("--spec-margin must be >= 0, got %g", cfg.policy.margin);
  counters_.drafted_at.assign(static_cast<size_t>(std::max(cfg.draft_max, 0)), 0);
  counters_.accepted_at.assign(static_cast<size_t>(std::max(cfg.draft_max, 0)), 0);
}

Scheduler::~Scheduler() {
  for (auto& [id, s] : seqs_) blocks_.free(s->blocks);
  for (auto& [id, p] : parked_) blocks_.free(p.blocks);
}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  if (seq->tokens.empty()) fail("scheduler: empty prompt");
  Sequence* s = seq.get();
  if (!seqs_.emplace(s->req.id, std::move(seq)).second) fail("scheduler: duplicate request id");
  s->state = SeqState::kWaiting;
  waiting_.push_back(s);
}

const Sequence* Scheduler::find(RequestId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

void Scheduler::remove_running(Sequence* s) { running_.erase(std::find(running_.begin(), running_.end(), s)); }

void Scheduler::insert_running(Sequence* s) {
  auto at = std::upper_bound(running_.begin(), running_.end(), s,
                             [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  running_.insert(at, s);
  s->state = SeqState::kRunning;
}

void Scheduler::preempt(Sequence* s) {
  // Recompute, not swap: free everything, keep the tokens. The full blocks stay in the prefix
  // cache, so if memory frees up before they are evicted the recompute is mostly hits.
  blocks_.free(s->blocks);
  s->n_computed = 0;
  if (s->proposer) s->proposer->reset();  // its memory too; rebuilt from the tokens when it decodes again
  s->proposal.clear();
  ++counters_.preemptions;
  remove_running(s);
  s->state = SeqState::kWaiting;
  waiting_.push_front(s);
}

void Scheduler::finish(Sequence* s, FinishReason why, std::vector<TokenOutput>& out, TokenOutput* last) {
  TokenOutput o;
  if (last) o = *last;
  o.id = s->req.id;
  o.finish = why;
  o.n_prompt = s->n_prompt();
  o.n_cached = s->n_cached;
  o.n_generated = s->n_generated;
  o.n_drafted = s->n_drafted;
  o.n_accepted = s->n_accepted;
  out.push_back(std::move(o));
  if (s->req.keep_kv && !s->blocks.empty()) {
    release_parked(s->req.id);
    Parked& p = parked_[s->req.id];
    p.tokens.assign(s->tokens.begin(), s->tokens.begin() + s->n_computed);
    p.blocks = std::move(s->blocks);
  } else {
    blocks_.free(s->blocks);
  }
  if (s->state == SeqState::kRunning) remove_running(s);
  else if (s->state == SeqState::kWaiting) waiting_.erase(std::find(waiting_.begin(), waiting_.end(), s));
  s->state = SeqState::kFinished;
  s->proposer.reset();  // its memory (a draft model's blocks) goes now, with the target's blocks
  auto it = seqs_.find(s->req.id);
  finished_.push_back(std::move(it->second));
  seqs_.erase(it);
}

bool Scheduler::take_parked(RequestId id, std::vector<int32_t>& tokens, SeqBlocks& blocks) {
  auto it = parked_.find(id);
  if (it == parked_.end()) return false;
  tokens = std::move(it->second.tokens);
  blocks = std::move(it->second.blocks);
  parked_.erase(it);
  return true;
}

void Scheduler::release_parked(RequestId id) {
  auto it = parked_.find(id);
  if (it == parked_.end()) return;
  blocks_.free(it->second.blocks);
  parked_.erase(it);
}

void Scheduler::abort(RequestId id, std::vector<TokenOutput>& out) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  finish(it->second.get(), FinishReason::kAbort, out);
}

void Scheduler::abort_all(FinishReason why, std::vector<TokenOutput>& out) {
  while (!seqs_.empty()) finish(seqs_.begin()->second.get(), why, out);
}

// A prompt chunk of n tokens from n_computed, moved so that it does not split a bidirectional
// block of soft tokens (EngineRequest::soft with blocks): it ends before the block, or, when
// the block starts the chunk, at the block's end (over the budget if the block is longer).
int32_t Scheduler::fit_soft_blocks(const Sequence* s, int32_t n) const {
  if (!s->req.soft || !s->req.soft->blocks) return n;
  const std::vector<const float*>& at = s->req.soft->at;
  const int32_t a = s->n_computed, e = a + n, size = static_cast<int32_t>(at.size());
  if (e >= size || e <= a || !at[e - 1] || !at[e]) return n;
  int32_t start = e - 1;
  while (start > a && at[start - 1]) --start;
  if (start > a) return start - a;
  int32_t end = e;
  while (end < size && at[end]) ++end;
  return end - a;
}

std::span<const int32_t> Scheduler::cache_ids(const Sequence* s) {
  if (s->keyed_prompt.empty()) return s->tokens;
  keyed_scratch_.assign(s->keyed_prompt.begin(), s->keyed_prompt.end());
  if (s->n_tokens() > s->n_prompt())
    keyed_scratch_.insert(keyed_scratch_.end(), s->tokens.begin() + s->n_prompt(), s->tokens.end());
  return keyed_scratch_;
}

int32_t Scheduler::whole_images(Sequence* s) {
  const int32_t n = s->n_computed;
  if (!s->req.soft || !s->req.soft->blocks || n == 0) return n;
  const std::vector<const float*>& at = s->req.soft->at;
  if (n >= static_cast<int32_t>(at.size()) || !at[n - 1] || !at[n]) return n;
  int32_t start = n - 1;
  while (start > 0 && at[start - 1]) --start;
  return blocks_.truncate(s->blocks, start);
}

bool Scheduler::try_admit(Sequence* s, int32_t budget, ScheduledBatch& batch) {
  if (s->blocks.empty() && s->n_computed == 0 && !s->req.all_logits && cacheable(s)) {
    s->n_computed = blocks_.match_prefix(s->blocks, cache_ids(s));
    s->n_computed = whole_images(s);
    if (!s->admitted_once) s->n_cached = s->n_computed;
  }
  const int32_t n = fit_soft_blocks(s, std::min(s->n_pending(), budget));
  blocks_.release_outside_window(s->blocks, s->n_computed);
  if (!blocks_.reserve(s->blocks, s->n_computed, s->n_computed + n)) {
    // Not now: give the cache hits back (they stay cached) so they pin no memory meanwhile.
    blocks_.free(s->blocks);
    s->n_computed = 0;
    return false;
  }
  s->admitted_once = true;
  batch.slices.push_back({s, s->n_computed, n, s->n_computed + n == s->n_tokens()});
  batch.n_tokens += n;
  return true;
}

ScheduledBatch Scheduler::schedule(std::vector<TokenOutput>& out) {
  ScheduledBatch batch;
  int32_t budget = cfg_.token_budget;
  const int64_t preempted_before = counters_.preemptions;
  const bool adaptive = cfg_.policy.adaptive && cfg_.draft_max > 0;
  spec::StepPlanner plan = adaptive ? plan_step() : spec::StepPlanner(cfg_.policy.curve, 0, 0);
  // 1. Running sequences, oldest first, so preemption always hits the newest.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    blocks_.release_outside_window(s->blocks, s->n_computed);
    int32_t n_draft = add_drafts(s, budget, adaptive ? &plan : nullptr);
    int32_t n = fit_soft_blocks(s, std::min(s->n_pending(), budget));
    bool ok = blocks_.reserve(s->blocks, s->n_computed, s->n_computed + n);
    if (!ok && n_draft > 0) {  // no room for the lookahead: a plain step
      drop_drafts(s, n_draft);
      n_draft = 0;
      n = std::min(s->n_pending(), budget);
      ok = blocks_.reserve(s->blocks, s->n_computed, s->n_computed + n);
    }
    while (!ok && running_.back() != s) {
      preempt(running_.back());
      ok = blocks_.reserve(s->blocks, s->n_computed, s->n_computed + n);
    }
    if (!ok) {
      if (i == 0) {
        // Alone (everything newer was preempted, nothing older runs) and still too big: the
        // pool cannot hold this sequence any longer.
        finish(s, FinishReason::kLength, out);
      } else {
        preempt(s);
      }
      continue;  // running_[i] is now the next sequence, if any
    }
    batch.slices.push_back({s, s->n_computed, n, s->n_computed + n == s->n_tokens(), n_draft,
                            n_draft > 0 ? s->proposal.origin : DraftOrigin::kOther});
    batch.n_tokens += n;
    budget -= n;
    ++i;
  }
  // 2. Waiting sequences, FIFO, with what is left of the budget. Not in a step that had to
  // preempt: memory is short, and re-admitting the victim at once would only thrash.
  const bool preempted_now = counters_.preemptions != preempted_before;
  while (!preempted_now && !waiting_.empty() && budget > 0 && n_running() < cfg_.max_running) {
    Sequence* s = waiting_.front();
    if (!try_admit(s, budget, batch)) {
      if (running_.empty() && batch.empty()) {
        // Even the whole pool cannot hold it (a preempted sequence that grew too long).
        finish(s, FinishReason::kLength, out);
        continue;
      }
      break;  // head-of-line: wait for memory rather than let newer requests overtake
    }
    waiting_.pop_front();
    insert_running(s);
    budget -= batch.slices.back().n_tokens;
  }
  if (!batch.empty()) ++counters_.steps;
  return batch;
}

spec::StepPlanner Scheduler::plan_step() const {
  // The running sequences' own tokens (a decode is 1, a prefill chunk at most the budget),
  // each one token of work done: a prefill token is work the request needs as much as a
  // generated one. The waiting sequences the step will likely admit (FIFO, while there are free slots and
  // budget) count too: their prefill is added after the drafts are chosen, and a draft priced
  // for a decode-only step costs a compute-bound one's rate. Prefix-cache hits are not known
  // yet, so this errs toward drafting less.
  int32_t tokens = 0;
  for (const Sequence* s : running_) tokens += std::min(s->n_pending(), cfg_.token_budget);
  int32_t slots = cfg_.max_running - n_running();
  for (auto it = waiting_.begin(); it != waiting_.end() && slots > 0 && tokens < cfg_.token_budget; ++it, --slots)
    tokens += (*it)->n_pending();
  tokens = std::min(tokens, cfg_.token_budget);
  return spec::StepPlanner(cfg_.policy.curve, tokens, tokens, cfg_.policy.margin, batch_pace());
}

double Scheduler::batch_pace() const {
  // Nothing waits: the running sequences end together as a batch (spec::StepPlanner's pace),
  // and it ends with its slowest member. The sequences the policy decides for this step are
  // the ones that decode with room to draft; a sequence about to end (no room) or still in its
  // prompt does not count. One such sequence alone is the batch's pace by itself: 1. Each
  // moves at its yield rate (how often it is offered drafts times how many it accepts); the
  // pace is the lowest.
  if (!waiting_.empty()) return 1;
  int32_t n = 0;
  double lowest = 1;
  for (const Sequence* s : running_) {
    if (s->n_pending() != 1 || s->req.all_logits || draft_room(*s, cfg_.token_budget) <= 0) continue;
    ++n;
    lowest = std::min(lowest, s->acceptance.yield_rate());
  }
  return n >= 2 ? lowest : 1;
}

int32_t Scheduler::draft_room(const Sequence& s, int32_t budget) const {
  const int32_t cap = s.req.draft_max >= 0 ? std::min(s.req.draft_max, cfg_.draft_max) : cfg_.draft_max;
  return std::min({cap, budget - 1, cfg_.ctx_size - s.n_tokens() - 1, s.req.max_tokens - s.n_generated - 1});
}

int32_t Scheduler::add_drafts(Sequence* s, int32_t budget, spec::StepPlanner* plan) {
  const Proposal& p = s->proposal;
  if (cfg_.draft_max <= 0 || s->n_pending() != 1 || s->req.all_logits) return 0;
  s->acceptance.offered(p.for_n_tokens == s->n_tokens() && !p.tokens.empty());
  if (p.for_n_tokens != s->n_tokens()) return 0;
  const int32_t room = draft_room(*s, budget);
  int32_t k_max = room;
  // The batch's slowest sequence sets its pace: all its drafted tokens shorten the batch.
  const bool slowest = plan && s->acceptance.yield_rate() <= plan->pace();
  if (plan && k_max > 0) k_max = plan->choose(s->acceptance.rate(), k_max, slowest);
  if (k_max <= 0) {
    if (room > 0) start_shadow(s, room);
    return 0;
  }
  s->shadow.clear();  // a real verification scores this position instead
  const int32_t k = std::min<int32_t>(k_max, static_cast<int32_t>(p.tokens.size()));
  if (plan) plan->add(s->acceptance.rate(), k, slowest);
  s->tokens.insert(s->tokens.end(), p.tokens.begin(), p.tokens.begin() + k);
  return k;
}

void Scheduler::start_shadow(Sequence* s, int32_t k) {
  const Proposal& p = s->proposal;
  if (!p.cheap || s->shadow.pending() || p.tokens.empty()) return;
  s->shadow.start(std::span<const int32_t>(p.tokens).first(std::min<size_t>(static_cast<size_t>(k), p.tokens.size())));
}

void Scheduler::drop_drafts(Sequence* s, int32_t n_draft) {
  s->tokens.resize(s->tokens.size() - static_cast<size_t>(n_draft));
}

bool Scheduler::accept(const ScheduledSlice& sl, const SliceSample& ss, std::vector<TokenOutput>& out) {
  Sequence* s = sl.seq;
  const int32_t n_tok = static_cast<int32_t>(ss.tokens.size());
  if (n_tok < 1 || n_tok > sl.n_draft + 1) fail("scheduler: %d tokens for a slice with %d drafts", n_tok, sl.n_draft);
  // tokens[last .. last + n_tok - 1) were drafts the target agreed with; the rest are undone:
  // their tokens, and the K/V written at their positions (blocks past them freed, unpublished).
  const int32_t last = sl.pos0 + sl.n_tokens - 1 - sl.n_draft;  // the last sampled token's position
  counters_.drafted_tokens += sl.n_draft;
  counters_.accepted_tokens += n_tok - 1;
  if (sl.draft_origin == DraftOrigin::kPrompt) {
    counters_.drafted_prompt += sl.n_draft;
    counters_.accepted_prompt += n_tok - 1;
  } else if (sl.draft_origin == DraftOrigin::kOutput) {
    counters_.drafted_output += sl.n_draft;
    counters_.accepted_output += n_tok - 1;
  }
  for (int32_t i = 0; i < sl.n_draft && i < static_cast<int32_t>(counters_.drafted_at.size()); ++i) {
    ++counters_.drafted_at[static_cast<size_t>(i)];
    if (i < n_tok - 1) ++counters_.accepted_at[static_cast<size_t>(i)];
  }
  s->acceptance.record(sl.n_draft, n_tok - 1);
  s->n_drafted += sl.n_draft;
  s->n_accepted += n_tok - 1;
  drop_drafts(s, sl.n_draft - (n_tok - 1));
  s->n_computed = last + n_tok;
  if (sl.n_draft > 0) s->n_computed = blocks_.truncate(s->blocks, s->n_computed);
  s->tokens.push_back(ss.tokens.back().token);
  for (int32_t j = 0; j < n_tok; ++j) {
    const SampledToken& st = ss.tokens[j];
    if (st.error) {
      s->tokens.resize(static_cast<size_t>(last + 1 + j));
      if (s->n_computed > last + 1 + j) s->n_computed = blocks_.truncate(s->blocks, last + 1 + j);
      finish(s, FinishReason::kError, out);
      out.back().error = st.why;
      return false;
    }
    ++s->n_generated;
    ++counters_.generated_tokens;
    s->shadow.next(st.token, s->acceptance);
    TokenOutput o;
    o.id = s->req.id;
    o.token = st.token;
    o.logprob = st.logprob;
    o.top = st.top;
    o.n_prompt = s->n_prompt();
    o.n_cached = s->n_cached;
    o.n_generated = s->n_generated;
    o.n_drafted = s->n_drafted;
    o.n_accepted = s->n_accepted;
    const auto& stops = s->req.stop_ids;
    const bool stop_id = std::find(stops.begin(), stops.end(), st.token) != stops.end();
    const bool stop = stop_id || st.grammar_done;
    const bool full = s->n_generated >= s->req.max_tokens || last + 2 + j >= cfg_.ctx_size;
    if (!stop && !full) {
      out.push_back(std::move(o));
      continue;
    }
    // Ends at this token: what came after it in the run is not generated. Like a plain step's
    // last token, it has no K/V of its own.
    s->tokens.resize(static_cast<size_t>(last + 2 + j));
    if (s->n_computed > last + 1 + j) s->n_computed = blocks_.truncate(s->blocks, last + 1 + j);
    if (cacheable(s)) blocks_.publish_full_blocks(s->blocks, cache_ids(s), s->n_computed);
    o.is_stop_token = stop_id;
    finish(s, stop ? FinishReason::kStop : FinishReason::kLength, out, &o);
    return false;
  }
  if (cacheable(s)) blocks_.publish_full_blocks(s->blocks, cache_ids(s), s->n_computed);
  return true;
}

void Scheduler::update(const ScheduledBatch& batch, std::span<const SliceSample> sampled,
                       std::vector<TokenOutput>& out) {
  size_t si = 0;
  for (const ScheduledSlice& sl : batch.slices) {
    Sequence* s = sl.seq;
    if (sl.pos0 < s->n_prompt())
      counters_.prompt_tokens_computed += std::min(s->n_prompt(), sl.pos0 + sl.n_tokens) - sl.pos0;
    if (!sl.sample) {
      s->n_computed = sl.pos0 + sl.n_tokens;
      if (cacheable(s)) blocks_.publish_full_blocks(s->blocks, cache_ids(s), s->n_computed);
      continue;
    }
    if (si >= sampled.size()) fail("scheduler: runner returned %zu answers for more sampling slices", sampled.size());
    accept(sl, sampled[si++], out);
  }
}

}  // namespace sluice::engine
