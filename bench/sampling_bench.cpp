// Sampling and speculative-decoding micro-benchmarks (Google Benchmark), one thread:
//   * Sample/<chain>: one token from a 262,144-logit row (Gemma's vocabulary) shaped like a
//     model's (a few strong candidates over a wide normal tail), through the whole chain:
//     temperature only; top-k 64; top-p 0.95 (its nucleus is wide on this row); a typical
//     chat setting; greedy.
//   * Ngram/observe: the n-gram index's cost per observed token (n in [2, 4]).
//   * Ngram/propose/K: one proposal of K tokens after a 4,096-token context.
// Build: cmake -DSLUICE_BUILD_BENCH=ON; run build/bench/sampling_bench.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sampling/sampler.h"
#include "spec/ngram_drafter.h"

namespace sluice {
namespace {

constexpr int32_t kVocab = 262144;

std::vector<float> model_like_row() {
  std::vector<float> row(kVocab);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 2.5f);
  for (auto& v : row) v = nd(rng);
  row[17] = 14.0f;
  row[99] = 13.0f;
  row[5000] = 12.5f;
  return row;
}

void sample(benchmark::State& st, SamplingParams p) {
  const auto row = model_like_row();
  std::vector<int32_t> history(64);
  std::mt19937 rng(2);
  for (auto& t : history) t = static_cast<int32_t>(rng() % kVocab);
  const Sampler s(p, kVocab);
  SamplerWorkspace ws;
  std::vector<float> l(row.size());
  for (auto _ : st) {
    l = row;
    benchmark::DoNotOptimize(s.sample(l.data(), history, ws));
  }
}
BENCHMARK_CAPTURE(sample, temperature_only, SamplingParams{1.0f});
BENCHMARK_CAPTURE(sample, top_k_64, SamplingParams{1.0f, 64});
BENCHMARK_CAPTURE(sample, top_p_0_95, SamplingParams{1.0f, 0, 0.95f});
BENCHMARK_CAPTURE(sample, chat_T0_7_k64_p0_95_minp0_05_rep1_1, SamplingParams{0.7f, 64, 0.95f, 0.05f, 1.1f});
BENCHMARK_CAPTURE(sample, greedy, SamplingParams{0.0f});

std::vector<int32_t> text_like(size_t n) {
  std::vector<int32_t> t(n);
  std::mt19937 rng(3);
  for (size_t i = 0; i < n; ++i) t[i] = i >= 64 && rng() % 4 == 0 ? t[i - 64] : static_cast<int32_t>(rng() % 5000);
  return t;
}

void ngram_observe(benchmark::State& st) {
  const auto text = text_like(1 << 16);
  spec::NgramDrafter d;
  size_t i = 0;
  for (auto _ : st) {
    if (i == text.size()) {
      st.PauseTiming();
      d.reset();
      i = 0;
      st.ResumeTiming();
    }
    d.observe({&text[i++], 1});
  }
}
BENCHMARK(ngram_observe);

void ngram_propose(benchmark::State& st) {
  const auto text = text_like(4096);
  spec::NgramDrafter d;
  d.observe(text);
  spec::Draft out;
  for (auto _ : st) {
    d.propose(static_cast<int32_t>(st.range(0)), out);
    benchmark::DoNotOptimize(out.size());
  }
}
BENCHMARK(ngram_propose)->Arg(4)->Arg(8);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
