// Mask cost over the JSON Schema corpus on a real vocabulary, reported like MaskBench:
// the full mask (no sample-first fast path), one thread, per token along realistic token
// sequences (the tokenized canonical serialisations of the corpus' valid values), plus the
// compile time per schema. The vocabulary trie is built once, outside the timings.
//
//   grammar_bench [model.gguf] [tests/data/grammar/json_cases.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"
#include "grammar/compiled.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace sluice;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : SLUICE_SOURCE_DIR "/models/gemma-3-270m-q4_k_m.gguf";
  const std::string cases_path = argc > 2 ? argv[2] : SLUICE_SOURCE_DIR "/tests/data/grammar/json_cases.json";
  try {
    auto file = gguf::GgufFile::open(model);
    auto tok = Tokenizer::from_gguf(*file);
    auto t0 = Clock::now();
    auto vocab = grammar::TokenVocab::from_tokenizer(*tok);
    std::printf("vocab: %d tokens, %zu trie nodes, built in %.1f ms (not in the timings)\n", vocab->n_vocab(),
                vocab->nodes().size(), us_since(t0) / 1000);
    std::ifstream in(cases_path);
    if (!in) throw Error("cannot open " + cases_path);
    const auto cases = nlohmann::ordered_json::parse(in);
    std::vector<double> mask_us, compile_ms;
    std::vector<uint64_t> mask(vocab->mask_words());
    size_t rejected = 0;
    for (const auto& c : cases["cases"]) {
      const std::string schema = c["schema"].dump();
      t0 = Clock::now();
      auto g = std::make_shared<const grammar::CompiledGrammar>(grammar::json_schema_grammar_text(schema), vocab);
      compile_ms.push_back(us_since(t0) / 1000);
      const size_t first_mask = mask_us.size();
      for (const auto& v : c["valid"]) {
        grammar::Matcher m(g);
        for (int32_t id : tok->encode(v.get<std::string>(), false, false)) {
          t0 = Clock::now();
          m.fill_mask(mask);
          mask_us.push_back(us_since(t0));
          if (!m.advance(id)) {
            ++rejected;
            break;
          }
        }
        t0 = Clock::now();
        m.fill_mask(mask);
        mask_us.push_back(us_since(t0));
      }
      if (std::getenv("GRAMMAR_BENCH_VERBOSE")) {
        double worst = 0;
        for (size_t i = first_mask; i < mask_us.size(); ++i) worst = std::max(worst, mask_us[i]);
        std::printf(
            "  %-32s compile %8.1f ms  positions %5zu (deferred %5zu)  dependent %8zu  states %6zu  worst mask %9.1f "
            "us\n",
            c["name"].get<std::string>().c_str(), compile_ms.back(), g->stats().positions, g->stats().deferred,
            g->stats().dependent_total, g->stats().states, worst);
      }
    }
    double sum = 0;
    for (double x : mask_us) sum += x;
    std::printf("schemas: %zu, masks: %zu, sequences cut short by a rejected token: %zu\n", compile_ms.size(),
                mask_us.size(), rejected);
    std::printf("mask us/token: mean %.1f  p50 %.1f  p99 %.1f  max %.1f\n", sum / static_cast<double>(mask_us.size()),
                pct(mask_us, 0.5), pct(mask_us, 0.99), pct(mask_us, 1.0));
    std::printf(
        "compile ms/schema: mean %.1f  p50 %.1f  p99 %.1f  max %.1f\n",
        [&] {
          double s = 0;
          for (double x : compile_ms) s += x;
          return s / static_cast<double>(compile_ms.size());
        }(),
        pct(compile_ms, 0.5), pct(compile_ms, 0.99), pct(compile_ms, 1.0));
    return rejected ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grammar_bench: %s\n", e.what());
    return 2;
  }
}
