// Logits of the tiny Gemma 4 / Gemma 3 fixtures against Hugging Face transformers
// (tests/data/golden, written by python/make_golden.py): fed whole, in chunks and token by
// token. A sensitivity test switches each Gemma 4 feature off and shows the comparison
// would catch it. The MoE fixtures (26B-A4B-shaped) run here too; their per-layer sensitivity
// (one expert row, one router scale) is in layer_taps_test.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <memory>

#include "golden_util.h"

#include "base/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "models/model.h"

namespace sluice {
namespace {

using golden::kDir;
using golden::manifest;
using golden::open_fixture;
using golden::read_f32;
using golden::run;
using nlohmann::json;

struct Compare {
  double rel_max = 0;  // max|Δ| / max|ref|
  double nmse = 0;     // Σ Δ² / Σ ref²
  double argmax_agree = 0;
};

Compare compare(const std::vector<float>& got, const std::vector<float>& ref, int64_t V) {
  Compare c;
  double mx = 0, d2 = 0, r2 = 0, dmax = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    mx = std::max(mx, std::fabs(double(ref[i])));
    const double d = double(got[i]) - ref[i];
    dmax = std::max(dmax, std::fabs(d));
    d2 += d * d;
    r2 += double(ref[i]) * ref[i];
  }
  c.rel_max = dmax / mx;
  c.nmse = d2 / r2;
  const int64_t rows = static_cast<int64_t>(ref.size()) / V;
  int agree = 0;
  for (int64_t r = 0; r < rows; ++r) {
    auto am = [&](const std::vector<float>& x) {
      return std::max_element(x.begin() + r * V, x.begin() + (r + 1) * V) - (x.begin() + r * V);
    };
    agree += am(got) == am(ref);
  }
  c.argmax_agree = double(agree) / rows;
  return c;
}

struct Case {
  std::string model, variant;
};

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, MatchesTransformersWholeChunkedAndTokenByToken) {
  const json man = manifest();
  const json& m = man["models"][GetParam().model];
  const json& v = m["variants"][GetParam().variant];
  const auto ids = m["token_ids"].get<std::vector<int32_t>>();
  const int64_t V = m["n_vocab"];
  auto f = open_fixture(v["gguf"].get<std::string>());
  const auto ref = read_f32(kDir + v["logits"].get<std::string>());
  ASSERT_EQ(ref.size(), ids.size() * V);
  for (size_t chunk : {ids.size(), size_t(5), size_t(1)}) {
    const Compare c = compare(run(*f, ids, chunk), ref, V);
    std::printf("%s.%s chunk %zu: max|Δ|/max|ref| %.3g  nmse %.3g  argmax agreement %.3f\n", GetParam().model.c_str(),
                GetParam().variant.c_str(), chunk, c.rel_max, c.nmse, c.argmax_agree);
    // f32 weights run in f32 (activations unrounded): 1e-4 of the largest logit. Quantized
    // weights run llama.cpp's scheme (activations rounded to Q8_0 / Q8_K once per matmul,
    // integer block sums), which the reference (transformers on the GGUF's dequantized
    // weights) does not do: they get the manifest's bound, 5× the nmse make_golden measured
    // for rounding every Linear input to Q8_0 blocks.
    if (GetParam().variant == "f32") {
      EXPECT_LE(c.rel_max, 1e-4) << "chunk " << chunk;
    }
    EXPECT_LE(c.nmse, v["tolerance"]["nmse"].get<double>()) << "chunk " << chunk;
    EXPECT_GE(c.argmax_agree, v["tolerance"]["argmax_agreement_min"].get<double>()) << "chunk " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Values(Case{"tiny-gemma4", "f32"}, Case{"tiny-gemma4", "q8_0"},
                                           Case{"tiny-gemma4", "q4_0"}, Case{"tiny-gemma3", "f32"},
                                           Case{"tiny-gemma3", "q8_0"}, Case{"tiny-gemma3", "q4_0"},
                                           Case{"tiny-gemma4-k-eq-v", "f32"}, Case{"tiny-gemma4-k-eq-v", "q8_0"},
                                           Case{"tiny-gemma4-k-eq-v", "q4_0"}, Case{"tiny-gemma4-moe", "f32"},
                                           Case{"tiny-gemma4-moe", "q8_0"}, Case{"tiny-gemma4-moe", "q4_0"},
                                           Case{"tiny-gemma4-moe-split", "f32"}, Case{"tiny-gemma4-moe-split", "q8_0"},
                                           Case{"tiny-gemma4-moe-split", "q4_0"}),
                         [](const auto& p) {
                           std::string n = p.param.model + "_" + p.param.variant;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// Copies a GGUF, leaving out tensors whose name contains `drop`.
std::vector<uint8_t> rewrite_without(const gguf::GgufFile& f, const std::string& drop) {
  gguf::GgufWriter w;
  for (const auto& kv : f.kvs()) w.add_kv(kv);
  for (const auto& t : f.tensors()) {
    if (t.name.find(drop) != std::string::npos) continue;
    w.add_tensor(t.name, t.type, std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                 std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  return w.to_bytes();
}

TEST(GoldenSensitivity, BreakingEachGemma4FeatureMovesLogitsFarBeyondTolerance) {
  const json man = manifest();
  const json& m = man["models"]["tiny-gemma4"];
  const auto ids = m["token_ids"].get<std::vector<int32_t>>();
  const int64_t V = m["n_vocab"];
  auto f = open_fixture("tiny-gemma4.f32.gguf");
  const auto ref = read_f32(kDir + "tiny-gemma4.f32.logits.f32");
  struct Break {
    const char* what;
    std::function<void(models::ModelSpec&)> adjust;
  };
  const std::vector<Break> breaks = {
      {"window off by one",
       [](models::ModelSpec& s) {
         for (auto& l : s.layers)
           if (l.window) l.window += 1;
       }},
      {"no sliding window",
       [](models::ModelSpec& s) {
         for (auto& l : s.layers) l.window = 0;
       }},
      {"KV source: the first layer of the type, not the last",
       [](models::ModelSpec& s) {
         for (auto& l : s.layers)
           if (!l.has_kv) l.kv_source = l.window ? 0 : l.kv_source;
       }},
      {"no V-norm",
       [](models::ModelSpec& s) {
         for (auto& l : s.layers) l.v_norm = false;
       }},
      {"no PLE", [](models::ModelSpec& s) { s.ple_dim = 0; }},
      {"no softcap", [](models::ModelSpec& s) { s.final_softcap = 0; }},
      {"full instead of proportional RoPE",
       [](models::ModelSpec& s) {
         for (auto& l : s.layers) l.rope_freq_factors = false;
       }},
      {"attention scale 1/sqrt(d)",
       [](models::ModelSpec& s) {
         for (auto& l : s.layers) l.attn_scale = 1.0f / std::sqrt(float(l.head_dim));
       }},
  };
  for (const Break& b : breaks) {
    const Compare c = compare(run(*f, ids, ids.size(), b.adjust), ref, V);
    std::printf("broken: %-45s max|Δ|/max|ref| %.3g\n", b.what, c.rel_max);
    EXPECT_GT(c.rel_max, 1e-2) << b.what;  // 100× the tolerance
  }
  // The layer scalar lives in the weights: drop its tensors (missing means 1.0).
  const auto bytes = rewrite_without(*f, "layer_output_scale");
  auto g = gguf::GgufFile::parse(bytes, "no-layer-scalar");
  const Compare c = compare(run(*g, ids, ids.size()), ref, V);
  std::printf("broken: %-45s max|Δ|/max|ref| %.3g\n", "no layer scalar", c.rel_max);
  EXPECT_GT(c.rel_max, 1e-2);
}

}  // namespace
}  // namespace sluice
