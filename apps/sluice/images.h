// --mmproj / --image for the commands that run a prompt: each image decoded and preprocessed
// (src/media), encoded by the mmproj's vision tower (models/encoder.h) into soft tokens, which
// take the places the prompt gives them (docs/spec/gemma4.md §9.4; media_prompt.h puts them
// there, beside audio clips).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace sluice::app {

struct ImageArgs {
  std::string mmproj;
  std::vector<std::string> images;
  int tokens = 280;  // --image-tokens: the soft-token budget per image (70, 140, 280, 560, 1120)
};
void add_image_options(CLI::App* cmd, ImageArgs& a);

// The prompt text with one `marker` per item: the text's own markers when it has exactly as
// many, else one per item put in front (media before text, as a chat turn shows them).
std::string place_markers(const std::string& text, const char* marker, size_t n_items);
inline std::string place_image_markers(const std::string& text, size_t n_images) {
  return place_markers(text, "<|image|>", n_images);
}

class ImageTower;
// One image file → its soft tokens (`budget` of them at most) appended to `rows`; returns how
// many. Throws sluice::Error naming the file for one that cannot be read, decoded or sized.
int32_t encode_image(const std::string& path, int budget, ImageTower& tower, std::vector<float>& rows);

}  // namespace sluice::app
