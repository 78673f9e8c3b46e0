// Tiny in-memory tokenizer GGUFs for the unit tests: written with gguf::GgufWriter, read
// back with GgufFile::parse, then loaded by Tokenizer::from_gguf.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/tokenizer.h"

namespace sluice::test {

inline constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

struct ToyVocab {
  std::string model = "llama";
  std::string arch;  // general.architecture, if set
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  std::map<std::string, uint32_t> ids;  // "bos" -> tokenizer.ggml.bos_token_id, ...
  std::map<std::string, bool> flags;    // "add_bos_token" -> tokenizer.ggml.add_bos_token
  bool write_scores = true, write_types = true, write_merges = true;
  int32_t n_scores_drop = 0, n_types_drop = 0;  // write shorter arrays (error tests)

  int32_t add(const std::string& text, float score = 0.0f, int32_t type = kNormal) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size()) - 1;
  }

  // <pad> <eos> <bos> <unk> (ids 0-3) and <0x00>..<0xFF> (ids 4-259), as in spec §6.4/§7.4.
  void add_gemma_prefix() {
    add("<pad>", -1000, kControl);
    add("<eos>", -1000, kControl);
    add("<bos>", -1000, kControl);
    add("<unk>", -1000, kUnknown);
    static const char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, kByte);
    ids["padding"] = 0;
    ids["eos"] = 1;
    ids["bos"] = 2;
    ids["unknown"] = 3;
    flags["add_bos_token"] = true;
    flags["add_eos_token"] = false;
    flags["add_space_prefix"] = false;
  }

  std::vector<uint8_t> bytes() const {
    gguf::GgufWriter w;
    if (!arch.empty()) w.add_string("general.architecture", arch);
    w.add_string("tokenizer.ggml.model", model);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    if (write_scores) {
      std::vector<float> s(scores.begin(), scores.end() - n_scores_drop);
      w.add_array("tokenizer.ggml.scores", gguf::ValueType::F32, s);
    }
    if (write_types) {
      std::vector<int32_t> t(types.begin(), types.end() - n_types_drop);
      w.add_array("tokenizer.ggml.token_type", gguf::ValueType::I32, t);
    }
    if (write_merges && !merges.empty()) w.add_string_array("tokenizer.ggml.merges", merges);
    for (const auto& [k, v] : ids) w.add_u32("tokenizer.ggml." + k + "_token_id", v);
    for (const auto& [k, v] : flags) w.add_bool("tokenizer.ggml." + k, v);
    return w.to_bytes();
  }

  std::unique_ptr<Tokenizer> build() const {
    const std::vector<uint8_t> b = bytes();
    auto f = gguf::GgufFile::parse(b, "toy.gguf");
    return Tokenizer::from_gguf(*f);  // copies everything it needs
  }
};

// Token texts of ids, for readable expectations.
inline std::vector<std::string> texts(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> r;
  for (int32_t id : ids) r.emplace_back(t.token_text(id));
  return r;
}

// Spec §6.4 toy SPM vocabulary.
inline ToyVocab spm_toy() {
  ToyVocab v;
  v.add_gemma_prefix();
  const std::pair<const char*, float> pieces[] = {{"\xE2\x96\x81", -1},
                                                  {"h", -2},
                                                  {"e", -3},
                                                  {"l", -4},
                                                  {"o", -5},
                                                  {"w", -6},
                                                  {"r", -7},
                                                  {"d", -8},
                                                  {"he", -20},
                                                  {"ll", -12},
                                                  {"llo", -30},
                                                  {"hello", -40},
                                                  {"\xE2\x96\x81w", -25},
                                                  {"or", -15},
                                                  {"\xE2\x96\x81wor", -35},
                                                  {"\xE2\x96\x81world", -45},
                                                  {"ld", -14},
                                                  {"\xE2\x96\x81hello", -60}};
  for (const auto& [t, s] : pieces) v.add(t, s);
  return v;
}

// Spec §7.4 toy BPE vocabulary.
inline ToyVocab bpe_toy() {
  ToyVocab v;
  v.model = "gemma4";
  v.add_gemma_prefix();
  for (const char* t : {"\xE2\x96\x81",
                        "h",
                        "e",
                        "l",
                        "o",
                        "w",
                        "r",
                        "d",
                        "he",
                        "ll",
                        "hell",
                        "hello",
                        "\xE2\x96\x81w",
                        "or",
                        "\xE2\x96\x81wor",
                        "ld",
                        "\xE2\x96\x81world",
                        "\n",
                        "\n\n",
                        "\xE2\x96\x81hello"})
    v.add(t, -1000);
  v.merges = {"l l",
              "h e",
              "o r",
              "he ll",
              "\xE2\x96\x81 w",
              "hell o",
              "\xE2\x96\x81w or",
              "l d",
              "\xE2\x96\x81wor ld",
              "\xE2\x96\x81 hello"};
  return v;
}

}  // namespace sluice::test
