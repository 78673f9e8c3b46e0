// The Gemma 4 audio tower and projector against transformers, layer by layer: the tiny tower
// of python/tiny_audio.py (clamps that bite) on three mel inputs, two of them padded (one so far
// that its last positions see no valid key), with taps from python/make_audio_tower_golden.py. And the proof the
// comparison can fail: the same file with one layer's weight scaled fails at that layer and not before.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/encoder.h"
#include "threading/thread_pool.h"
#include "unit/models/golden_util.h"

namespace sluice::models {
namespace {

nlohmann::json audio_manifest() {
  std::ifstream in(golden::kDir + "audio/towers.json");
  return nlohmann::json::parse(in);
}

// Largest |a − b| relative to max(1, |b|), over all elements.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(double{a[i]} - b[i]) / std::max(1.0, std::fabs(double{b[i]})));
  return m;
}

std::string tap_name(const TapView& t, int k) {
  const std::string n(t.name), p = "aud" + std::to_string(k) + ".";
  if (n == "a_l_out") return p + "l_out." + std::to_string(t.layer);
  return p + n.substr(2);  // a_sscp → sscp, a_out, a_soft (a_conv0: no golden tap)
}

// Encodes input k of a tower entry (its mel from the taps, its valid frames from the manifest)
// and returns every tap by its golden name.
std::map<std::string, std::vector<float>> encode_with_taps(AudioEncoder& enc, const nlohmann::json& input, int k,
                                                           const std::map<std::string, std::vector<float>>& want) {
  const std::vector<float>& mel = want.at("aud" + std::to_string(k) + ".mel");
  const int32_t frames = input["frames"].get<int32_t>(), valid = input["valid"].get<int32_t>();
  EXPECT_EQ(mel.size(), static_cast<size_t>(frames) * enc.n_mel());
  std::vector<uint8_t> mask(static_cast<size_t>(frames), 0);
  std::fill_n(mask.begin(), valid, uint8_t{1});
  const int32_t n = enc.n_tokens(mask.data(), frames);
  EXPECT_EQ(n, input["tokens"].get<int32_t>());
  std::map<std::string, std::vector<float>> got;
  enc.set_tap([&](const TapView& t) { got[tap_name(t, k)].assign(t.data, t.data + t.rows * t.width); });
  std::vector<float> soft(static_cast<size_t>(n) * enc.text_width());
  enc.encode(mel.data(), mask.data(), frames, soft.data());
  enc.set_tap({});
  EXPECT_EQ(soft, got["aud" + std::to_string(k) + ".soft"]);
  return got;
}

// The first golden tap (in the tower's order) that differs by more than 1e-4; "" if none.
std::string first_failing_tap(AudioEncoder& enc, const nlohmann::json& t, bool print) {
  const auto want = golden::read_taps(golden::kDir + "audio/towers/" + t["id"].get<std::string>() + ".taps.bin");
  const int n_layer = t["options"]["layers"].get<int>();
  std::vector<std::string> order = {"sscp"};
  for (int i = 0; i < n_layer; ++i) order.push_back("l_out." + std::to_string(i));
  order.push_back("out"), order.push_back("soft");
  int k = 0, compared = 0;
  double worst = 0;
  std::string first;
  for (const auto& input : t["inputs"]) {
    const auto got = encode_with_taps(enc, input, k, want);
    for (const std::string& leaf : order) {
      const std::string name = "aud" + std::to_string(k) + "." + leaf;
      if (!want.count(name)) continue;
      EXPECT_TRUE(got.count(name)) << name;
      if (!got.count(name) || got.at(name).size() != want.at(name).size()) {
        ADD_FAILURE() << name << ": size differs";
        continue;
      }
      const double diff = max_rel_diff(got.at(name), want.at(name));
      if (print && diff > 1e-4) std::printf("  %s: relative difference %.2e\n", name.c_str(), diff);
      if (diff > 1e-4 && first.empty()) first = name;
      worst = std::max(worst, diff), ++compared;
    }
    ++k;
  }
  EXPECT_EQ(compared + k, static_cast<int>(want.size()));  // every tap but the inputs compared
  if (print)
    std::printf("%s: %d taps, largest relative difference %.2e\n", t["id"].get<std::string>().c_str(), compared, worst);
  return first;
}

TEST(AudioGolden, EveryLayerMatchesTransformers) {
  const nlohmann::json towers = audio_manifest()["towers"];
  ASSERT_EQ(towers.size(), 1u);
  const nlohmann::json& t = towers[0];
  ThreadPool pool(2);
  LoadOptions opt;
  opt.pool = &pool;
  const auto file = golden::open_fixture(t["gguf"].get<std::string>());
  const std::unique_ptr<AudioEncoder> enc = load_audio_encoder(*file, opt);
  EXPECT_EQ(enc->projector_type(), "gemma4a");
  EXPECT_EQ(enc->n_mel(), 128);
  EXPECT_EQ(enc->text_width(), t["options"]["text_hidden"].get<int>());
  EXPECT_EQ(first_failing_tap(*enc, t, true), "");
}

// The soft tokens of every input of `tower` (mels from its taps), in order, one row each.
std::vector<float> encode_inputs(AudioEncoder& enc, const nlohmann::json& tower) {
  const auto taps = golden::read_taps(golden::kDir + "audio/towers/" + tower["id"].get<std::string>() + ".taps.bin");
  std::vector<float> rows;
  int k = 0;
  for (const auto& input : tower["inputs"]) {
    const int32_t frames = input["frames"].get<int32_t>(), valid = input["valid"].get<int32_t>();
    std::vector<uint8_t> mask(static_cast<size_t>(frames), 0);
    std::fill_n(mask.begin(), valid, uint8_t{1});
    const size_t at = rows.size();
    rows.resize(at + static_cast<size_t>(enc.n_tokens(mask.data(), frames)) * enc.text_width());
    enc.encode(taps.at("aud" + std::to_string(k++) + ".mel").data(), mask.data(), frames, rows.data() + at);
  }
  return rows;
}

// tiny-gemma4 + tiny-audio-e on a prompt with the three inputs as clips (<|audio> n x <|audio|>
// <audio|>): soft tokens replace the placeholders unscaled, the per-layer inputs read the pad
// row there, causal attention throughout (the image path's SeqSlice::embd) — logits within 1e-4
// of transformers' Gemma4ForConditionalGeneration, whole or in chunks that split the clips.
TEST(AudioGolden, ThreeClipPromptMatchesTransformers) {
  const nlohmann::json m = audio_manifest();
  ASSERT_EQ(m["e2e"].size(), 1u);
  const nlohmann::json& e = m["e2e"][0];
  ThreadPool pool(2);
  LoadOptions opt;
  opt.pool = &pool;
  const auto text_file = golden::open_fixture(e["text"].get<std::string>() + ".f32.gguf");
  const auto mm_file = golden::open_fixture(e["tower"].get<std::string>() + ".mmproj.f32.gguf");
  const auto model = load_model(*text_file, opt);
  const auto enc = load_audio_encoder(*mm_file, opt);
  check_encoder_fits(*enc, model->spec(), "mmproj");
  const std::vector<float> rows = encode_inputs(*enc, m["towers"][0]);
  const auto ids = e["token_ids"].get<std::vector<int32_t>>();
  std::vector<const float*> embd;
  int64_t row = 0;
  for (int32_t t : ids)
    embd.push_back(t == e["audio_token_id"].get<int32_t>() ? rows.data() + enc->text_width() * row++ : nullptr);
  ASSERT_EQ(row * enc->text_width(), static_cast<int64_t>(rows.size()));
  const std::vector<float> want = golden::read_f32(golden::kDir + "audio/" + e["logits"].get<std::string>());
  for (size_t chunk : {ids.size(), size_t{5}}) {
    const std::vector<float> got = golden::run_with_soft_tokens(*model, ids, embd, chunk);
    ASSERT_EQ(got.size(), want.size());
    const double diff = max_rel_diff(got, want);
    EXPECT_LE(diff, 1e-4) << "chunk " << chunk;
    std::printf("three-clip prompt, chunks of %zu: largest relative logit difference %.2e\n", chunk, diff);
  }
  // Without the clips (placeholders embedded as themselves) the logits are far off: the test sees them.
  const auto plain = golden::run_with_soft_tokens(*model, ids, std::vector<const float*>(ids.size()), ids.size());
  EXPECT_GT(max_rel_diff(plain, want), 1e-2);
}

// What the padded frames hold never reaches the valid soft tokens (the masks keep it out),
// and without the mask the same frames are heard as audio: more tokens, other values.
TEST(AudioGolden, PaddedFramesNeverReachTheSoftTokens) {
  const nlohmann::json t = audio_manifest()["towers"][0];
  const nlohmann::json& input = t["inputs"][1];
  ASSERT_LT(input["valid"].get<int32_t>(), input["frames"].get<int32_t>());
  ThreadPool pool(2);
  LoadOptions opt;
  opt.pool = &pool;
  const auto file = golden::open_fixture(t["gguf"].get<std::string>());
  const auto enc = load_audio_encoder(*file, opt);
  const auto taps = golden::read_taps(golden::kDir + "audio/towers/" + t["id"].get<std::string>() + ".taps.bin");
  const int32_t frames = input["frames"].get<int32_t>(), valid = input["valid"].get<int32_t>();
  std::vector<float> noisy = taps.at("aud1.mel"), zeroed = noisy;
  std::fill(zeroed.begin() + static_cast<std::ptrdiff_t>(valid) * 128, zeroed.end(), 0.0f);
  std::vector<uint8_t> mask(static_cast<size_t>(frames), 0);
  std::fill_n(mask.begin(), valid, uint8_t{1});
  auto encode = [&](const std::vector<float>& mel, const uint8_t* m) {
    std::vector<float> out(static_cast<size_t>(enc->n_tokens(m, frames)) * enc->text_width());
    enc->encode(mel.data(), m, frames, out.data());
    return out;
  };
  const std::vector<float> a = encode(noisy, mask.data()), b = encode(zeroed, mask.data());
  EXPECT_EQ(a, b);
  EXPECT_LE(max_rel_diff(a, taps.at("aud1.soft")), 1e-4);
  const std::vector<float> unmasked = encode(noisy, nullptr);
  ASSERT_GT(unmasked.size(), a.size());
  EXPECT_GT(
      max_rel_diff(std::vector<float>(unmasked.begin(), unmasked.begin() + static_cast<std::ptrdiff_t>(a.size())), a),
      1e-3);
}

// The fixture parsed from `bytes` (its file read whole), with the first half of the values of
// F32 tensor `name` multiplied by `factor` in place before anything is bound from it (half: a
// uniform scale of a tensor that a norm follows would change nothing).
std::unique_ptr<gguf::GgufFile> scaled_fixture(std::vector<uint8_t>& bytes, const std::string& fixture,
                                               const std::string& name, float factor) {
  bytes = golden::read_bytes(golden::kDir + fixture);
  auto f = gguf::GgufFile::parse(bytes, fixture);
  const gguf::TensorInfo& t = f->tensor(name);
  EXPECT_EQ(t.type, DType::F32);
  uint8_t* at = bytes.data() + (t.data - bytes.data());
  std::vector<float> v(t.n_elements());
  std::memcpy(v.data(), at, v.size() * sizeof(float));
  for (size_t i = 0; i < (v.size() + 1) / 2; ++i) v[i] *= factor;
  std::memcpy(at, v.data(), v.size() * sizeof(float));
  return f;
}

// The comparison sees a wrong weight, at the first tap after it: each tensor below half scaled
// by 1.25 makes the taps before its stage pass and its stage's tap fail.
TEST(AudioGolden, AScaledWeightFailsAtItsLayer) {
  const nlohmann::json t = audio_manifest()["towers"][0];
  ThreadPool pool(2);
  LoadOptions opt;
  opt.pool = &pool;
  const std::vector<std::pair<std::string, std::string>> cases = {{"a.conv1d.0.weight", "aud0.sscp"},
                                                                  {"a.conv1d.1.norm.weight", "aud0.sscp"},
                                                                  {"a.blk.0.attn_k_rel.weight", "aud0.l_out.0"},
                                                                  {"a.blk.0.conv_norm.weight", "aud0.l_out.0"},
                                                                  {"a.blk.1.conv_dw.weight", "aud0.l_out.1"},
                                                                  {"a.blk.1.norm_conv.weight", "aud0.l_out.1"},
                                                                  {"a.blk.1.per_dim_scale.weight", "aud0.l_out.1"},
                                                                  {"a.pre_encode.out.bias", "aud0.out"},
                                                                  {"mm.a.input_projection.weight", "aud0.soft"}};
  for (const auto& [tensor, tap] : cases) {
    SCOPED_TRACE(tensor);
    std::vector<uint8_t> bytes;
    const auto f = scaled_fixture(bytes, t["gguf"].get<std::string>(), tensor, 1.25f);
    const auto enc = load_audio_encoder(*f, opt);
    EXPECT_EQ(first_failing_tap(*enc, t, false), tap);
  }
}

TEST(AudioErrors, BadFilesAndClips) {
  ThreadPool pool(1);
  LoadOptions opt;
  opt.pool = &pool;
  auto load_error = [&](const std::string& fixture) -> std::string {
    try {
      load_audio_encoder(*golden::open_fixture(fixture), opt);
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  };
  // A text model is not an mmproj; a vision-only mmproj has no audio tower.
  EXPECT_NE(load_error("tiny-gemma4.f32.gguf").find("not an mmproj file"), std::string::npos);
  EXPECT_NE(load_error("tiny-vision-e.mmproj.f32.gguf").find("audio projector type ''"), std::string::npos);
  const auto file = golden::open_fixture("tiny-audio-e.mmproj.f32.gguf");
  const auto enc = load_audio_encoder(*file, opt);
  std::vector<float> mel(128 * 8), out(1 << 12);
  EXPECT_THROW(enc->encode(mel.data(), nullptr, 0, out.data()), Error);
  EXPECT_THROW(enc->encode(mel.data(), nullptr, -3, out.data()), Error);
  EXPECT_THROW(enc->encode(mel.data(), nullptr, 30001, out.data()), Error);  // over 5 minutes: refused before reading
  // Token counts: transformers' (t + 2 − 3) // 2 + 1 twice for an unpadded clip; a mask counts
  // the positions whose frame 4t is real. 1 s of audio (99 frames) gives 25 tokens.
  EXPECT_EQ(enc->n_tokens(nullptr, 99), 25);
  EXPECT_EQ(enc->n_tokens(nullptr, 3000), 750);
  EXPECT_EQ(enc->n_tokens(nullptr, 1), 1);
  EXPECT_EQ(enc->n_tokens(nullptr, 0), 0);
  std::vector<uint8_t> mask(10, 1);
  mask[4] = 0, mask[9] = 0;
  EXPECT_EQ(enc->n_tokens(mask.data(), 10), 2);  // positions 0, 1, 2 ← frames 0, 4, 8
  // The audio overload checks the width like the image one (tiny-gemma4 is 64 wide).
  ModelSpec spec;
  spec.arch = "gemma4", spec.n_embd = enc->text_width();
  EXPECT_NO_THROW(check_encoder_fits(*enc, spec, "mmproj"));
  spec.n_embd = enc->text_width() / 2;
  EXPECT_THROW(check_encoder_fits(*enc, spec, "mmproj"), Error);
}

}  // namespace
}  // namespace sluice::models
