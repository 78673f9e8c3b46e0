// Checks shared by the grammar tests: the generated corpora, whole-text matching over the byte
// vocabulary of test_vocab.h, and errors that must name what is wrong.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "base/error.h"
#include "grammar/compiled.h"
#include "grammar/matcher.h"

namespace sluice::grammar::test {

// tests/data/grammar/<file>, parsed keeping each object's key order (a schema's property order
// is the order its grammar emits). Throws, failing the test, when the file is missing.
inline nlohmann::ordered_json load_cases(const std::string& file) {
  const std::string path = std::string(SLUICE_SOURCE_DIR "/tests/data/grammar/") + file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing " + path);
  return nlohmann::ordered_json::parse(in);
}

// Feeds the text one byte token at a time: true when every byte is accepted and the grammar
// is complete at the end.
inline bool matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  for (unsigned char c : text)
    if (!m.advance(1 + c)) return false;
  return m.is_complete();
}

// `compile(text)` must throw an Error whose message contains `needle`.
template <class Compile>
void expect_error_naming(Compile compile, const std::string& text, const std::string& needle) {
  try {
    compile(text);
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace sluice::grammar::test
