// The malformed GGUF corpus (gguf_corpus.cpp is the source of truth) and the sweeps:
// every prefix of a valid file, and thousands of seeded byte mutations. The corpus as files:
// tests/tools/sluice_gguf_corpus_tool DIR.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>

#include "base/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "unit/gguf/gguf_corpus.h"

namespace sluice::gguf {
namespace {

// Parses `b` as file `name`; returns the error message, or "" if the file was accepted.
// Any exception other than sluice::Error fails the test.
std::string parse_error(const Bytes& b, const std::string& name, ReadOptions opt = {}) {
  try {
    auto f = GgufFile::parse(b, name, opt);
    return "";
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": threw a non-sluice exception: " << e.what();
    return "(std::exception)";
  }
}

// ---------------------------------------------------------------------------------------
// Table-driven corpus

TEST(GgufCorpus, TableIsWellFormed) {
  const auto& cases = malformed_cases();
  EXPECT_GE(cases.size(), 40u);
  std::set<std::string> names;
  for (const MalformedCase& mc : cases) {
    EXPECT_TRUE(names.insert(mc.name).second) << "duplicate case name " << mc.name;
    EXPECT_FALSE(mc.expect.empty()) << mc.name;
    EXPECT_FALSE(mc.spec.empty()) << mc.name;
    for (char ch : mc.name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << mc.name;
    EXPECT_LT(mc.make().size(), 2048u) << mc.name << ": corpus files stay small";
  }
}

class GgufMalformed : public ::testing::TestWithParam<size_t> {};

TEST_P(GgufMalformed, RejectedWithSpecificMessage) {
  const MalformedCase& mc = malformed_cases()[GetParam()];
  const std::string name = "corpus/" + mc.name + ".gguf";
  const std::string msg = parse_error(mc.make(), name, mc.opt);
  ASSERT_FALSE(msg.empty()) << mc.name << " (" << mc.spec << ") was accepted";
  EXPECT_EQ(msg.rfind(name + ": ", 0), 0u) << "message must start with the file name: " << msg;
  EXPECT_NE(msg.find(mc.expect), std::string::npos)
      << mc.name << " (" << mc.spec << ")\n  message: " << msg << "\n  expected to contain: " << mc.expect;
}

INSTANTIATE_TEST_SUITE_P(Cases, GgufMalformed, ::testing::Range<size_t>(0, malformed_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& p) { return malformed_cases()[p.param].name; });

// The same cases through the file path (GgufFile::open: mmap, empty file, error prefix).
TEST(GgufCorpus, WrittenFilesFailTheSameWayThroughOpen) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sluice_gguf_corpus_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                    std::to_string(static_cast<long>(getpid())));
  const size_t n = write_corpus(dir.string());
  EXPECT_EQ(n, malformed_cases().size() + valid_seed_files().size());
  for (const MalformedCase& mc : malformed_cases()) {
    const std::string path = (dir / (mc.name + ".gguf")).string();
    try {
      GgufFile::open(path, mc.opt);
      ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(mc.expect), std::string::npos) << msg;
    }
  }
  for (const auto& [name, bytes] : valid_seed_files()) {
    const std::string path = (dir / ("valid_" + name + ".gguf")).string();
    auto f = GgufFile::open(path);
    EXPECT_EQ(f->file_size(), bytes.size());
    for (const TensorInfo& t : f->tensors())  // tensor views point into the map
      EXPECT_EQ(std::memcmp(t.data, bytes.data() + f->data_offset() + t.offset, t.nbytes), 0) << path << " " << t.name;
  }
  std::filesystem::remove_all(dir);
}

TEST(GgufCorpus, ValidSeedsParseAndAreConsistent) {
  for (const auto& [name, bytes] : valid_seed_files()) {
    SCOPED_TRACE(name);
    auto f = GgufFile::parse(bytes, name);
    EXPECT_EQ(check_invariants(*f, bytes), "");
    touch_everything(*f);
  }
}

