// Prompt → streamed continuation for the single-user commands (run, chat): one engine
// request (engine_session.h) whose tokens are detokenized as they come. Sampling, stop ids,
// the token limit and the end of the context are the engine's, as for the server.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "apps/sluice/engine_session.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace CLI {
class App;
}

namespace sluice::app {

struct GenerationOptions {
  SamplingParams sampling;
  int n_predict = -1;  // -1: until EOG or the context ends
};

// Adds --temp --top-k --top-p --min-p --seed --repeat-penalty -n; `set` records which flags
// the user gave so the file's general.sampling.* defaults fill the rest.
struct SamplingFlags {
  float temp = 0.8f, top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.0f;
  int top_k = 40, n_predict = -1;
  uint64_t seed = 0;
  bool seed_set = false;
  CLI::App* cmd = nullptr;
};
void add_sampling_flags(CLI::App* cmd, SamplingFlags& f);
GenerationOptions resolve_sampling(const SamplingFlags& f, const gguf::GgufFile& file);

struct GenerationStats {
  int n_prompt = 0, n_generated = 0;  // n_prompt: prompt tokens computed (reused ones excluded)
  double prompt_seconds = 0, gen_seconds = 0;
  std::string stop_reason;                          // "eog", "length", "context", "interrupted"
  bool spec = false;                                // speculative decoding was on (--spec)
  int64_t drafted = 0, accepted = 0;                // drafts verified for this request, and accepted
  int64_t drafted_prompt = 0, accepted_prompt = 0;  // of those, copied from the prompt (n-gram)
  int64_t drafted_output = 0, accepted_output = 0;  // and from the output (self-repetition)
};

struct CompletionRequest {
  std::span<const int32_t> prompt;
  GenerationOptions opt;
  bool keep_kv = false;                          // park the K/V for a later turn to resume from
  std::optional<engine::RequestId> resume_from;  // an earlier keep_kv request of this session
  // Output constrained to this grammar (--json-schema, --grammar); it ends when the grammar closes.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // Images: soft tokens at some prompt positions (apps/sluice/images.h); null without.
  std::shared_ptr<const engine::SoftTokens> soft;
};

// Runs the request to its end; `emit` receives text pieces as they become valid UTF-8.
// Sets `id` to the request's id (for resume_from later). Throws sluice::Error when the
// engine refuses the prompt (empty, longer than the context).
GenerationStats complete(EngineSession& sess, const Tokenizer& tok, const CompletionRequest& r, engine::RequestId& id,
                         const std::function<void(const std::string&)>& emit,
                         const std::atomic<bool>* interrupt = nullptr);

void print_stats(const GenerationStats& s);

}  // namespace sluice::app
