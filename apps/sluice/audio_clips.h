// --audio for the commands that run a prompt: each clip decoded to 16 kHz mono (src/media),
// featurised as transformers' Gemma4AudioFeatureExtractor does (the first 30 s), and encoded by
// the mmproj's audio tower (audio_tower.h) into soft tokens, which take the places of the
// prompt's "<|audio|>" markers (docs/spec/gemma4.md §10).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "media/audio_features.h"

namespace CLI {
class App;
}

namespace sluice::app {

class AudioTower;

struct AudioArgs {
  std::vector<std::string> clips;
  bool chunks = false;  // --audio-chunks: every 30 s heard, each segment encoded on its own
  media::AudioLayout layout() const {
    return chunks ? media::AudioLayout::kChunk30s : media::AudioLayout::kTruncate30s;
  }
};
void add_audio_options(CLI::App* cmd, AudioArgs& a);

// One clip file → its soft tokens appended to `rows` (in `layout`: the first 30 s, or every 30 s
// segment's tokens one after the other); returns how many. Throws sluice::Error naming the file
// for one that cannot be read or decoded, or that is too short to give a token.
int32_t encode_audio_clip(const std::string& path, AudioTower& tower, std::vector<float>& rows,
                          media::AudioLayout layout = media::AudioLayout::kTruncate30s);

// The soft tokens a clip file gives in `layout` (it is decoded to count them).
int64_t audio_clip_tokens(const std::string& path, media::AudioLayout layout);

}  // namespace sluice::app
