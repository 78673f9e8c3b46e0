// --audio for the commands that run a prompt: each clip decoded to 16 kHz mono (src/media),
// featurised as transformers' Gemma4AudioFeatureExtractor does (the first 30 s), and encoded by
// the mmproj's audio tower (audio_tower.h) into soft tokens, which take the places of the
// prompt's "<|audio|>" markers (docs/spec/gemma4.md §10).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace sluice::app {

class AudioTower;

struct AudioArgs {
  std::vector<std::string> clips;
};
void add_audio_options(CLI::App* cmd, AudioArgs& a);

// One clip file → its soft tokens appended to `rows`; returns how many. Throws sluice::Error
// naming the file for one that cannot be read or decoded, or that is too short to give a token.
int32_t encode_audio_clip(const std::string& path, AudioTower& tower, std::vector<float>& rows);

}  // namespace sluice::app
