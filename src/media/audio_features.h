// Gemma 4's audio features: the log-mel spectrogram and frame mask of transformers'
// Gemma4AudioFeatureExtractor (docs/spec/gemma4.md §10.2), from 16 kHz mono f32 samples
// (media/audio_decode.h makes them), and the number of <|audio|> soft tokens the processor puts
// in the prompt for a clip of a given length.
//
// transformers keeps only the first 30 s of a clip (truncation=True, max_length=480000); that
// is the default here. AudioLayout::kChunk30s instead cuts a long clip into consecutive 30 s
// segments, each featurised as transformers would featurise it on its own (llama.cpp's way of
// hearing past 30 s).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice::media {

inline constexpr int32_t kAudioSampleRate = 16000;  // Hz
inline constexpr int32_t kMelBins = 128;
inline constexpr int32_t kMelHop = 160;              // samples between frames (10 ms)
inline constexpr int32_t kMelFrameLength = 320;      // samples in a frame (20 ms), windowed
inline constexpr int32_t kMelFftLength = 512;        // rfft size; 257 bins
inline constexpr int64_t kAudioMaxSamples = 480000;  // 30 s: what one segment holds

// One segment's features: `frames` rows of kMelBins log-mel values ([frames][128], row-major),
// with rows whose mask is 0 set to 0.0 as transformers returns them. The valid rows are a
// prefix: mask[i] = 1 for i < valid_frames.
struct LogMel {
  int64_t frames = 0;
  int64_t valid_frames = 0;
  std::vector<float> values;
  std::vector<uint8_t> mask;
};

enum class AudioLayout {
  kTruncate30s,  // transformers: the first 30 s, the rest dropped
  kChunk30s,     // consecutive 30 s segments, the last one shorter
};

// The sample ranges the layout featurises: [offset, offset + count) for each segment. A clip
// of 0 samples has one empty segment.
struct AudioSegment {
  int64_t offset = 0, count = 0;
};
std::vector<AudioSegment> audio_segments(int64_t n_samples, AudioLayout layout);

// Features of one segment (at most kAudioMaxSamples samples are used: the first 30 s).
LogMel log_mel(std::span<const float> samples);
// Features of every segment of the layout.
std::vector<LogMel> audio_features(std::span<const float> samples, AudioLayout layout);

// Frame arithmetic of one segment of `n` samples (n truncated to 30 s first): the feature
// extractor pads to a multiple of 128 samples, prepends 160 zeros and unfolds windows of 321
// with hop 160; frame i is valid when sample i·160 + 160 of the clip is real.
int64_t mel_frame_count(int64_t n);
int64_t mel_valid_frames(int64_t n);

// The <|audio|> placeholders transformers' Gemma4Processor inserts for one segment of `n`
// samples: the valid frames after the encoder's two stride-2 convolutions,
// ceil(ceil(valid/2)/2) — at most 750 for 30 s (25 tokens a second). 0 below 161 samples.
int64_t audio_token_count(int64_t n);
// Summed over the segments of the layout (what the prompt needs for the whole clip).
int64_t audio_token_count(int64_t n_samples, AudioLayout layout);

// The 128 HTK mel filters over the 257 rfft bins, [257][128] row-major, as transformers'
// mel_filter_bank(257, 128, 0, 8000, 16000, norm=None, mel_scale="htk") computes them (f64).
const std::vector<double>& mel_filters();

}  // namespace sluice::media
