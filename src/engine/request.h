// What goes into the engine and what comes out of it: token ids and numbers only, never
// JSON or text (docs/conventions.md §5). The HTTP layer turns a request into an EngineRequest on its
// own thread; the engine thread answers with TokenOutputs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sampling/sampler.h"

namespace sluice::grammar {
class CompiledGrammar;
}

namespace sluice::engine {

using RequestId = uint64_t;

enum class FinishReason : uint8_t {
  kStop,    // a stop token was sampled (or, decided outside the engine, a stop string)
  kLength,  // max_tokens, the end of the context, or the pool cannot hold the sequence
  kAbort,   // cancelled by the caller (client gone, stop string seen) or engine shutdown
  kError,   // the step failed; the message went to the log
};
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

// Constrained decoding: only tokens the grammar allows are sampled (docs/structured-output.md).
// Without a trigger the constraint holds from the first generated token; with one, the
// sequence runs free until it generates `trigger` (a tool-call opener, the token that closes
// the thought channel), and the constraint starts with the token after it.
struct GrammarConstraint {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::optional<int32_t> trigger;
  // true: once the grammar is complete and nothing but an end token could follow, the request
  // finishes with kStop (the last grammar token is text, not a stop token). false (lazy tool
  // calls): the constraint disarms there and re-arms at the next trigger.
  bool stop_when_complete = true;
};

// Soft tokens of a prompt (images, docs/spec/gemma4.md §9.4): per prompt position, a row of
// `width` floats (the model's n_embd) that replaces the position's token embedding, or none.
struct SoftTokens {
  int32_t width = 0;
  std::vector<float> rows;       // [n_rows × width]
  std::vector<const float*> at;  // per prompt position: a row of `rows`, or nullptr
  // Each contiguous run of rows is a bidirectional block (Gemma 4 26B/31B, SeqSlice::embd_blocks):
  // the scheduler then never splits a run between two steps.
  bool blocks = false;
};

struct EngineRequest {
  RequestId id = 0;
  std::vector<int32_t> prompt;      // token ids, BOS included when wanted
  SamplingParams sampling;          // validated before submission (Sampler::validate)
  int32_t max_tokens = 1;           // >= 1, already clamped to the context
  int32_t min_tokens = 0;           // stop ids are banned until this many were generated
  std::vector<int32_t> stop_ids;    // end-of-generation ids plus the request's own
  std::vector<int32_t> banned_ids;  // never sampled (e.g. the tool-call opener for tool_choice none)
  std::optional<GrammarConstraint> constraint;
  int32_t top_logprobs = -1;  // -1: no logprobs; 0: the chosen token's; k: plus k best
  // Scoring mode (sluice logits, perplexity): the logits of every computed position come back
  // in TokenOutput::logits, prompt included; such a request takes nothing from the prefix cache.
  bool all_logits = false;
  // On finish the sequence's K/V stay parked under its id until one later request names it in
  // resume_from (it then reuses the longest common token prefix, to the token) or
  // EngineCore::release_kv frees them: a multi-turn chat computes only what each turn adds.
  bool keep_kv = false;
  std::optional<RequestId> resume_from;
  // Speculative decoding for this request: -1 the engine's setting; 0 none; K at most K
  // drafts a step (never above the engine's SchedulerConfig::draft_max).
  int32_t draft_max = -1;
  // Images: soft tokens at some prompt positions (`at` as long as `prompt`). The prefix cache
  // keys their blocks by the images' content (engine/media_keys.h); a hit never ends inside a
  // bidirectional image (soft->blocks). Such a request does not park or resume K/V.
  std::shared_ptr<const SoftTokens> soft;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// One generated token of one request (or, with no token, only a finish notice).
struct TokenOutput {
  RequestId id = 0;
  int32_t token = -1;                   // -1: no new token in this output
  bool is_stop_token = false;           // the token that ended generation (not text)
  std::optional<TokenLogprob> logprob;  // the chosen token's, when asked for
  std::vector<TokenLogprob> top;        // best alternatives, when asked for
  std::optional<FinishReason> finish;   // set on the last output of a request
  std::string error;                    // kError: what failed, in words a client may read
  int32_t n_prompt = 0;                 // prompt tokens
  int32_t n_cached = 0;                 // of which came from the prefix cache (first admission)
  int32_t n_generated = 0;              // tokens generated so far, this one included
  // Speculation so far: drafts verified, and of those the ones kept.
  int32_t n_drafted = 0;
  int32_t n_accepted = 0;
  // all_logits requests: rows for positions [logits_pos0, logits_pos0 + rows), each n_vocab
  // floats, raw (before penalties, bans and temperature). Each position is reported once.
  std::vector<float> logits;
  int32_t logits_pos0 = 0;
};

}  // namespace sluice::engine
