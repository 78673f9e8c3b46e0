// OpenAI chat content parts that are not text (docs/images.md): an `image_url` part
// {"type": "image_url", "image_url": {"url": "data:image/png;base64,...", "detail": "auto"}}
// → the image's bytes (base64 checked) → media/ (decode, preprocess to the detail's token
// budget) → the served model's vision tower (ImageInput::encode: the HTTP worker waits while
// the engine thread encodes between steps) → soft tokens at the positions the chat template put the image. Every bad
// part is a 400 naming it ("messages[1].content[2]: ..."). The model's markup ids come in ImageInput, from the app that
// loaded the tower: no model's markup text is written here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/engine.h"
#include "chat/media_expand.h"
#include "media/decode.h"
#include "media/preprocess.h"
#include "server/image_fetch.h"

namespace sluice::server {

// The served model's image input (sluice serve --mmproj); absent: the model reads text only.
struct ImageInput {
  chat::MediaMarkers markers;                      // the vocabulary's placeholder, begin and end ids
  int32_t text_width = 0;                          // floats per soft token (the text model's n_embd)
  bool blocks = false;                             // each image a bidirectional block (api::SoftTokens::blocks)
  int default_tokens = media::kDefaultSoftTokens;  // --image-tokens: "detail" "auto" or absent
  media::DecodeLimits limits;
  bool allow_urls = false;  // --allow-image-urls: http(s) image URLs fetched within `fetch` (image_fetch.h)
  UrlFetchLimits fetch;
  // One image's soft tokens: n_soft_tokens() rows of text_width floats to `out`. Thread-safe;
  // blocks the caller until done (sluice serve: encoded by the engine thread between steps).
  std::function<void(const media::PreprocessedImage&, float* out)> encode;
};

// The soft-token budget of an image_url part's "detail": "low" 70, "high" 1120, "auto" (or
// none) the server's --image-tokens.
int detail_tokens(const std::string& detail, const ImageInput& in);

// One image part of a request, its data URL checked and its base64 decoded (the bytes are
// not yet decoded as an image).
struct ImagePart {
  std::string where;  // "messages[1].content[0]", for errors
  std::string bytes;  // the image file's bytes
  int tokens = 0;     // soft-token budget
};

// Parses an image_url part. 400 naming `where` for a model without images (`in` null), a
// remote URL, a data URL that is not base64 or not an image, bad base64, a bad detail.
ImagePart parse_image_part(const nlohmann::ordered_json& part, const std::string& where, const ImageInput* in);

// The prompt for the engine: each placeholder id of `ids` expanded (chat::expand_placeholders)
// and the images' soft tokens at those positions. Decodes and preprocesses every image first
// and checks the expanded prompt against the context (`admissible`) before encoding any.
struct ImagePrompt {
  std::vector<int32_t> ids;
  std::shared_ptr<const api::SoftTokens> soft;  // null without images
  int64_t image_tokens = 0;                     // soft tokens of all images
};
ImagePrompt expand_images(std::vector<int32_t> ids, const std::vector<ImagePart>& parts, const ImageInput& in,
                          const api::Engine& engine);

}  // namespace sluice::server
