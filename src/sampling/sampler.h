// Token sampling from one row of logits. Order of the chain: repetition / presence /
// frequency penalties over the recent history → temperature → top-k → top-p → min-p →
// draw. A temperature below kGreedyTemperature is greedy (argmax; ties go to the lowest id).
//
// The chain's result is a *processed distribution*: a sparse list of (token, probability),
// every probability finite and > 0, summing to 1 up to rounding. `distribution` returns it and
// `draw` picks from it with one uniform number; `sample` is the two together. Speculative
// verification (src/spec/) uses the same two calls, so it draws from exactly the distribution
// the plain path draws from.
//
// Random numbers are keyed, not streamed: the uniform for the token at position p (its index
// in prompt + output) is a hash of (seed, p, stream). The token at position p therefore does
// not depend on how many draws came before — a preempted, recomputed or speculated sequence
// gets the same tokens as one decoded plainly with the same seed.
//
// Memory: a Sampler is its parameters only. The scratch of one call (a candidate list, a
// count per vocabulary entry and, for a wide top-p, a second list of the nucleus: 12 to 20
// bytes a token) lives in a SamplerWorkspace that its owner reuses — an
// engine slot, or the calling thread's own (`SamplerWorkspace::for_this_thread`), so no
// request allocates vocabulary-sized buffers of its own.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice {

// Below this temperature sampling is greedy (vLLM's threshold): logits / T would overflow
// and the distribution is a point mass on the argmax to float precision anyway.
inline constexpr float kGreedyTemperature = 1e-5f;

struct SamplingParams {
  float temperature = 1.0f;     // < kGreedyTemperature: greedy
  int32_t top_k = 0;            // 0: off
  float top_p = 1.0f;           // 1: off
  float min_p = 0.0f;           // 0: off
  float repeat_penalty = 1.0f;  // 1: off (llama.cpp-style: divide positive logits, multiply negative)
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;  // history window for the penalties (-1: all)
  uint64_t seed = 0;
};

// One entry of a processed distribution.
struct TokenProb {
  int32_t token;
  float prob;
};
static_assert(sizeof(TokenProb) == 8, "sampler.cpp stores entries as (id, weight) lane pairs");

// Independent uses of the random numbers at one position.
enum class RandomStream : uint32_t {
  kDraw = 0,      // the plain draw (and the bonus token of a verification)
  kAccept = 1,    // speculative acceptance test
  kResidual = 2,  // the draw from the residual distribution after a rejection
  kDraft = 3,     // a sampling drafter's own draw
  kGrammar = 4,   // the redraw from the grammar-masked row after the plain draw was rejected
};

// A uniform number in [0, 1) (53 random bits) that depends only on its key.
double keyed_uniform(uint64_t seed, int64_t position, RandomStream stream);

// Scratch memory for sampling one row at a time. Grows to the vocabulary once, then is reused.
class SamplerWorkspace {
 public:
  SamplerWorkspace() = default;
  SamplerWorkspace(const SamplerWorkspace&) = delete;
  SamplerWorkspace& operator=(const SamplerWorkspace&) = delete;
  // The calling thread's workspace (what the calls without a workspace argument use).
  static SamplerWorkspace& for_this_thread();
  size_t bytes_reserved() const {
    return (cand_.capacity() + spare_.capacity()) * sizeof(TokenProb) + counts_.capacity() * sizeof(int32_t);
  }

 private:
  friend class Sampler;
  std::vector<TokenProb> cand_;   // candidates: .prob holds the logit while sorting, then the probability
  std::vector<int32_t> counts_;   // per token id, all zero between calls: repeats in the penalty window
  std::vector<TokenProb> spare_;  // top-p's selection: the nucleus before it is sorted into cand_
};

class Sampler {
 public:
  Sampler(const SamplingParams& p, int32_t n_vocab);
  // Throws sluice::Error naming the first parameter out of range (what the constructor checks).
  static void validate(const SamplingParams& p);

  // Picks the token at position history.size() from logits[0 .. n_vocab) (penalties are
  // applied in place); history = the sequence so far (prompt + output).
  int32_t sample(float* logits, std::span<const int32_t> history) const;
  int32_t sample(float* logits, std::span<const int32_t> history, SamplerWorkspace& ws) const;

  // The processed distribution for the token after `history` (penalties applied to logits in
  // place first). Greedy: one entry {argmax, 1}. Never empty: a row whose every logit is -inf
  // or NaN gives {argmax, 1} too. Valid until ws is used again.
  std::span<const TokenProb> distribution(float* logits, std::span<const int32_t> history, SamplerWorkspace& ws) const;
  // The same distribution as `distribution` over a copy of logits whose entries outside `ids`
  // are -inf, without touching those entries: ids ascending, each once (a grammar's allowed
  // tokens). Greedy: {the allowed argmax, 1}, the lowest id among equals. Empty when no id
  // has a logit above -inf (no NaN is drawn).
  std::span<const TokenProb> distribution_over(float* logits, std::span<const int32_t> ids,
                                               std::span<const int32_t> history, SamplerWorkspace& ws) const;
  // The entry of `dist` that u in [0, 1) falls into, walking the list in order (-1 if empty).
  static int32_t draw(std::span<const TokenProb> dist, double u);
  // This sampler's uniform number for position `position`.
  double uniform(int64_t position, RandomStream s = RandomStream::kDraw) const {
    return keyed_uniform(p_.seed, position, s);
  }

  bool greedy() const { return !(p_.temperature >= kGreedyTemperature); }
  const SamplingParams& params() const { return p_; }
  int32_t n_vocab() const { return n_vocab_; }

  // The tokens of `history` whose logits the penalties change (empty when they are off): what
  // a caller saves to undo the penalties on a row.
  std::span<const int32_t> penalized(std::span<const int32_t> history) const;

  static int32_t argmax(const float* logits, int32_t n);

  // Tests: cut top-p by sorting the candidates in growing steps, the implementation the
  // selection replaced, kept as the reference the selection must match bit for bit.
  void use_sorted_top_p(bool on) { sorted_top_p_ = on; }

 private:
  void apply_penalties(float* logits, std::span<const int32_t> history, SamplerWorkspace& ws) const;
  std::span<const TokenProb> process(SamplerWorkspace& ws, float mx) const;
  std::span<const TokenProb> dense(const float* logits, float mx, std::vector<TokenProb>& c) const;
  static std::span<const TokenProb> normalize(std::vector<TokenProb>& c, size_t m, const double (&sums)[4]);
  static float drawable_max(const float* logits, int32_t n);
  size_t cut_top_p(std::vector<TokenProb>& c, size_t n, float mx, bool sorted, SamplerWorkspace& ws) const;
  size_t cut_top_p_sorting(std::vector<TokenProb>& c, size_t done, size_t n, float mx, double total, double cum,
                           bool sorted) const;
  float inverse_temperature() const { return static_cast<float>(1.0 / static_cast<double>(p_.temperature)); }

  SamplingParams p_;
  int32_t n_vocab_;
  bool sorted_top_p_ = false;
};

// The probability of `token` in a processed distribution (0 when absent). Linear in its size.
float prob_of(std::span<const TokenProb> dist, int32_t token);

}  // namespace sluice
