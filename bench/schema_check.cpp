// Compiles JSON Schemas one per input line and reports, per schema, whether it compiled,
// the error or the dropped assertions, the compile time (grammar + mask tables against the
// vocabulary), whether given texts match, and random-walk samples: the driver of
// bench/schema_coverage.py and of the corpus tests.
//
//   schema_check [model.gguf]  < lines   (no model: a byte vocabulary with JSON-ish tokens)
// Input line: {"schema": {...}, "lenient": false, "texts": ["..."], "samples": 3, "seed": 1}
// Output line: {"ok": true, "error": "", "warnings": [], "compile_ms": 1.2, "match": [true],
//               "compile_cpu_ms": 1.1, "samples": ["{...}"]}
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"
#include "grammar/compiled.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace sluice;
using Clock = std::chrono::steady_clock;

std::shared_ptr<const grammar::TokenVocab> byte_vocab() {
  std::vector<std::string> pieces{""};  // 0: end of generation
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"{\"", "\":", "\",\"", "\"}", "},{", "[{", "}]", "true", "false", "null", "12", "0."})
    pieces.push_back(s);
  return std::make_shared<const grammar::TokenVocab>(std::move(pieces), std::vector<int32_t>{0});
}

// Byte tokens feed the text; true when all are accepted and the grammar is complete.
bool matches(const std::shared_ptr<const grammar::CompiledGrammar>& g, const std::string& text, bool bytes) {
  if (!bytes) return false;
  grammar::Matcher m(g);
  for (unsigned char c : text)
    if (!m.advance(1 + c)) return false;
  return m.is_complete();
}

// A random walk through the allowed tokens, leaning towards closing quotes and brackets the
// longer it runs, so most walks finish; "" when a walk does not finish in max_tokens.
std::string sample(const std::shared_ptr<const grammar::CompiledGrammar>& g, std::mt19937& rng, size_t max_tokens) {
  grammar::Matcher m(g);
  const auto& vocab = g->vocab();
  std::vector<uint64_t> mask(vocab.mask_words());
  std::string out;
  for (size_t step = 0; step < max_tokens; ++step) {
    const double lean = std::min(0.95, 0.3 + static_cast<double>(step) / static_cast<double>(max_tokens));
    if (m.is_complete() && std::uniform_real_distribution<>(0, 1)(rng) < lean) return out;
    m.fill_mask(mask);
    std::vector<int32_t> allowed, closing;
    for (int32_t id = 0; id < vocab.n_vocab(); ++id) {
      if (!((mask[id / 64] >> (id % 64)) & 1) || vocab.is_eog(id)) continue;
      allowed.push_back(id);
      const std::string_view p = vocab.piece(id);
      if (p.size() == 1 && (p[0] == '"' || p[0] == '}' || p[0] == ']' || p[0] == '0')) closing.push_back(id);
    }
    if (allowed.empty()) return m.is_complete() ? out : "";
    const auto& pick = (!closing.empty() && std::uniform_real_distribution<>(0, 1)(rng) < lean) ? closing : allowed;
    const int32_t id = pick[std::uniform_int_distribution<size_t>(0, pick.size() - 1)(rng)];
    if (!m.advance(id)) throw Error("a token from the mask was refused");
    out += vocab.piece(id);
    if (m.only_end()) return out;
  }
  return m.is_complete() ? out : "";
}

// CPU time of this thread: the compile's own cost, whatever else the host runs (wall time
// on a loaded host also counts the time slices other processes take).
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

nlohmann::json check(const nlohmann::json& in, const std::shared_ptr<const grammar::TokenVocab>& vocab, bool bytes) {
  nlohmann::json out{{"ok", false}, {"error", ""}, {"warnings", nlohmann::json::array()}};
  grammar::JsonSchemaOptions opts;
  opts.lenient = in.value("lenient", false);
  const auto t0 = Clock::now();
  const double c0 = thread_cpu_ms();
  try {
    const std::string text = in.at("schema").dump();
    grammar::Grammar gr = grammar::json_schema_grammar_text(text, opts);
    out["grammar_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    out["positions"] = gr.elems.size();
    auto g = std::make_shared<const grammar::CompiledGrammar>(std::move(gr), vocab);
    out["compile_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    out["compile_cpu_ms"] = thread_cpu_ms() - c0;
    out["ok"] = true;
    out["warnings"] = g->grammar().warnings;
    nlohmann::json match = nlohmann::json::array();
    for (const auto& t : in.value("texts", nlohmann::json::array()))
      match.push_back(matches(g, t.get<std::string>(), bytes));
    out["match"] = match;
    std::mt19937 rng(in.value("seed", 1));
    nlohmann::json samples = nlohmann::json::array();
    for (int i = 0; i < in.value("samples", 0); ++i) samples.push_back(sample(g, rng, in.value("max_tokens", 400)));
    out["samples"] = samples;
  } catch (const std::exception& e) {
    out["compile_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    out["error"] = e.what();
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::shared_ptr<const grammar::TokenVocab> vocab;
    const bool bytes = argc < 2;
    if (bytes) {
      vocab = byte_vocab();
    } else {
      auto file = gguf::GgufFile::open(argv[1]);
      vocab = grammar::TokenVocab::from_tokenizer(*Tokenizer::from_gguf(*file));
    }
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      std::cout << check(nlohmann::json::parse(line), vocab, bytes)
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << std::endl;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "schema_check: %s\n", e.what());
    return 1;
  }
  return 0;
}
