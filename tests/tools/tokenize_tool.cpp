// sluice_tokenize_tool — drives src/tokenizer for the Python cross-checks
// (tests/python/test_tokenizer.py).
//
//   sluice_tokenize_tool encode MODEL.gguf CORPUS.jsonl OUT.jsonl
//       CORPUS: one JSON object per line with "text" (or "hex": arbitrary bytes, e.g. invalid
//       UTF-8). OUT: one object per line:
//         "ids":    [encode(t,0,0), encode(t,0,1), encode(t,1,0), encode(t,1,1)]
//                   (add_special, parse_special)
//         "dec":    hex of [decode(ids00,0,0), decode(ids11,1,1), decode(ids11,0,0),
//                   decode(ids00,0,0, clean_spaces = false)]
//         "stream": hex of StreamDecoder pushes of ids00 + flush, "stream_max_hold": the most
//                   bytes it held back at once, "stream_utf8": every push returned valid UTF-8
//   sluice_tokenize_tool info MODEL.gguf
//       JSON: special ids, flags, EOG ids, non-NORMAL attributes, FNV-1a hashes of all pieces.
//   sluice_tokenize_tool bench MODEL.gguf CORPUS.jsonl
//       JSON: load time, corpus encode time, and encode time of growing concatenations.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

using nlohmann::json;
using sluice::Tokenizer;

namespace {

std::string hex(const std::string& s) {
  static const char k[] = "0123456789abcdef";
  std::string r;
  r.reserve(s.size() * 2);
  for (unsigned char c : s) {
    r.push_back(k[c >> 4]);
    r.push_back(k[c & 15]);
  }
  return r;
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// FNV-1a 64 over (u32 little-endian length, bytes) of every piece; Python recomputes it.
uint64_t fnv_pieces(const Tokenizer& t, bool special) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto eat = [&](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;
  };
  for (int32_t id = 0; id < t.n_vocab(); ++id) {
    const std::string p = t.token_to_piece(id, special);
    const auto n = static_cast<uint32_t>(p.size());
    for (int k = 0; k < 4; ++k) eat(static_cast<unsigned char>(n >> (8 * k)));
    for (unsigned char c : p) eat(c);
  }
  return h;
}

std::vector<std::string> read_corpus(const char* path) {
  std::ifstream in(path);
  if (!in) sluice::fail("cannot open %s", path);
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line);
    if (j.contains("hex")) {
      const std::string h = j.at("hex").get<std::string>();
      std::string bytes;
      for (size_t i = 0; i + 1 < h.size(); i += 2)
        bytes.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
      texts.push_back(bytes);
    } else {
      texts.push_back(j.at("text").get<std::string>());
    }
  }
  return texts;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int cmd_encode(const Tokenizer& t, const char* corpus, const char* out_path) {
  std::ofstream out(out_path);
  if (!out) sluice::fail("cannot write %s", out_path);
  for (const std::string& text : read_corpus(corpus)) {
    json ids = json::array();
    std::vector<std::vector<int32_t>> all;
    for (int m = 0; m < 4; ++m) {
      all.push_back(t.encode(text, /*add_special=*/m >= 2, /*parse_special=*/m % 2 == 1));
      ids.push_back(all.back());
    }
    const auto& ids00 = all[0];
    const auto& ids11 = all[3];
    json dec = json::array({hex(t.decode(ids00, false, false)), hex(t.decode(ids11, true, true)),
                            hex(t.decode(ids11, false, false)), hex(t.decode(ids00, false, false, false))});
    sluice::StreamDecoder sd(t);
    std::string stream;
    size_t max_hold = 0;
    bool utf8 = true;
    for (int32_t id : ids00) {
      const std::string s = sd.push(id);
      utf8 = utf8 && valid_utf8(s);
      stream += s;
      max_hold = std::max(max_hold, sd.n_pending());
    }
    const std::string tail = sd.flush();
    utf8 = utf8 && valid_utf8(tail);
    stream += tail;
    out << json{{"ids", ids},
                {"dec", dec},
                {"stream", hex(stream)},
                {"stream_max_hold", max_hold},
                {"stream_utf8", utf8}}
               .dump()
        << "\n";
  }
  return 0;
}

