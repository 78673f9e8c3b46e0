// Prompt → streamed continuation for the single-user commands (run, chat): prefill the
// prompt, then sample and decode one token per step until an end-of-generation token, the
// token limit or the end of the context. The server's engine does the same for many
// sequences at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "apps/sluice/model_session.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace CLI {
class App;
}

namespace sluice::app {

struct GenerationOptions {
  SamplingParams sampling;
  int n_predict = -1;   // -1: until EOG or the context ends
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
  int n_prompt = 0, n_generated = 0;
  double prompt_seconds = 0, gen_seconds = 0;
  std::string stop_reason;   // "eog", "length", "context", "interrupted"
};

// Runs prompt tokens (appended at position `pos`, which advances) and generates; `emit`
// receives text pieces as they become valid UTF-8. `history` holds every token whose K/V is
// in the cache (prompt included); generated tokens join it once evaluated, so a final token
// that was emitted but never fed back (limit reached) is not in it.
GenerationStats generate(ModelSession& sess, const Tokenizer& tok, std::vector<int32_t>& history, int32_t& pos,
                         std::span<const int32_t> prompt, const GenerationOptions& opt,
                         const std::function<void(const std::string&)>& emit,
                         const std::atomic<bool>* interrupt = nullptr);

void print_stats(const GenerationStats& s);

}  // namespace sluice::app
