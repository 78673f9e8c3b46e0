#include "server/generation.h"

#include <algorithm>
#include <thread>

#include "base/error.h"
#include "server/api_error.h"

namespace sluice::server {

Generation::Generation(api::Engine& engine, const ModelContext& m, std::vector<int32_t> prompt,
                       const GenerationParams& p, bool split_reasoning, const ToolGeneration& tools,
                       std::shared_ptr<const api::SoftTokens> soft) {
  single_call_ = tools.single_call;
  t_submit_ = std::chrono::steady_clock::now();
  n_prompt_ = static_cast<int32_t>(prompt.size());
  want_logprobs_ = p.top_logprobs >= 0;
  if (auto why = engine.check_admissible(n_prompt_))
    throw ApiError(400, *why, "invalid_request_error", "messages", "context_length_exceeded");
  // Default: up to the end of the context, or the server's cap.
  int32_t limit = m.ctx_size() - n_prompt_;
  if (m.max_tokens_cap() > 0) limit = std::min(limit, m.max_tokens_cap());
  const int32_t max_tokens = p.max_tokens ? std::min(*p.max_tokens, limit) : limit;

  api::EngineRequest base;
  base.prompt = std::move(prompt);
  base.soft = std::move(soft);
  base.sampling = p.sampling;
  base.max_tokens = max_tokens;
  base.min_tokens = p.min_tokens;
  base.top_logprobs = p.top_logprobs;
  if (p.draft_max) base.draft_max = *p.draft_max;
  if (!p.ignore_eos) base.stop_ids = m.tokenizer().eog_ids();
  base.stop_ids.insert(base.stop_ids.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
  base.banned_ids = tools.constraint.banned_ids;
  if (tools.constraint.grammar)  // the service lets only one of the two constrain a request
    base.constraint = api::GrammarConstraint{tools.constraint.grammar, tools.constraint.trigger,
                                             tools.constraint.stop_when_complete};
  else if (p.grammar) base.constraint = api::GrammarConstraint{p.grammar, p.grammar_trigger, true};

  if (p.n > engine.capacity())
    bad_param("n", strfmt("%d choices can never be admitted: this server holds at most %d requests at once (%d running "
                          "+ %d waiting); ask for n <= %d",
                          p.n, engine.capacity(), engine.config().sched.max_running, engine.max_waiting(),
                          engine.capacity()));
  std::vector<api::EngineRequest> reqs;
  for (int32_t i = 0; i < p.n; ++i) {
    api::EngineRequest r = base;
    r.sampling.seed = p.sampling.seed + static_cast<uint64_t>(i);  // choice i: its own stream
    reqs.push_back(std::move(r));
  }
  // Every choice is queued, or none: a refused request leaves nothing behind in the queue.
  api::SubmitGroupResult sr = engine.submit_group(std::move(reqs));
  switch (sr.status) {
    case api::SubmitStatus::kOk: break;
    case api::SubmitStatus::kInvalid: throw ApiError(400, sr.error);
    case api::SubmitStatus::kQueueFull:
      throw ApiError(429,
                     "the server is busy: the waiting queue has no room for " + std::to_string(p.n) +
                         (p.n == 1 ? " request" : " choices") + "; retry later",
                     "rate_limit_error", "", "queue_full");
    case api::SubmitStatus::kShuttingDown: throw ApiError(503, "the server is shutting down", "server_error");
  }
  for (auto& h : sr.handles) {
    Choice c;
    c.handle = std::move(h);
    c.text = std::make_unique<ChoiceText>(m.tokenizer(), p.stop, split_reasoning, p.min_tokens, tools.format,
                                          tools.incremental);
    choices_.push_back(std::move(c));
    ++n_alive_;
  }
}

Generation::~Generation() { cancel_all(); }

GenerationTimings Generation::timings() const {
  using ms = std::chrono::duration<double, std::milli>;
  GenerationTimings t;
  t.prompt_n = n_prompt_ - n_cached_;
  const auto first = n_completion_ > 0 ? t_first_ : t_done_;
  t.prompt_ms = ms(first - t_submit_).count();
  t.predicted_n = n_completion_;
  t.predicted_ms = n_completion_ > 0 ? ms(t_done_ - t_first_).count() : 0.0;
  for (const Choice& c : choices_) {
    t.draft_n += c.n_drafted;
    t.draft_n_accepted += c.n_accepted;
  }
  return t;
}

void Generation::cancel_all() {
  for (Choice& c : choices_)
    if (!c.finished && c.handle) c.handle->cancel();
}

void Generation::absorb(int32_t index, std::vector<api::TokenOutput>& outs, std::vector<ChoiceEvent>& events) {
  Choice& c = choices_[index];
  ChoiceEvent ev;
  ev.index = index;
  auto append = [&](const TextDelta& d) {
    ev.text.content += d.content;
    ev.text.reasoning += d.reasoning;
    for (const ToolCall& call : d.tool_calls) {
      if (c.first_call.empty()) c.first_call = call.id;
      if (single_call_ && call.id != c.first_call) continue;  // parallel_tool_calls false: the first call only
      ev.text.tool_calls.push_back(call);
      c.n_calls += call.first ? 1 : 0;
      c.first_done |= call.last && call.id == c.first_call;
    }
  };
  for (api::TokenOutput& o : outs) {
    if (c.finished) break;  // outputs after a stop string are dropped
    n_prompt_ = o.n_prompt;
    if (index == 0) n_cached_ = o.n_cached;
    c.n_drafted = std::max(c.n_drafted, o.n_drafted);
    c.n_accepted = std::max(c.n_accepted, o.n_accepted);
    if (o.token >= 0) {
      if (n_completion_ == 0) t_first_ = std::chrono::steady_clock::now();
      ++n_completion_;
      if (want_logprobs_ && o.logprob) ev.logprobs.push_back({o.token, o.logprob->logprob, std::move(o.top)});
      if (!o.is_stop_token) {
        const TextDelta d = c.text->push(o.token);
        append(d);
        if (d.stopped || (single_call_ && c.first_done)) {
          c.finished = true;
          ev.finish_reason = "stop";
          c.handle->cancel();  // the engine frees its blocks before its next step
          break;
        }
      }
    }
    if (o.finish) {
      append(c.text->finish());
      c.finished = true;
      switch (*o.finish) {
        case api::FinishReason::kStop: ev.finish_reason = "stop"; break;
        case api::FinishReason::kLength: ev.finish_reason = "length"; break;
        case api::FinishReason::kError: ev.error = o.error.empty() ? "generation failed" : o.error; break;
        default:
          ev.finish_reason = "abort";
          ev.aborted = true;
          break;
      }
    }
  }
  if (c.finished && --n_alive_ == 0) t_done_ = std::chrono::steady_clock::now();
  if (ev.finish_reason == "stop" && c.n_calls > 0) ev.finish_reason = "tool_calls";
  if (!ev.text.content.empty() || !ev.text.reasoning.empty() || !ev.text.tool_calls.empty() || !ev.logprobs.empty() ||
      ev.finish_reason || ev.error || ev.aborted)
    events.push_back(std::move(ev));
}

std::vector<ChoiceEvent> Generation::poll(std::chrono::milliseconds timeout) {
  std::vector<ChoiceEvent> events;
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Outputs may make no event (text held back inside a tool call): wait on until the timeout.
    const auto now = std::chrono::steady_clock::now();
    const auto left = now < until ? std::chrono::duration_cast<std::chrono::milliseconds>(until - now)
                                  : std::chrono::milliseconds(0);
    for (int32_t i = 0; i < n_choices(); ++i) {
      Choice& c = choices_[i];
      if (c.finished) continue;
      // One live choice: block on it. Several: look at each without blocking.
      auto outs = c.handle->wait(n_alive_ == 1 ? left : std::chrono::milliseconds(0));
      if (!outs.empty()) absorb(i, outs, events);
    }
    if (!events.empty() || done() || std::chrono::steady_clock::now() >= until) return events;
    if (n_alive_ > 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace sluice::server
