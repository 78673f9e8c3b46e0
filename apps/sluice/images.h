// --mmproj / --image for the commands that run a prompt: each image decoded and preprocessed
// (src/media), encoded by the mmproj's vision tower (models/encoder.h) into soft tokens, which
// take the places the prompt gives them (docs/spec/gemma4.md §9.4).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"

namespace CLI {
class App;
}

namespace sluice {
class Tokenizer;
}

namespace sluice::app {

class EngineSession;

struct ImageArgs {
  std::string mmproj;
  std::vector<std::string> images;
  int tokens = 280;  // --image-tokens: the soft-token budget per image (70, 140, 280, 560, 1120)
};
void add_image_options(CLI::App* cmd, ImageArgs& a);

// The prompt text with one "<|image|>" per image: the text's own markers when it has exactly
// as many, else one per image put in front (image before text, as a chat turn shows them).
std::string place_image_markers(const std::string& text, size_t n_images);

struct ImagePrompt {
  std::vector<int32_t> ids;
  std::shared_ptr<const engine::SoftTokens> soft;  // null without images
};
// Expands each "<|image|>" id of `ids` to "<|image>" + n × "<|image|>" + "<image|>"
// (chat::expand_placeholders) and encodes the images with the session's tower (--mmproj, loaded
// by the stack: SessionOptions::mmproj) into the soft tokens at those n positions. Throws
// sluice::Error naming the file for an unreadable image, a missing mmproj, or a vocabulary
// without the markers.
ImagePrompt expand_images(const std::vector<int32_t>& ids, const ImageArgs& a, EngineSession& sess,
                          const Tokenizer& tok);

}  // namespace sluice::app
