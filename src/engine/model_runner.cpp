#include "engine/model_runner.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>

#include "base/error.h"
#include "engine/scheduler.h"
#include "spec/verify.h"

namespace sluice::engine {

ModelRunner::ModelRunner(models::Model& model, KvCache& kv, ThreadPool* pool)
    : model_(model), kv_(kv), pool_(pool), scratch_(pool ? static_cast<size_t>(pool->size()) : 1) {
  if (kv.n_groups() > models::kMaxKvGroups)
    fail("model runner: %d KV groups, at most %d", kv.n_groups(), models::kMaxKvGroups);
}

void ModelRunner::logprobs_of(const float* row, int32_t n_vocab, int32_t token, int32_t k, SampledToken& out) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_vocab; ++i) mx = std::max(mx, row[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  const double lse = mx + std::log(sum);
  out.logprob = TokenLogprob{token, static_cast<float>(row[token] - lse)};
  out.top.clear();
  if (k <= 0) return;
  k = std::min(k, n_vocab);
  std::vector<int32_t> ids(n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) ids[i] = i;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  for (int32_t i = 0; i < k; ++i) out.top.push_back({ids[i], static_cast<float>(row[ids[i]] - lse)});
}

void ModelRunner::report_rows(Sequence& s, const ScheduledSlice& sl, const float* rows,
                              std::vector<TokenOutput>& out) const {
  const size_t V = static_cast<size_t>(model_.spec().n_vocab);
  // A preempted sequence recomputes positions it already reported: send only new ones.
  const int32_t first = std::max(sl.pos0, s.n_logits_sent), end = sl.pos0 + sl.n_tokens;
  if (first >= end) return;
  TokenOutput o;
  o.id = s.req.id;
  o.n_prompt = s.n_prompt();
  o.n_cached = s.n_cached;
  o.n_generated = s.n_generated;
  o.logits_pos0 = first;
  o.logits.assign(rows + (first - sl.pos0) * V, rows + (end - sl.pos0) * V);
  out.push_back(std::move(o));
  s.n_logits_sent = end;
}

SampledToken ModelRunner::sample(Sequence& s, float* l, int32_t n_history, int32_t n_before, Scratch& w) {
  const int32_t V = model_.spec().n_vocab;
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const bool want_lp = s.req.top_logprobs >= 0;
  if (want_lp) w.raw.assign(l, l + V);
  if (s.n_generated + n_before < s.req.min_tokens)
    for (int32_t id : s.req.stop_ids)
      if (id >= 0 && id < V) l[id] = kNegInf;
  for (int32_t id : s.req.banned_ids)
    if (id >= 0 && id < V) l[id] = kNegInf;
  const std::span<const int32_t> history(s.tokens.data(), static_cast<size_t>(n_history));
  SampledToken st;
  try {
    st.token = s.matcher ? sample_constrained(s, l, history, w) : s.sampler.sample(l, history);
    track_constraint(s, st);
  } catch (const Error& e) {
    std::fprintf(stderr, "sluice: request %llu: grammar: %s\n", static_cast<unsigned long long>(s.req.id), e.what());
    st.error = true;
    st.why = std::string("grammar: ") + e.what();
    return st;
  }
  if (want_lp) logprobs_of(w.raw.data(), V, st.token, s.req.top_logprobs, st);
  return st;
}

int32_t ModelRunner::sample_constrained(Sequence& s, float* l, std::span<const int32_t> history, Scratch& sc) {
  const int32_t V = model_.spec().n_vocab;
  // The sampler penalises the row in place; a redraw starts again from the row before, so only
  // the logits the penalties touch are saved (the row itself is not needed after this call).
  sc.saved.clear();
  for (int32_t id : s.sampler.penalized(history))
    if (id >= 0 && id < V) sc.saved.push_back({id, l[id]});
  const int32_t first = s.sampler.sample(l, history);
  if (s.matcher->accepts(first)) return first;
  for (const TokenProb& e : sc.saved) l[e.token] = e.prob;  // a repeated id saved the same value
  const grammar::TokenVocab& vocab = s.matcher->compiled().vocab();
  // The value could end here and the model wants something outside the grammar (a newline,
  // a code fence, its own end-of-turn variant): that is the end of the value.
  if (s.req.constraint->stop_when_complete && s.matcher->is_complete())
    for (int32_t id : s.req.stop_ids)
      if (vocab.is_eog(id) && id < V && l[id] > -std::numeric_limits<float>::infinity()) return id;
  sc.mask.resize(vocab.mask_words());
  s.matcher->fill_mask(sc.mask);
  // Few allowed ids (a digit, a key, a bracket): walk them. Many (inside a string): mask the
  // row in place, cheaper than listing them; both give the same distribution.
  const int32_t n_known = std::min(V, vocab.n_vocab());  // ids past the grammar's vocabulary: never
  size_t n_allowed = 0;
  for (uint64_t w : sc.mask) n_allowed += static_cast<size_t>(std::popcount(w));
  std::span<const TokenProb> dist;
  if (n_allowed * 8 < static_cast<size_t>(V)) {
    sc.allowed.clear();
    for (size_t w = 0; w < sc.mask.size(); ++w)
      for (uint64_t bits = sc.mask[w]; bits != 0; bits &= bits - 1) {
        const int32_t id = static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
        if (id < n_known) sc.allowed.push_back(id);
      }
    dist = s.sampler.distribution_over(l, sc.allowed, history, SamplerWorkspace::for_this_thread());
  } else {
    bool any = false;
    for (int32_t i = 0; i < V; ++i) {
      const bool allowed = i < n_known && ((sc.mask[static_cast<size_t>(i) >> 6] >> (i & 63)) & 1);
      if (!allowed) l[i] = -std::numeric_limits<float>::infinity();
      else any = any || l[i] > -std::numeric_limits<float>::infinity();
    }
    if (any) dist = s.sampler.distribution(l, history, SamplerWorkspace::for_this_thread());
  }
  if (dist.empty())
    fail("no token is allowed after %zu constrained tokens (the grammar's tokens are all banned)",
         s.matcher->n_tokens());
  return Sampler::draw(dist, s.sampler.uniform(static_cast<int64_t>(history.size()), RandomStream::kGrammar));
}

// Advances the armed matcher on the sampled token (disarming or finishing once the grammar is
// closed), or arms it when the token is the constraint's trigger.
void ModelRunner::track_constraint(Sequence& s, SampledToken& st) {
  const std::optional<GrammarConstraint>& c = s.req.constraint;
  if (!c) return;
  if (!s.matcher) {
    if (c->trigger && *c->trigger == st.token) s.matcher = std::make_unique<grammar::Matcher>(c->grammar);
    return;
  }
  if (!s.matcher->advance(st.token)) fail("the sampled token %d is not allowed", st.token);
  if (!s.matcher->is_terminated() && !s.matcher->only_end()) return;
  if (c->stop_when_complete) st.grammar_done = true;
  else s.matcher.reset();
}

// Verification of a slice ending in n_draft deterministic drafts (spec::accept_matching):
// row j (the logits after position pos0 + j) is sampled exactly as a plain step would sample
// it — the history up to that position, min_tokens counted, the sampler's number keyed by the
// position — and a draft is accepted while it equals that token; the first disagreement (or
// the token after the last draft) is the target's own. So the tokens are the plain path's
// for the same seed, greedy or sampled, whatever the drafts (docs/speculative.md). A token
// that closes the request's grammar (or fails it) ends the run like a mismatch.
SliceSample ModelRunner::verify(Sequence& s, const ScheduledSlice& sl, float* rows, Scratch& w) {
  const size_t V = static_cast<size_t>(model_.spec().n_vocab);
  const int32_t first = sl.pos0 + sl.n_tokens - 1 - sl.n_draft;  // position of the last sampled token
  const std::span<const int32_t> drafts(s.tokens.data() + first + 1, static_cast<size_t>(sl.n_draft));
  SliceSample out;
  spec::accept_matching(
      drafts,
      [&](int32_t j) {
        out.tokens.push_back(sample(s, rows + static_cast<size_t>(j) * V, first + 1 + j, j, w));
        const SampledToken& st = out.tokens.back();
        return st.error || st.grammar_done ? -1 : st.token;  // -1 matches no draft: the run ends here
      },
      w.verified);
  return out;
}

void ModelRunner::sample_tasks(std::vector<SliceSample>& sampled) {
  sampled.resize(tasks_.size());
  const auto run_task = [&](size_t i, Scratch& w) {
    const SampleTask& t = tasks_[i];
    Sequence& s = *t.sl->seq;
    sampled[i] = t.verify ? verify(s, *t.sl, t.rows, w) : SliceSample{{sample(s, t.rows, s.n_tokens(), 0, w)}};
  };
  if (!pool_ || pool_->size() == 1 || tasks_.size() < 2) {
    for (size_t i = 0; i < tasks_.size(); ++i) run_task(i, scratch_[0]);
    return;
  }
  // Longest first (a verification samples up to n_draft + 1 rows, a plain slice one), so a
  // long task does not start last while the other workers have nothing left.
  order_.resize(tasks_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  const auto rows = [&](size_t i) { return tasks_[i].verify ? tasks_[i].sl->n_draft + 1 : 1; };
  std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return rows(a) > rows(b); });
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  pool_->run([&](int ith, int) {
    for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < order_.size();) {
      try {
        run_task(order_[k], scratch_[static_cast<size_t>(ith)]);
      } catch (...) {  // ThreadPool jobs must not throw: hand it to the calling thread
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  });
  if (error) std::rethrow_exception(error);
}

HiddenRows ModelRunner::hidden_rows() const {
  if (!export_hidden_) return {};
  return {hidden_.data(), model_.spec().n_embd, first_row_};
}

// A slice's soft-token rows (SeqSlice::embd): none past the prompt; a slice that runs past the
// prompt's end (the last chunk and a draft) gets a padded copy in slot `i` of soft_pad_.
std::span<const float* const> ModelRunner::soft_rows(const Sequence& s, int32_t pos0, int32_t n, size_t i) {
  if (!s.req.soft || pos0 >= static_cast<int32_t>(s.req.soft->at.size())) return {};
  const std::vector<const float*>& at = s.req.soft->at;
  if (pos0 + n <= static_cast<int32_t>(at.size())) return {at.data() + pos0, static_cast<size_t>(n)};
  if (soft_pad_.size() <= i) soft_pad_.resize(i + 1);
  soft_pad_[i].assign(static_cast<size_t>(n), nullptr);
  std::copy(at.begin() + pos0, at.end(), soft_pad_[i].begin());
  return soft_pad_[i];
}

std::vector<SliceSample> ModelRunner::execute(const ScheduledBatch& batch, std::vector<TokenOutput>& out) {
  const size_t V = static_cast<size_t>(model_.spec().n_vocab);
  fb_.seqs.resize(batch.slices.size());
  for (size_t i = 0; i < batch.slices.size(); ++i) {
    const ScheduledSlice& sl = batch.slices[i];
    models::SeqSlice& s = fb_.seqs[i];
    s.tokens = std::span<const int32_t>(sl.seq->tokens.data() + sl.pos0, static_cast<size_t>(sl.n_tokens));
    s.pos0 = sl.pos0;
    s.embd = soft_rows(*sl.seq, sl.pos0, sl.n_tokens, i);
    s.embd_blocks = sl.seq->req.soft && sl.seq->req.soft->blocks;
    for (int32_t g = 0; g < kv_.n_groups(); ++g) s.block_tables[g] = sl.seq->blocks.tables[g];
    s.logits = sl.seq->req.all_logits || sl.n_draft > 0 ? models::LogitsWanted::kAll
               : sl.sample                              ? models::LogitsWanted::kLast
                                                        : models::LogitsWanted::kNone;
  }
  logits_.resize(static_cast<size_t>(std::max<int64_t>(fb_.n_logit_rows(), 1)) * V);
  fb_.hidden = nullptr;
  if (export_hidden_) {
    hidden_.resize(static_cast<size_t>(std::max<int64_t>(fb_.n_logit_rows(), 1) * model_.spec().n_embd));
    fb_.hidden = hidden_.data();
    first_row_.clear();
    int64_t r = 0;
    for (const models::SeqSlice& s : fb_.seqs) {
      first_row_.push_back(r);
      r += s.logits == models::LogitsWanted::kAll    ? static_cast<int64_t>(s.tokens.size())
           : s.logits == models::LogitsWanted::kLast ? 1
                                                     : 0;
    }
  }
  model_.forward(fb_, kv_, logits_.data());

  // all_logits rows go out here, before sampling touches them; the sampling waits in tasks_.
  tasks_.clear();
  size_t row = 0;
  for (const ScheduledSlice& sl : batch.slices) {
    Sequence& s = *sl.seq;
    if (s.req.all_logits) {
      report_rows(s, sl, logits_.data() + row * V, out);
      row += static_cast<size_t>(sl.n_tokens);
      if (sl.sample) tasks_.push_back({&sl, logits_.data() + (row - 1) * V, false});
    } else if (sl.n_draft > 0) {
      tasks_.push_back({&sl, logits_.data() + row * V, true});
      row += static_cast<size_t>(sl.n_tokens);
    } else if (sl.sample) {
      tasks_.push_back({&sl, logits_.data() + row++ * V, false});
    }
  }
  std::vector<SliceSample> sampled;
  sample_tasks(sampled);
  return sampled;
}

}  // namespace sluice::engine
