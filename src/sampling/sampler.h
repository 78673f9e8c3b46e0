// Token sampling from one row of logits. Order of the chain: repetition / presence /
// frequency penalties over the recent history → temperature → top-k → top-p → min-p →
// draw. temperature <= 0 is greedy (argmax; ties go to the lowest id). The random stream is
// private to a sampler and seeded, so the same seed and the same logits give the same
// tokens whatever else runs.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace sluice {

struct SamplingParams {
  float temperature = 1.0f;     // <= 0: greedy
  int32_t top_k = 0;            // 0: off
  float top_p = 1.0f;           // 1: off
  float min_p = 0.0f;           // 0: off
  float repeat_penalty = 1.0f;  // 1: off (llama.cpp-style: divide positive logits, multiply negative)
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;  // history window for the penalties (-1: all)
  uint64_t seed = 0;
};

class Sampler {
 public:
  Sampler(const SamplingParams& p, int32_t n_vocab);
  // Throws sluice::Error naming the first parameter out of range (what the constructor checks).
  static void validate(const SamplingParams& p);

  // Picks a token from logits[0 .. n_vocab) (modified in place); history = tokens so far.
  int32_t sample(float* logits, std::span<const int32_t> history);
  const SamplingParams& params() const { return p_; }

  static int32_t argmax(const float* logits, int32_t n);

 private:
  void apply_penalties(float* logits, std::span<const int32_t> history);

  SamplingParams p_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;   // reused: no allocation per token
  std::vector<int32_t> counts_;
};

}  // namespace sluice