int cmd_info(const Tokenizer& t, double load_ms) {
  json attrs = json::array();
  for (int32_t id = 0; id < t.n_vocab(); ++id)
    if (t.token_attr(id) != sluice::kAttrNormal) attrs.push_back({id, t.token_attr(id)});
  char h1[32], h0[32];
  std::snprintf(h1, sizeof h1, "%016llx", static_cast<unsigned long long>(fnv_pieces(t, true)));
  std::snprintf(h0, sizeof h0, "%016llx", static_cast<unsigned long long>(fnv_pieces(t, false)));
  json j{{"n_vocab", t.n_vocab()},
         {"model", t.model() == sluice::TokenizerModel::kSpm ? "llama" : "gemma4"},
         {"bos", t.bos()},
         {"eos", t.eos()},
         {"eot", t.eot()},
         {"eom", t.eom()},
         {"unk", t.unk()},
         {"pad", t.pad()},
         {"sep", t.sep()},
         {"mask", t.mask()},
         {"nl", t.linefeed()},
         {"add_bos", t.add_bos()},
         {"add_eos", t.add_eos()},
         {"add_space_prefix", t.add_space_prefix()},
         {"clean_spaces", t.clean_spaces()},
         {"eog", t.eog_ids()},
         {"attrs", attrs},
         {"pieces_fnv_special", h1},
         {"pieces_fnv_plain", h0},
         {"n_special", t.special_tokens().size()},
         {"n_duplicates", t.n_duplicate_texts()},
         {"load_ms", load_ms}};
  std::cout << j.dump() << "\n";
  return 0;
}

int cmd_bench(const Tokenizer& t, const char* corpus, double load_ms) {
  const std::vector<std::string> texts = read_corpus(corpus);
  size_t bytes = 0, n_ids = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (const std::string& s : texts) {
    bytes += s.size();
    n_ids += t.encode(s, true, true).size();
  }
  const double corpus_ms = ms_since(t0);
  std::string all;
  for (const std::string& s : texts) all += s + "\n";
  json scaling = json::array();
  std::string big;
  for (int rep = 1; rep <= 8; rep *= 2) {
    while (big.size() < all.size() * rep) big += all;
    t0 = std::chrono::steady_clock::now();
    const size_t n = t.encode(big, true, true).size();
    const double ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const std::string one_line(big.size(), 'a');  // one long word: the merge loop alone
    const size_t n1 = t.encode(one_line, false, false).size();
    scaling.push_back({{"bytes", big.size()}, {"ids", n}, {"ms", ms}, {"run_a_ms", ms_since(t0)}, {"run_a_ids", n1}});
  }
  std::cout << json{{"load_ms", load_ms},  {"corpus_entries", texts.size()}, {"corpus_bytes", bytes},
                    {"corpus_ids", n_ids}, {"corpus_ms", corpus_ms},         {"scaling", scaling}}
                   .dump()
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 3) {
      std::fprintf(stderr, "usage: %s encode MODEL CORPUS OUT | info MODEL | bench MODEL CORPUS\n", argv[0]);
      return 2;
    }
    const std::string cmd = argv[1];
    auto file = sluice::gguf::GgufFile::open(argv[2]);
    const auto t0 = std::chrono::steady_clock::now();
    auto tok = Tokenizer::from_gguf(*file);
    const double load_ms = ms_since(t0);
    if (cmd == "encode" && argc == 5) return cmd_encode(*tok, argv[3], argv[4]);
    if (cmd == "info" && argc == 3) return cmd_info(*tok, load_ms);
    if (cmd == "bench" && argc == 4) return cmd_bench(*tok, argv[3], load_ms);
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
