#include "apps/sluice/images.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "apps/sluice/engine_session.h"
#include "apps/sluice/image_tower.h"
#include "base/error.h"
#include "chat/media_expand.h"
#include "media/decode.h"
#include "media/preprocess.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

namespace {
constexpr const char* kImageMarker = "<|image|>";
}

void add_image_options(CLI::App* cmd, ImageArgs& a) {
  cmd->add_option("--mmproj", a.mmproj, "the model's vision projector (an mmproj GGUF, projector gemma4v)");
  cmd->add_option("--image", a.images, "an image (PNG, JPEG, WebP, GIF); repeatable, in prompt order")
      ->allow_extra_args(false);
  cmd->add_option("--image-tokens", a.tokens, "soft tokens per image: 70, 140, 280 (default), 560 or 1120");
}

std::string place_image_markers(const std::string& text, size_t n_images) {
  size_t have = 0;
  for (size_t p = text.find(kImageMarker); p != std::string::npos; p = text.find(kImageMarker, p + 1)) ++have;
  if (have == n_images) return text;
  std::string out;
  for (size_t i = 0; i < n_images; ++i) out += std::string(kImageMarker) + "\n\n";
  return out + text;
}

namespace {

// One image file → its soft tokens appended to `rows`; returns how many.
int32_t encode_image(const std::string& path, int budget, ImageTower& tower, std::vector<float>& rows) {
  const auto t0 = std::chrono::steady_clock::now();
  const media::RgbImage img = media::decode_image_file(path);
  media::PreprocessedImage p;
  try {
    p = media::preprocess_image(img, budget);
  } catch (const Error& e) {
    fail("%s: %s", path.c_str(), e.what());
  }
  const size_t at = rows.size();
  rows.resize(at + static_cast<size_t>(p.n_soft_tokens()) * tower.text_width());
  tower.encode(p, rows.data() + at);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "image %s: %dx%d -> %dx%d, %d tokens, encoded in %.0f ms\n", path.c_str(), img.width, img.height,
               p.width, p.height, p.n_soft_tokens(), ms);
  return p.n_soft_tokens();
}

}  // namespace

ImagePrompt expand_images(const std::vector<int32_t>& ids, const ImageArgs& a, EngineSession& sess,
                          const Tokenizer& tok) {
  ImagePrompt out;
  if (a.images.empty()) {
    if (!a.mmproj.empty()) std::fprintf(stderr, "--mmproj given without --image: no images in this prompt\n");
    out.ids = ids;
    return out;
  }
  ImageTower* tower = sess.image_tower();
  if (tower == nullptr) fail("--image needs --mmproj FILE (the vision projector that goes with the model)");
  if (!media::is_supported_budget(a.tokens)) fail("--image-tokens %d: expected 70, 140, 280, 560 or 1120", a.tokens);
  auto soft = std::make_shared<engine::SoftTokens>();
  soft->width = tower->text_width();
  soft->blocks = tower->bidirectional_images();
  std::vector<int32_t> counts;
  for (const std::string& path : a.images) counts.push_back(encode_image(path, a.tokens, *tower, soft->rows));
  const chat::MediaMarkers markers = image_markers(tok);
  chat::ExpandedPrompt e;
  try {
    e = chat::expand_placeholders(ids, markers, counts);
  } catch (const Error& err) {
    fail("%s (one '<|image|>' per --image)", err.what());
  }
  out.ids = std::move(e.ids);
  for (int64_t r : e.soft_row) soft->at.push_back(r < 0 ? nullptr : soft->rows.data() + r * soft->width);
  out.soft = std::move(soft);
  return out;
}

}  // namespace sluice::app
