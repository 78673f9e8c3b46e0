// Vocabularies for the grammar tests: every single byte plus multi-byte tokens that cross
// JSON's structure (`",`, `":"`, `}]`, ...), so the mask's dependent-token path is exercised.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "grammar/vocab.h"

namespace sluice::grammar::test {

inline constexpr int32_t kEos = 0;

inline std::shared_ptr<const TokenVocab> byte_vocab(bool multi = true) {
  std::vector<std::string> pieces{""};  // 0: <eos>, no bytes
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  if (multi) {
    for (const char* s : {"{\"", "\":",    "\":\"",     "\",",  "\",\"",   "\"}",  "\"]",   "}]",       "},",  "},{",
                          "],",  "[{",     "[\"",       "true", "false",   "null", "12",    "0.",       ".5",  "-1",
                          "abc", "name",   "\"name\":", "ab\"", "a\",\"b", "e+",   "1e",    "  ",       "\n",  "00",
                          "-0",  "x\":1}", "<|\"|>",    "|>",   "\\\"",    "\\n",  "\\u00", "\xC3\xA9", "\xC3"})
      pieces.push_back(s);
  }
  return std::make_shared<const TokenVocab>(std::move(pieces), std::vector<int32_t>{kEos});
}

}  // namespace sluice::grammar::test
