// Audio decoding: WAV (PCM 8/16/24/32-bit, float), FLAC, Ogg (Vorbis, Opus) and MP3 from bytes
// in memory, through Debian's libsndfile, to the f32 mono 16 kHz samples Gemma 4's feature
// extractor takes (media/audio_features.h). Channels are averaged (librosa's to_mono), then the
// rate converted with libsoxr at its HQ recipe, linear phase (librosa's default resampler,
// res_type="soxr_hq"); docs/spec/gemma4.md §10.1 says where this departs from a transformers
// user's librosa.load(path, sr=16000).
//
// Every failure throws sluice::Error naming the input. The byte size is checked before anything
// is parsed; the sample rate, channel count and duration from the header before any sample is
// decoded (and the duration again while decoding, for streams whose header does not say).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sluice::media {

enum class AudioFormat { kUnknown, kWav, kFlac, kOgg, kMp3 };
const char* audio_format_name(AudioFormat f);  // "wav", "flac", "ogg", "mp3", "unknown"

// The container from the first bytes (RIFF/WAVE, RF64/WAVE, fLaC, OggS, an ID3 tag or an MPEG
// audio frame sync); kUnknown when none matches. Only these reach libsndfile.
AudioFormat sniff_audio_format(std::span<const uint8_t> bytes);

struct AudioLimits {
  int64_t max_bytes = int64_t{64} << 20;  // the encoded input: 64 MiB (OpenAI's upload cap is 25 MB)
  double max_seconds = 1200.0;            // 20 min: 19.2 M samples, 77 MB at 16 kHz f32
  int32_t min_sample_rate = 1000;         // Hz
  int32_t max_sample_rate = 384000;       // Hz
  int32_t max_channels = 32;
};

struct DecodedAudio {
  std::vector<float> samples;  // mono, kAudioSampleRate (16 kHz)
  AudioFormat format = AudioFormat::kUnknown;
  int32_t source_rate = 0;  // Hz, as stored
  int32_t source_channels = 0;
};

// Decodes `bytes` (`name` is for messages: a path, "audio 2", ...). Throws sluice::Error.
DecodedAudio decode_audio(std::span<const uint8_t> bytes, const std::string& name, const AudioLimits& limits = {});
// Reads and decodes a file (refusing one over limits.max_bytes before reading it).
DecodedAudio decode_audio_file(const std::string& path, const AudioLimits& limits = {});

// The mono 16 kHz step on its own: averages `channels` interleaved channels of `frames` frames at
// `rate` Hz and resamples to 16 kHz (a copy when already there). Throws sluice::Error.
std::vector<float> to_mono_16k(std::span<const float> interleaved, int32_t channels, int32_t rate,
                               const std::string& name);

}  // namespace sluice::media
