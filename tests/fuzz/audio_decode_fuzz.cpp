// libFuzzer target for the audio decoders' entry (src/media/audio_decode.cpp: decode_audio,
// which sniffs the container and calls libsndfile — with libFLAC, libvorbis, libopus and
// libmpg123 behind it — then downmixes and resamples with libsoxr) and the feature extractor
// on what comes out (src/media/audio_features.cpp).
//
// Each input is decoded under a 5 s limit (so a mutated header cannot make one run slow);
// sluice::Error is the only accepted failure. Decoded audio must be non-empty and finite, and
// its first second's features have the promised shape, mask and finite values.
//
// Seeds: the golden decode cases (tests/data/golden/audio/decode/*.{wav,flac,ogg,mp3}).
//   tests/fuzz/run_media.sh audio build-fuzz 60

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "base/error.h"
#include "media/audio_decode.h"
#include "media/audio_features.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace m = sluice::media;
  m::AudioLimits lim;
  lim.max_seconds = 5.0;
  try {
    const m::DecodedAudio a = m::decode_audio(std::span<const uint8_t>(data, size), "fuzz", lim);
    if (a.samples.empty() || a.source_channels < 1 || a.source_rate < lim.min_sample_rate) std::abort();
    for (float v : a.samples)
      if (!std::isfinite(v)) std::abort();
    const std::span<const float> head(a.samples.data(), std::min<size_t>(a.samples.size(), m::kAudioSampleRate));
    const m::LogMel f = m::log_mel(head);
    const int64_t n = static_cast<int64_t>(head.size());
    if (f.frames != m::mel_frame_count(n) || f.valid_frames != m::mel_valid_frames(n) ||
        f.values.size() != static_cast<size_t>(f.frames) * m::kMelBins ||
        f.mask.size() != static_cast<size_t>(f.frames))
      std::abort();
    for (float v : f.values)
      if (!std::isfinite(v)) std::abort();
  } catch (const sluice::Error&) {
  }
  return 0;
}
