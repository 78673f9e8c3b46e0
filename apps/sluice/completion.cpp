#include "apps/sluice/completion.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/error.h"
#include "gguf/reader.h"

namespace sluice::app {

void add_sampling_flags(CLI::App* cmd, SamplingFlags& f) {
  f.cmd = cmd;
  cmd->add_option("--temp", f.temp, "temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", f.top_k, "keep the k most likely tokens (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", f.top_p, "nucleus sampling mass (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", f.min_p, "drop tokens below min-p × the top probability")->capture_default_str();
  cmd->add_option("--repeat-penalty", f.repeat_penalty, "penalize tokens seen in the last 64")->capture_default_str();
  cmd->add_option("--seed", f.seed, "random seed (default: from the clock)");
  cmd->add_option("-n,--n-predict", f.n_predict, "tokens to generate (-1 = until the end)")->capture_default_str();
}

GenerationOptions resolve_sampling(const SamplingFlags& f, const gguf::GgufFile& file) {
  auto given = [&](const char* name) { return f.cmd && f.cmd->count(name) > 0; };
  GenerationOptions o;
  SamplingParams& p = o.sampling;
  // The file's recommended values (general.sampling.*) fill flags the user did not give.
  p.temperature = given("--temp") ? f.temp : static_cast<float>(file.get_float_or("general.sampling.temp", f.temp));
  p.top_k = given("--top-k") ? f.top_k
                             : static_cast<int32_t>(file.get_uint_or("general.sampling.top_k", f.top_k, 1 << 30));
  p.top_p = given("--top-p") ? f.top_p : static_cast<float>(file.get_float_or("general.sampling.top_p", f.top_p));
  p.min_p = given("--min-p") ? f.min_p : static_cast<float>(file.get_float_or("general.sampling.min_p", f.min_p));
  p.repeat_penalty = f.repeat_penalty;
  p.seed = given("--seed") ? f.seed
                           : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  o.n_predict = f.n_predict;
  return o;
}

namespace {
const char* stop_reason(const engine::TokenOutput& last, const GenerationOptions& opt) {
  switch (*last.finish) {
    case engine::FinishReason::kStop: return last.is_stop_token ? "eog" : "grammar complete";
    case engine::FinishReason::kAbort: return "interrupted";
    case engine::FinishReason::kError: return "error";
    case engine::FinishReason::kLength: break;
  }
  return opt.n_predict >= 0 && last.n_generated >= std::max(1, opt.n_predict) ? "length" : "context";
}
}  // namespace

GenerationStats complete(EngineSession& sess, const Tokenizer& tok, const CompletionRequest& r, engine::RequestId& id,
                         const std::function<void(const std::string&)>& emit, const std::atomic<bool>* interrupt) {
  using clock = std::chrono::steady_clock;
  if (r.prompt.empty()) fail("empty prompt");
  engine::EngineRequest req;
  req.id = id = sess.next_id();
  req.prompt.assign(r.prompt.begin(), r.prompt.end());
  req.sampling = r.opt.sampling;
  // -n 0 still shows the first token, as -n 1 does.
  req.max_tokens = r.opt.n_predict >= 0 ? std::max(1, r.opt.n_predict) : sess.ctx_size();
  req.stop_ids = tok.eog_ids();
  req.keep_kv = r.keep_kv;
  req.resume_from = r.resume_from;
  req.soft = r.soft;
  if (r.grammar) req.constraint = engine::GrammarConstraint{r.grammar, std::nullopt, true};
  sess.core().add(std::move(req));
  GenerationStats st;
  // The engine's counters are global; run and chat have one request in flight.
  const engine::EngineStats before = sess.core().stats();
  StreamDecoder dec(tok);
  const auto t0 = clock::now();
  auto t1 = t0;
  bool first = true;
  sess.drive(
      id,
      [&](engine::TokenOutput& o) {
        if (first) {
          t1 = clock::now();
          first = false;
          st.n_prompt = o.n_prompt - o.n_cached;
        }
        if (o.token >= 0 && !o.is_stop_token) {
          ++st.n_generated;
          const std::string piece = dec.push(o.token);
          if (!piece.empty()) emit(piece);
        }
        if (o.finish) st.stop_reason = stop_reason(o, r.opt);
      },
      interrupt);
  const std::string rest = dec.flush();
  if (!rest.empty()) emit(rest);
  st.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  st.gen_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  const engine::EngineStats after = sess.core().stats();
  st.spec = sess.core().config().spec != engine::SpecMethod::kNone;
  st.drafted = after.drafted_tokens - before.drafted_tokens;
  st.accepted = after.accepted_tokens - before.accepted_tokens;
  st.drafted_prompt = after.drafted_prompt - before.drafted_prompt;
  st.accepted_prompt = after.accepted_prompt - before.accepted_prompt;
  st.drafted_output = after.drafted_output - before.drafted_output;
  st.accepted_output = after.accepted_output - before.accepted_output;
  return st;
}

void print_stats(const GenerationStats& s) {
  std::fprintf(
      stderr, "\n[prompt: %d tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s (%.1f ms/token) | stop: %s]\n",
      s.n_prompt, s.prompt_seconds > 0 ? s.n_prompt / s.prompt_seconds : 0.0, s.n_generated,
      s.gen_seconds > 0 ? s.n_generated / s.gen_seconds : 0.0,
      s.n_generated > 0 ? 1e3 * s.gen_seconds / s.n_generated : 0.0, s.stop_reason.c_str());
  if (!s.spec) return;
  std::fprintf(stderr, "[spec: drafted %lld, accepted %lld (%.1f%%)", static_cast<long long>(s.drafted),
               static_cast<long long>(s.accepted), s.drafted > 0 ? 100.0 * s.accepted / s.drafted : 0.0);
  if (s.drafted_prompt + s.drafted_output > 0)
    std::fprintf(stderr, "; copied from the prompt %lld/%lld, from the output %lld/%lld",
                 static_cast<long long>(s.accepted_prompt), static_cast<long long>(s.drafted_prompt),
                 static_cast<long long>(s.accepted_output), static_cast<long long>(s.drafted_output));
  std::fprintf(stderr, "]\n");
}

}  // namespace sluice::app
