#include "apps/sluice/audio_clips.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "apps/sluice/audio_tower.h"
#include "base/error.h"
#include "media/audio_decode.h"
#include "media/audio_features.h"

namespace sluice::app {

void add_audio_options(CLI::App* cmd, AudioArgs& a) {
  cmd->add_option("--audio", a.clips,
                  "an audio clip (WAV, FLAC, Ogg Vorbis/Opus, MP3; the first 30 s are heard); repeatable, in prompt "
                  "order; needs --mmproj with an audio tower (Gemma 4 E2B/E4B)")
      ->allow_extra_args(false);
  cmd->add_flag("--audio-chunks", a.chunks,
                "hear every clip whole: cut into 30 s segments, each encoded on its own and their tokens placed one "
                "after the other (llama.cpp's way), instead of transformers' first 30 s");
}

int64_t audio_clip_tokens(const std::string& path, media::AudioLayout layout) {
  return media::audio_token_count(static_cast<int64_t>(media::decode_audio_file(path).samples.size()), layout);
}

int32_t encode_audio_clip(const std::string& path, AudioTower& tower, std::vector<float>& rows,
                          media::AudioLayout layout) {
  const media::DecodedAudio a = media::decode_audio_file(path);
  const auto n_samples = static_cast<int64_t>(a.samples.size());
  const std::vector<media::LogMel> segments = media::audio_features(a.samples, layout);
  std::vector<int32_t> counts;
  int32_t n = 0;
  for (const media::LogMel& mel : segments) n += counts.emplace_back(tower.n_tokens(mel));
  if (n <= 0)
    fail("%s: %.4f s of audio is too short to give a single audio token (it takes at least 161 samples at 16 kHz)",
         path.c_str(), static_cast<double>(n_samples) / media::kAudioSampleRate);
  size_t at = rows.size();
  rows.resize(at + static_cast<size_t>(n) * static_cast<size_t>(tower.text_width()));
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < segments.size(); ++i) {
    if (counts[i] <= 0) continue;  // a last segment under 161 samples
    try {
      tower.encode(segments[i], rows.data() + at);
    } catch (const Error& e) {
      fail("%s: %s", path.c_str(), e.what());
    }
    at += static_cast<size_t>(counts[i]) * static_cast<size_t>(tower.text_width());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const bool cut = n_samples > media::kAudioMaxSamples;
  const std::string heard = !cut ? ""
                            : layout == media::AudioLayout::kChunk30s
                                ? " (in " + std::to_string(segments.size()) + " segments of 30 s)"
                                : " (only the first 30 s are heard)";
  std::fprintf(stderr, "audio %s: %s, %d Hz, %d channel%s, %.2f s%s, %d tokens, encoded in %.0f ms\n", path.c_str(),
               media::audio_format_name(a.format), a.source_rate, a.source_channels, a.source_channels == 1 ? "" : "s",
               static_cast<double>(n_samples) / media::kAudioSampleRate, heard.c_str(), n, ms);
  return n;
}

}  // namespace sluice::app
