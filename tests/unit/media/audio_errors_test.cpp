// Bad audio never crashes: empty, unknown, truncated and corrupted files, zero-length audio,
// absurd sample rates and channel counts, non-finite samples, inputs over the byte and duration
// limits (refused before decoding) — each a sluice::Error whose message names the input and the
// problem. Also the downmix/resample step's edges and the feature extractor's on tiny clips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "media/audio_decode.h"
#include "media/audio_features.h"
#include "media/audio_ogg.h"
#include "media_util.h"

namespace sluice::media {
namespace {

using testing::kAudioDir;
using testing::read_file;

const char* const kFiles[] = {"wav_s16_44k1_stereo.wav", "wav_f32_32k_3ch.wav",     "flac_s16_44k1_stereo.flac",
                              "ogg_vorbis_48k_mono.ogg", "ogg_opus_48k_stereo.ogg", "mp3_44k1_stereo.mp3"};

std::vector<uint8_t> golden(const std::string& file) { return read_file(kAudioDir + "decode/" + file); }

void put(std::vector<uint8_t>& b, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A canonical WAV file: format tag 1 (PCM) or 3 (float), `bits` per sample, `data` as given.
std::vector<uint8_t> wav(int tag, int bits, uint32_t channels, uint32_t rate, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b = {'R', 'I', 'F', 'F'};
  put(b, static_cast<uint32_t>(36 + data.size()), 4);
  for (char c : std::string("WAVEfmt ")) b.push_back(static_cast<uint8_t>(c));
  put(b, 16, 4), put(b, tag, 2), put(b, channels, 2), put(b, rate, 4);
  put(b, rate * channels * (bits / 8), 4), put(b, channels * (bits / 8), 2), put(b, bits, 2);
  for (char c : std::string("data")) b.push_back(static_cast<uint8_t>(c));
  put(b, static_cast<uint32_t>(data.size()), 4);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<uint8_t> pcm16(size_t samples) {
  std::vector<uint8_t> d;
  for (size_t i = 0; i < samples; ++i)
    put(d, static_cast<uint32_t>(static_cast<int16_t>((i * 997) % 20000 - 10000)), 2);
  return d;
}

// The message of the sluice::Error decode_audio throws ("" when it does not throw).
std::string decode_error(const std::vector<uint8_t>& b, const AudioLimits& lim = {}) {
  try {
    decode_audio(b, "clip", lim);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::vector<uint8_t>& b, const std::string& part, const AudioLimits& lim = {}) {
  const std::string msg = decode_error(b, lim);
  EXPECT_NE(msg.find(part), std::string::npos) << "message: '" << msg << "', expected it to contain '" << part << "'";
  EXPECT_EQ(msg.rfind("clip: ", 0), 0u) << msg;  // names the input
}

TEST(AudioErrors, EmptyAndUnknownInput) {
  expect_error({}, "empty (0 bytes)");
  expect_error({'h', 'e', 'l', 'l', 'o'}, "not a supported audio format");
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 0};
  expect_error(png, "not a supported audio format");
  // ADTS AAC (layer bits 00) is not MP3.
  expect_error({0xFF, 0xF1, 0x50, 0x80, 0, 0, 0, 0}, "not a supported audio format");
}

TEST(AudioErrors, SizeLimitComesBeforeDecoding) {
  AudioLimits lim;
  lim.max_bytes = 1000;
  std::vector<uint8_t> junk(1001, 0xAB);  // not even audio: the size is checked first
  expect_error(junk, "over the limit of 1000; refused before decoding", lim);
}

TEST(AudioErrors, ZeroLengthAudio) {
  expect_error(wav(1, 16, 1, 16000, {}), "no samples");
  expect_error(wav(1, 16, 2, 16000, {1, 0}), "no samples");  // half a frame
}

TEST(AudioErrors, AbsurdRatesAndChannels) {
  expect_error(wav(1, 16, 1, 8, pcm16(100)), "sample rate of 8 Hz, outside 1000..384000 Hz");
  expect_error(wav(1, 16, 1, 2000000, pcm16(100)), "sample rate of 2000000 Hz");
  expect_error(wav(1, 16, 64, 16000, pcm16(64 * 10)), "64 channels, outside 1..32");
  // What libsndfile itself refuses (0 Hz, 0 channels) is an error too.
  EXPECT_NE(decode_error(wav(1, 16, 1, 0, pcm16(100))), "");
  EXPECT_NE(decode_error(wav(1, 16, 0, 16000, pcm16(100))), "");
}

TEST(AudioErrors, DurationLimit) {
  AudioLimits lim;
  lim.max_seconds = 0.5;
  expect_error(wav(1, 16, 1, 16000, pcm16(16000)), "lasts 1.0 s, over the limit of 0.5 s; refused before decoding",
               lim);
  lim.max_seconds = 1.0;
  EXPECT_EQ(decode_audio(wav(1, 16, 1, 16000, pcm16(16000)), "clip", lim).samples.size(), 16000u);
}

TEST(AudioErrors, NonFiniteSamples) {
  std::vector<uint8_t> d;
  const float vals[] = {0.5f, std::numeric_limits<float>::quiet_NaN(), 0.25f, 0.0f};
  for (float v : vals) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    put(d, u, 4);
  }
  expect_error(wav(3, 32, 1, 16000, d), "non-finite sample (frame 1)");
  // Finite but huge: the downmix overflows to inf, and is refused after it.
  d.clear();
  for (int i = 0; i < 8; ++i) put(d, 0x7F7FFFFFu, 4);  // FLT_MAX, both channels
  expect_error(wav(3, 32, 2, 16000, d), "too large to process");
  expect_error(wav(3, 32, 1, 44100, d), "too large to process");
}

// Each golden file truncated at many points and with bytes flipped: an error or a decode, never
// a crash; cut inside the header it is always an error.
TEST(AudioErrors, TruncatedAndCorruptFiles) {
  for (const char* f : kFiles) {
    SCOPED_TRACE(f);
    const std::vector<uint8_t> good = golden(f);
    EXPECT_NE(decode_error(std::vector<uint8_t>(good.begin(), good.begin() + 12)), "");
    for (size_t cut : {size_t{4}, size_t{13}, size_t{40}, good.size() / 3, good.size() / 2, good.size() - 1}) {
      const std::string msg = decode_error(std::vector<uint8_t>(good.begin(), good.begin() + cut));
      if (!msg.empty()) {
        EXPECT_EQ(msg.rfind("clip: ", 0), 0u) << msg;
      }
    }
    for (size_t at = 16; at < good.size(); at += good.size() / 23 + 1) {
      std::vector<uint8_t> bad = good;
      for (size_t i = at; i < std::min(bad.size(), at + 8); ++i) bad[i] ^= 0x5A;
      const std::string msg = decode_error(bad);
      if (!msg.empty()) {
        EXPECT_EQ(msg.rfind("clip: ", 0), 0u) << msg;
      }
    }
  }
  expect_error({'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'A', 'V', 'E', 'j', 'u', 'n', 'k'}, "cannot read the wav audio");
  expect_error({'f', 'L', 'a', 'C', 0, 0, 0, 0x22, 1, 2, 3}, "flac");
  expect_error({'I', 'D', '3', 3, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, "mp3");
}

// An Ogg Vorbis stream whose headers libsndfile would refuse is refused before libsndfile sees
// it (libsndfile 1.2.0 leaks 5.8 KB on each such refusal; the ASan build of this test would say
// so): here cut after its first page (the identification header), and with the first page's
// packet doubled.
TEST(AudioErrors, CorruptVorbisHeadersNeverReachLibsndfile) {
  const std::vector<uint8_t> good = golden("ogg_vorbis_48k_mono.ogg");
  const size_t first_page = 27 + good[26] + [&] {
    size_t body = 0;
    for (size_t i = 0; i < good[26]; ++i) body += good[27 + i];
    return body;
  }();
  ASSERT_LT(first_page, good.size());
  expect_error(std::vector<uint8_t>(good.begin(), good.begin() + first_page),
               "Vorbis headers are corrupt: the stream ends before its comment and setup headers");
  EXPECT_TRUE(vorbis_header_problem(good).empty());
  EXPECT_TRUE(vorbis_header_problem(golden("ogg_opus_48k_stereo.ogg")).empty());  // not Vorbis: libsndfile's
}

// decode_audio_file reads a file, refuses one over the byte limit before reading it, and names
// a missing one.
TEST(AudioErrors, FileReadsFromDisk) {
  const std::string path = kAudioDir + "decode/wav_s16_16k_mono.wav";
  EXPECT_EQ(decode_audio_file(path).samples.size(), 3200u);
  AudioLimits lim;
  lim.max_bytes = 100;
  try {
    decode_audio_file(path, lim);
    FAIL() << "expected the size limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("refused before reading"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decode_audio_file("/nonexistent/clip.wav"), Error);
}

TEST(AudioMono16k, DownmixAndPassThrough) {
  const std::vector<float> stereo = {0.5f, -0.5f, 1.0f, 0.0f, 0.25f, 0.75f};
  EXPECT_EQ(to_mono_16k(stereo, 2, 16000, "x"), (std::vector<float>{0.0f, 0.5f, 0.5f}));
  EXPECT_EQ(to_mono_16k(stereo, 1, 16000, "x"), stereo);
  EXPECT_THROW(to_mono_16k(stereo, 4, 16000, "x"), Error);  // not whole frames
  EXPECT_THROW(to_mono_16k(stereo, 0, 16000, "x"), Error);
  // 48 kHz → 16 kHz: ceil(n/3) samples, a 1 kHz tone kept (amplitude within 1%).
  std::vector<float> tone(4800);
  for (size_t i = 0; i < tone.size(); ++i)
    tone[i] = static_cast<float>(0.5 * std::sin(2 * M_PI * 1000.0 * i / 48000.0));
  const std::vector<float> out = to_mono_16k(tone, 1, 48000, "x");
  ASSERT_EQ(out.size(), 1600u);
  // librosa's length in double: ceil(199920 · (16000/7350)) = 435201, one over the exact ceiling.
  EXPECT_EQ(to_mono_16k(std::vector<float>(199920, 0.0f), 1, 7350, "x").size(), 435201u);
  float peak = 0.0f;
  for (size_t i = 200; i < 1400; ++i) peak = std::max(peak, std::fabs(out[i]));
  EXPECT_NEAR(peak, 0.5f, 0.005f);
}

// Clips too short for a frame give zero frames and zero tokens; nothing reads out of bounds.
TEST(AudioFeaturesEdges, TinyClips) {
  for (int64_t n : {0, 1, 127, 128, 160}) {
    const std::vector<float> x(static_cast<size_t>(n), 0.25f);
    const LogMel m = log_mel(x);
    EXPECT_EQ(m.valid_frames, 0) << n;
    EXPECT_EQ(audio_token_count(n), 0) << n;
    EXPECT_EQ(m.values.size(), static_cast<size_t>(m.frames) * kMelBins);
  }
  EXPECT_EQ(audio_token_count(161), 1);
  EXPECT_EQ(audio_token_count(16000), 25);  // one second: 25 tokens
  EXPECT_EQ(audio_segments(0, AudioLayout::kChunk30s).size(), 1u);
  EXPECT_EQ(audio_segments(960001, AudioLayout::kChunk30s).size(), 3u);
}

}  // namespace
}  // namespace sluice::media
