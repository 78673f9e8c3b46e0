#include "apps/sluice/generation.h"

#include <CLI/CLI.hpp>

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
  p.top_k = given("--top-k") ? f.top_k : static_cast<int32_t>(file.get_uint_or("general.sampling.top_k", f.top_k, 1 << 30));
  p.top_p = given("--top-p") ? f.top_p : static_cast<float>(file.get_float_or("general.sampling.top_p", f.top_p));
  p.min_p = given("--min-p") ? f.min_p : static_cast<float>(file.get_float_or("general.sampling.min_p", f.min_p));
  p.repeat_penalty = f.repeat_penalty;
  p.seed = given("--seed") ? f.seed : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  o.n_predict = f.n_predict;
  return o;
}

GenerationStats generate(ModelSession& sess, const Tokenizer& tok, std::vector<int32_t>& history, int32_t& pos,
                         std::span<const int32_t> prompt, const GenerationOptions& opt,
                         const std::function<void(const std::string&)>& emit, const std::atomic<bool>* interrupt) {
  using clock = std::chrono::steady_clock;
  GenerationStats st;
  st.n_prompt = static_cast<int>(prompt.size());
  if (prompt.empty()) fail("empty prompt");
  if (pos + static_cast<int64_t>(prompt.size()) >= sess.ctx_size())
    fail("prompt of %zu tokens does not fit in the context (%d positions, %d used)", prompt.size(), sess.ctx_size(), pos);
  Sampler sampler(opt.sampling, sess.spec().n_vocab);
  StreamDecoder dec(tok);
  std::vector<float> logits;
  auto t0 = clock::now();
  sess.eval(prompt, pos, models::LogitsWanted::kLast, logits);
  history.insert(history.end(), prompt.begin(), prompt.end());
  pos += static_cast<int32_t>(prompt.size());
  auto t1 = clock::now();
  st.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  for (;;) {
    if (interrupt && interrupt->load()) { st.stop_reason = "interrupted"; break; }
    const int32_t next = sampler.sample(logits.data(), history);
    if (tok.is_eog(next)) { st.stop_reason = "eog"; break; }
    ++st.n_generated;
    const std::string piece = dec.push(next);
    if (!piece.empty()) emit(piece);
    if (opt.n_predict >= 0 && st.n_generated >= opt.n_predict) { st.stop_reason = "length"; break; }
    if (pos + 1 >= sess.ctx_size()) { st.stop_reason = "context"; break; }
    const int32_t one[1] = {next};
    sess.eval(one, pos, models::LogitsWanted::kLast, logits);
    history.push_back(next);   // history holds exactly the tokens whose K/V are cached
    ++pos;
  }
  const std::string rest = dec.flush();
  if (!rest.empty()) emit(rest);
  st.gen_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return st;
}

void print_stats(const GenerationStats& s) {
  std::fprintf(stderr, "\n[prompt: %d tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s (%.1f ms/token) | stop: %s]\n",
               s.n_prompt, s.prompt_seconds > 0 ? s.n_prompt / s.prompt_seconds : 0.0, s.n_generated,
               s.gen_seconds > 0 ? s.n_generated / s.gen_seconds : 0.0,
               s.n_generated > 0 ? 1e3 * s.gen_seconds / s.n_generated : 0.0, s.stop_reason.c_str());
}

}  // namespace sluice::app
