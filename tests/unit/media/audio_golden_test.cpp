// Audio features, frame masks and <|audio|> counts equal transformers' Gemma4AudioFeatureExtractor
// and Gemma4Processor; decoding equals librosa.load(f, sr=16000) (tests/data/golden/audio, from
// python/make_audio_golden.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <numbers>

#include "media/audio_decode.h"
#include "media/audio_features.h"
#include "media_util.h"

namespace sluice::media {
namespace {

using testing::kAudioDir;
using testing::read_file;

nlohmann::json load_json(const std::string& name) {
  const std::vector<uint8_t> b = read_file(kAudioDir + name);
  return nlohmann::json::parse(b.begin(), b.end());
}

template <typename T>
std::vector<T> load_array(const std::string& name) {
  const std::vector<uint8_t> b = read_file(kAudioDir + name);
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

// make_audio_golden.py's signal(): integer codes / 32768, computed in the same order of double
// operations (and libm's sin, round half to even), so the samples are the same floats.
std::vector<float> make_signal(const nlohmann::json& s) {
  const int64_t n = s["samples"];
  const std::string kind = s["kind"];
  std::vector<int64_t> codes(static_cast<size_t>(n), 0);
  const double pi = std::numbers::pi;
  if (kind == "tone") {
    const double amp = s["amp"];
    for (double f : s["freqs"])
      for (int64_t i = 0; i < n; ++i)
        codes[i] += static_cast<int64_t>(std::nearbyint(amp * 32767.0 * std::sin(2.0 * pi * f * i / 16000.0)));
  } else if (kind == "chirp") {
    const double f0 = s["f0"], f1 = s["f1"], amp = s["amp"];
    const double k = (f1 - f0) / (2.0 * (n / 16000.0));
    for (int64_t i = 0; i < n; ++i) {
      const double t = i / 16000.0;
      codes[i] = static_cast<int64_t>(std::nearbyint(amp * 32767.0 * std::sin(2.0 * pi * (f0 * t + k * t * t))));
    }
  } else if (kind == "noise") {
    uint32_t x = s["seed"];
    for (int64_t i = 0; i < n; ++i) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      codes[i] = static_cast<int64_t>((x >> 18) & 0x3FFF) - 8192;
    }
  }
  std::vector<float> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) out[i] = static_cast<float>(static_cast<double>(codes[i]) / 32768.0);
  return out;
}

// Every signal (tones, chirps, noise, silence; 0.01 s to 45 s, and the second 30 s segment of
// the 45 s ones): frame count, mask and token count equal; the stored frames within 1e-5 of
// transformers' values, every frame's sum over the bins within 128 × 1e-5.
TEST(AudioGolden, FeaturesMatchTransformers) {
  const nlohmann::json g = load_json("features.json");
  ASSERT_GE(g["signals"].size(), 10u);
  float worst = 0.0f;
  for (const auto& c : g["signals"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const std::vector<float> x = make_signal(c["signal"]);
    const bool second = c["signal"].contains("segment");
    const std::vector<LogMel> segs = audio_features(x, second ? AudioLayout::kChunk30s : AudioLayout::kTruncate30s);
    ASSERT_EQ(segs.size(), second ? 2u : 1u);
    const LogMel& got = segs.back();
    ASSERT_EQ(got.frames, c["frames"].get<int64_t>());
    ASSERT_EQ(got.valid_frames, c["valid_frames"].get<int64_t>());
    const int64_t n = static_cast<int64_t>(x.size()) - (second ? kAudioMaxSamples : 0);
    EXPECT_EQ(audio_token_count(n), c["tokens"].get<int64_t>());
    EXPECT_EQ(mel_frame_count(n), got.frames);
    for (int64_t i = 0; i < got.frames; ++i) ASSERT_EQ(got.mask[i], i < got.valid_frames ? 1 : 0);

    const std::vector<float> want = load_array<float>(name + ".f32");
    const std::vector<int64_t> stored = c["stored_frames"];
    ASSERT_EQ(want.size(), stored.size() * kMelBins);
    float max_diff = 0.0f;
    for (size_t k = 0; k < stored.size(); ++k)
      for (int b = 0; b < kMelBins; ++b)
        max_diff = std::max(max_diff, std::fabs(got.values[stored[k] * kMelBins + b] - want[k * kMelBins + b]));
    EXPECT_LE(max_diff, 1e-5f);
    worst = std::max(worst, max_diff);

    const std::vector<float> sums = load_array<float>(name + ".rowsum.f32");
    ASSERT_EQ(static_cast<int64_t>(sums.size()), got.frames);
    for (int64_t i = 0; i < got.frames; ++i) {
      double s = 0.0;
      for (int b = 0; b < kMelBins; ++b) s += got.values[i * kMelBins + b];
      ASSERT_NEAR(s, sums[i], 128 * 1e-5 + 1e-4) << "frame " << i;
    }
  }
  std::printf("largest difference from transformers: %.3g\n", worst);
}

// Chunked layout: the first segment is exactly the truncated clip's features; the token count is
// the segments' sum (45 s: 750 + 375).
TEST(AudioGolden, ChunksAreTruncatedSegments) {
  const nlohmann::json g = load_json("features.json");
  for (const auto& c : g["signals"]) {
    if (c["name"] != "noise_45s") continue;
    const std::vector<float> x = make_signal(c["signal"]);
    const std::vector<LogMel> chunks = audio_features(x, AudioLayout::kChunk30s);
    const LogMel whole = log_mel(x);
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[0].values, whole.values);
    EXPECT_EQ(audio_token_count(720000, AudioLayout::kTruncate30s), 750);
    EXPECT_EQ(audio_token_count(720000, AudioLayout::kChunk30s), 750 + audio_token_count(240000));
    return;
  }
  FAIL() << "noise_45s missing from features.json";
}

// For ~90 lengths from 0 to 45 s: frames, valid frames and the processor's placeholder count.
TEST(AudioGolden, TokenCountsMatchTransformers) {
  const nlohmann::json g = load_json("tokens.json");
  ASSERT_GE(g["lengths"].size(), 80u);
  for (const auto& r : g["lengths"]) {
    const int64_t n = r["samples"];
    SCOPED_TRACE("samples " + std::to_string(n));
    EXPECT_EQ(mel_frame_count(n), r["frames"].get<int64_t>());
    EXPECT_EQ(mel_valid_frames(n), r["valid_frames"].get<int64_t>());
    EXPECT_EQ(audio_token_count(n), r["tokens"].get<int64_t>());
    EXPECT_EQ(audio_token_count(n, AudioLayout::kTruncate30s), r["tokens"].get<int64_t>());
  }
}

// Each file (WAV PCM 8/16/24/32-bit and float, FLAC, Ogg Vorbis, Ogg Opus, MP3; 8 to 96 kHz, 1
// to 3 channels) decodes to librosa.load(f, sr=16000)'s samples: same length; within 1e-6 where
// only the downmix and the resampler act (Debian's libsoxr against python-soxr's copy: equal on
// x86-64), within 1e-5 for the lossy codecs (Debian's decoder builds against soundfile's bundled
// ones: Vorbis differs by 1.5e-7 on x86-64).
TEST(AudioGolden, DecodesLikeLibrosaLoad) {
  const nlohmann::json g = load_json("decode.json");
  ASSERT_GE(g["cases"].size(), 12u);
  for (const auto& c : g["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const DecodedAudio a = decode_audio(read_file(kAudioDir + "decode/" + c["file"].get<std::string>()), name);
    EXPECT_STREQ(audio_format_name(a.format), c["format"].get<std::string>().c_str());
    EXPECT_EQ(a.source_rate, c["rate"].get<int32_t>());
    EXPECT_EQ(a.source_channels, c["channels"].get<int32_t>());
    const std::vector<float> want = load_array<float>("decode/" + name + ".16k.f32");
    ASSERT_EQ(a.samples.size(), want.size());
    float max_diff = 0.0f;
    for (size_t i = 0; i < want.size(); ++i) max_diff = std::max(max_diff, std::fabs(a.samples[i] - want[i]));
    const std::string sub = c["subtype"];
    const bool lossy = sub == "VORBIS" || sub == "OPUS" || sub == "MPEG_LAYER_III";
    EXPECT_LE(max_diff, lossy ? 1e-5f : 1e-6f);
    std::printf("%-22s max |sluice - librosa| = %.3g\n", name.c_str(), max_diff);
  }
}

}  // namespace
}  // namespace sluice::media
