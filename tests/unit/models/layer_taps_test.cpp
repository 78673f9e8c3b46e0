// Every layer's activations of the tiny f32 fixtures against transformers' (the per-layer taps
// make_golden.py records: embd, ple, attn_out.i, ffn_out.i, l_out.i, result_norm), so a fault
// names the first activation, and so the layer, where the forward departs from the reference.
// A sensitivity test scales one row of each weight matrix of each layer by 1.01 and shows the
// comparison then fails first at that layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "golden_util.h"

namespace sluice {
namespace {

using nlohmann::json;

// A tap differs when max|Δ| exceeds this share of max|ref|. f32 weights run in f32 against
// transformers' f32 (float rounding only), so the honest forward stays well below it.
constexpr double kTapRelTol = 2e-5;

struct TapDiff {
  std::string name;  // "attn_out.3", ...
  int layer = -1;
  double rel = 0;  // max|Δ| / max|ref|
};

// The taps of a whole-sequence run of `f`, in forward order, each compared with `ref`.
std::vector<TapDiff> compare_taps(const gguf::GgufFile& f, const std::vector<int32_t>& ids,
                                  const std::map<std::string, std::vector<float>>& ref) {
  std::vector<TapDiff> out;
  models::Tap tap = [&](const models::TapView& v) {
    const std::string name = v.layer >= 0 ? std::string(v.name) + "." + std::to_string(v.layer) : v.name;
    const auto it = ref.find(name);
    if (it == ref.end()) {
      ADD_FAILURE() << "tap " << name << " has no reference";
      return;
    }
    const std::vector<float>& r = it->second;
    EXPECT_EQ(static_cast<size_t>(v.rows * v.width), r.size()) << name;
    if (static_cast<size_t>(v.rows * v.width) != r.size()) return;
    double mx = 0, dmax = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      mx = std::max(mx, std::fabs(double(r[i])));
      dmax = std::max(dmax, std::fabs(double(v.data[i]) - r[i]));
    }
    out.push_back({name, v.layer, dmax / mx});
  };
  golden::run(f, ids, ids.size(), {}, tap);
  return out;
}

std::optional<TapDiff> first_failure(const std::vector<TapDiff>& taps) {
  for (const TapDiff& t : taps)
    if (!(t.rel <= kTapRelTol)) return t;
  return std::nullopt;
}

const char* kModels[] = {"tiny-gemma4", "tiny-gemma3", "tiny-gemma4-k-eq-v", "tiny-gemma4-moe",
                         "tiny-gemma4-moe-split"};

// The router's top-k expert ids of every MoE layer equal transformers' exactly (the taps
// "moe_experts.i" hold them as floats; any other id differs by at least 1).
TEST(LayerTaps, MoeTopKChoicesEqualTransformers) {
  const json man = golden::manifest();
  for (const char* mid : {"tiny-gemma4-moe", "tiny-gemma4-moe-split"}) {
    const json& m = man["models"][mid];
    const json& v = m["variants"]["f32"];
    auto f = golden::open_fixture(v["gguf"].get<std::string>());
    const auto ref = golden::read_taps(golden::kDir + v["taps"].get<std::string>());
    const auto ids = m["token_ids"].get<std::vector<int32_t>>();
    int layers = 0;
    models::Tap tap = [&](const models::TapView& t) {
      if (std::string(t.name) != "moe_experts") return;
      const std::vector<float>& r = ref.at("moe_experts." + std::to_string(t.layer));
      ASSERT_EQ(r.size(), static_cast<size_t>(t.rows * t.width));
      EXPECT_EQ(std::vector<float>(t.data, t.data + r.size()), r) << mid << " layer " << t.layer;
      ++layers;
    };
    golden::run(*f, ids, ids.size(), {}, tap);
    EXPECT_EQ(layers, m["options"]["layers"].get<int>()) << mid;
  }
}

TEST(LayerTaps, EveryLayerMatchesTransformers) {
  const json man = golden::manifest();
  for (const char* mid : kModels) {
    const json& m = man["models"][mid];
    const json& v = m["variants"]["f32"];
    auto f = golden::open_fixture(v["gguf"].get<std::string>());
    const auto ref = golden::read_taps(golden::kDir + v["taps"].get<std::string>());
    const auto taps = compare_taps(*f, m["token_ids"].get<std::vector<int32_t>>(), ref);
    EXPECT_EQ(taps.size(), ref.size()) << mid << ": every reference tap is produced once";
    double worst = 0;
    for (const TapDiff& t : taps) worst = std::max(worst, t.rel);
    std::printf("%s: %zu taps, worst max|Δ|/max|ref| %.3g\n", mid, taps.size(), worst);
    const auto bad = first_failure(taps);
    EXPECT_FALSE(bad) << mid << ": first departs at " << bad->name << " (layer " << bad->layer << "): " << bad->rel;
  }
}

// Each matrix blk.<il>.* of the file (the ones the forward reads: KV-shared layers carry no
// K/V), one row scaled by 1.01 in a copy of the file.
TEST(LayerTaps, ScalingOneRowOfAnyLayerWeightFailsAtThatLayer) {
  const json man = golden::manifest();
  for (const char* mid : kModels) {
    const json& m = man["models"][mid];
    const json& v = m["variants"]["f32"];
    const auto ids = m["token_ids"].get<std::vector<int32_t>>();
    const auto ref = golden::read_taps(golden::kDir + v["taps"].get<std::string>());
    const std::vector<uint8_t> bytes = golden::read_bytes(golden::kDir + v["gguf"].get<std::string>());
    auto orig = gguf::GgufFile::parse(bytes, mid);
    int checked = 0;
    for (const gguf::TensorInfo& t : orig->tensors()) {
      int il = -1;
      // Matrices, the MoE experts' 3-D stacks (the middle row is row 0 of the middle expert)
      // and the MoE scale vectors (router input scale, per-expert output scale).
      const bool scale = t.n_dims == 1 && t.name.ends_with(".scale");
      if ((t.n_dims < 2 && !scale) || std::sscanf(t.name.c_str(), "blk.%d.", &il) != 1) continue;
      ASSERT_EQ(t.type, DType::F32) << t.name;
      // The middle row: an output unit, not the first or last of a fused part.
      const uint64_t row = t.rows() / 2, off = static_cast<uint64_t>(t.data - bytes.data()) + row * t.row_bytes();
      std::vector<uint8_t> copy = bytes;
      float* w = reinterpret_cast<float*>(copy.data() + off);
      if (scale) {  // one element: the middle input's router scale, the middle expert's scale
        w[t.ne[0] / 2] *= 1.01f;
      } else {
        for (uint64_t i = 0; i < t.ne[0]; ++i) w[i] *= 1.01f;
      }
      auto g = gguf::GgufFile::parse(copy, t.name + " ×1.01");
      const auto bad = first_failure(compare_taps(*g, ids, ref));
      ASSERT_TRUE(bad) << mid << ": scaling a row of " << t.name << " went unnoticed";
      EXPECT_EQ(bad->layer, il) << mid << ": " << t.name << " scaled, first failure at " << bad->name;
      std::printf("%s: %-28s row %llu ×1.01 -> first failure %s (%.3g)\n", mid, t.name.c_str(),
                  static_cast<unsigned long long>(row), bad->name.c_str(), bad->rel);
      ++checked;
    }
    EXPECT_GE(checked, m["options"]["layers"].get<int>() * 6) << mid;
  }
}

}  // namespace
}  // namespace sluice
