// A prompt's media (--image, --audio) in place: each item encoded by its tower of the mmproj,
// its marker expanded to begin + n × placeholder + end (chat::expand_placeholders, images and
// audio clips mixed in marker order), and the n soft tokens put at those positions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/sluice/audio_clips.h"
#include "apps/sluice/images.h"
#include "engine/request.h"

namespace sluice {
class Tokenizer;
}

namespace sluice::app {

class EngineSession;
struct SessionOptions;

// Fails early (before the model loads) on flags that cannot go together, then tells the
// session which towers of the mmproj to load.
void configure_media(const ImageArgs& images, const AudioArgs& audio, SessionOptions& session);

// The prompt text with a "<|image|>" per image and an "<|audio|>" per clip: the text's own
// markers of a kind when it has exactly as many, else one per item in front (images first).
std::string place_media_markers(const std::string& text, size_t n_images, size_t n_audio);

// Every item of one kind encoded: their rows back to back, and each one's count.
struct EncodedItems {
  std::vector<float> rows;
  std::vector<int32_t> counts;
};
struct EncodedMedia {
  EncodedItems images, audio;
  bool blocks = false;  // SoftTokens::blocks: the images attend bidirectionally
};
// Encodes the images and clips with the session's towers. Throws sluice::Error naming the file
// for an unreadable, corrupt or too short item, and naming the flag for a missing tower.
EncodedMedia encode_media(const ImageArgs& images, const AudioArgs& audio, EngineSession& sess);

struct MediaPrompt {
  std::vector<int32_t> ids;
  std::shared_ptr<const engine::SoftTokens> soft;  // null without media
};
// Expands the markers of `ids` for the encoded items (as many markers of each kind as items)
// and puts their soft tokens there. Throws sluice::Error for a vocabulary without the markers,
// a marker count that differs, and, naming the clips, a prompt past the context.
MediaPrompt place_media(const std::vector<int32_t>& ids, const EncodedMedia& m, const AudioArgs& audio,
                        EngineSession& sess, const Tokenizer& tok);

// encode_media then place_media (one prompt: `sluice run`).
MediaPrompt expand_media(const std::vector<int32_t>& ids, const ImageArgs& images, const AudioArgs& audio,
                         EngineSession& sess, const Tokenizer& tok);

}  // namespace sluice::app