// Types that are valid ggml types but that sluice cannot decode load only on request.
TEST(GgufCorpus, UnsupportedTypeAcceptedOnlyWithOption) {
  RawFile r = example_raw();
  r.tensor("t.q6_k").type = 16;  // iq2_xxs: 256 elements in 66 bytes (fits the 210 present)
  const Bytes b = r.bytes();
  EXPECT_NE(parse_error(b, "iq2.gguf").find("uses type 16 (iq2_xxs), which sluice does not support"),
            std::string::npos);
  auto f = GgufFile::parse(b, "iq2.gguf", ReadOptions{.allow_unsupported_types = true});
  const TensorInfo& t = f->tensor("t.q6_k");
  EXPECT_EQ(t.type, DType::IQ2_XXS);
  EXPECT_EQ(t.nbytes, 66u);
  EXPECT_EQ(check_invariants(*f, b), "");
}

// ---------------------------------------------------------------------------------------
// Truncation sweeps (§10 #1, #23, #24)

// Every prefix of the §11 file is rejected, except prefixes that still hold all of the last
// tensor's bytes: the reader (like ggml) does not require the final padding (§6.3).
TEST(GgufTruncation, EveryPrefixOfTheExample) {
  const Bytes full = example_raw().bytes();
  ASSERT_EQ(full.size(), 608u);
  auto f = GgufFile::parse(full, "full.gguf");
  const TensorInfo& last = f->tensors().back();
  const uint64_t data_end = f->data_offset() + last.offset + last.nbytes;
  ASSERT_EQ(data_end, 594u);  // 320 + 64 + 210
  for (size_t n = 0; n < full.size(); ++n) {
    const Bytes prefix(full.begin(), full.begin() + static_cast<long>(n));
    const std::string name = "prefix_" + std::to_string(n) + ".gguf";
    const std::string msg = parse_error(prefix, name);
    if (n >= data_end) {
      EXPECT_EQ(msg, "") << "prefix " << n << " holds every tensor byte";
      continue;
    }
    ASSERT_NE(msg, "") << "prefix of " << n << " bytes was accepted";
    EXPECT_EQ(msg.rfind(name + ": ", 0), 0u) << msg;
    // Each region fails for its own reason.
    const char* want = n < 24                                        ? "too small for a GGUF header"
                       : n >= 320                                    ? "is not within the file"
                       : n >= 298                                    ? "data section would start at offset 320"
                       : msg.find("cannot fit") != std::string::npos ? "cannot fit"  // header counts vs size
                                                                     : "unexpected end of file";
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
}

// A file whose last tensor ends exactly at the end of the file (no final padding), and a
// tensor-less file: no proper prefix of either is a valid file.
TEST(GgufTruncation, EveryProperPrefixRejectedWhenNothingIsPadding) {
  GgufWriter w;
  w.add_string("general.architecture", "x");
  w.add_array("a", ValueType::I16, std::vector<int16_t>{1, -2, 3});
  w.add_tensor("w", DType::F32, {8}, Bytes(32, 1));
  GgufWriter w0;
  w0.add_string_array("tokenizer.ggml.tokens", {"a", "", "bc"});
  w0.add_f64("x", 1.0);
  for (const Bytes& full : {w.to_bytes(), w0.to_bytes()}) {
    ASSERT_NO_THROW(GgufFile::parse(full, "full.gguf"));
    for (size_t n = 0; n < full.size(); ++n) {
      const Bytes prefix(full.begin(), full.begin() + static_cast<long>(n));
      const std::string msg = parse_error(prefix, "p.gguf");
      EXPECT_NE(msg, "") << "prefix of " << n << " / " << full.size() << " bytes was accepted";
      EXPECT_EQ(msg.rfind("p.gguf: ", 0), 0u) << msg;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Mutation sweeps: every mutation is either rejected with sluice::Error naming the file, or
// accepted as a file that passes the independent invariant check (so an accepted mutation
// cannot hide an out-of-bounds view or an inconsistent layout), and whose values can all be
// read through the accessors (ASan checks the reads).

struct SweepStats {
  size_t accepted = 0, rejected = 0;
};

void check_mutant(const Bytes& b, const std::string& what, SweepStats& st) {
  try {
    auto f = GgufFile::parse(b, "mutant.gguf");
    ++st.accepted;
    const std::string bad = check_invariants(*f, b);
    EXPECT_EQ(bad, "") << what;
    touch_everything(*f);
  } catch (const Error& e) {
    ++st.rejected;
    EXPECT_EQ(std::string(e.what()).rfind("mutant.gguf: ", 0), 0u) << what << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": non-sluice exception " << e.what();
  }
}

// Every single-bit flip of the §11 file.
TEST(GgufMutation, EverySingleBitFlipOfTheExample) {
  const Bytes base = example_raw().bytes();
  SweepStats st;
  for (size_t i = 0; i < base.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes b = base;
      b[i] ^= static_cast<uint8_t>(1u << bit);
      check_mutant(b, "byte " + std::to_string(i) + " bit " + std::to_string(bit), st);
      // The magic is checked byte for byte: no flip there is accepted.
      if (i < 4) {
        EXPECT_EQ(st.accepted, 0u) << "magic flip accepted";
      }
    }
  }
  // Structure flips are rejected; payload/padding flips (tensor data, padding, string text)
  // are accepted. Both kinds exist in this file.
  EXPECT_GT(st.accepted, 0u);
  EXPECT_GT(st.rejected, 0u);
  RecordProperty("accepted", static_cast<int>(st.accepted));
  RecordProperty("rejected", static_cast<int>(st.rejected));
}

// Seeded random multi-byte mutations (overwrites with boundary values, random bytes,
// insertions and deletions) over the example and the writer-made seeds.
TEST(GgufMutation, SeededRandomMutations) {
  std::mt19937_64 rng(0x5EED5EEDu);
  const auto seeds = valid_seed_files();
  static const uint8_t kInteresting[] = {0x00, 0x01, 0x02, 0x07, 0x08, 0x09, 0x0C, 0x0D, 0x10,
                                         0x1F, 0x20, 0x3F, 0x40, 0x7F, 0x80, 0xFE, 0xFF};
  SweepStats st;
  for (int iter = 0; iter < 4000; ++iter) {
    const Bytes& base = seeds[static_cast<size_t>(iter) % seeds.size()].second;
    Bytes b = base;
    const int n_mut = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < n_mut && !b.empty(); ++m) {
      const size_t pos = rng() % b.size();
      switch (rng() % 5) {
        case 0: b[pos] = static_cast<uint8_t>(rng()); break;
        case 1: b[pos] = kInteresting[rng() % sizeof kInteresting]; break;
        case 2: {  // an 8-byte little-endian field set to a boundary value
          static const uint64_t kWide[] = {0,
                                           1,
                                           31,
                                           32,
                                           33,
                                           63,
                                           64,
                                           1ull << 30,
                                           (1ull << 30) + 1,
                                           1ull << 32,
                                           1ull << 62,
                                           1ull << 63,
                                           UINT64_MAX,
                                           UINT64_MAX - 31};
          const uint64_t v = kWide[rng() % (sizeof kWide / sizeof kWide[0])];
          for (size_t k = 0; k < 8 && pos + k < b.size(); ++k) b[pos + k] = static_cast<uint8_t>(v >> (8 * k));
          break;
        }
        case 3: b.erase(b.begin() + static_cast<long>(pos)); break;
        default: b.insert(b.begin() + static_cast<long>(pos), static_cast<uint8_t>(rng())); break;
      }
    }
    check_mutant(b, "iteration " + std::to_string(iter), st);
  }
  EXPECT_GT(st.rejected, 0u);
  RecordProperty("accepted", static_cast<int>(st.accepted));
  RecordProperty("rejected", static_cast<int>(st.rejected));
}

}  // namespace
}  // namespace sluice::gguf
