#include "apps/sluice/images.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "apps/sluice/engine_session.h"
#include "base/error.h"
#include "gguf/reader.h"
#include "media/decode.h"
#include "media/preprocess.h"
#include "models/encoder.h"
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

int32_t marker_id(const Tokenizer& tok, const char* text) {
  const int32_t id = tok.token_id(text);
  if (id == kNoToken)
    fail("the model's vocabulary has no '%s' token: images need a Gemma 4 model (with its mmproj)", text);
  return id;
}

// One image file → its soft tokens appended to `rows`; returns how many.
int32_t encode_image(const std::string& path, int budget, models::ImageEncoder& enc, std::vector<float>& rows) {
  const auto t0 = std::chrono::steady_clock::now();
  const media::RgbImage img = media::decode_image_file(path);
  media::PreprocessedImage p;
  try {
    p = media::preprocess_image(img, budget);
  } catch (const Error& e) {
    fail("%s: %s", path.c_str(), e.what());
  }
  const size_t at = rows.size();
  rows.resize(at + static_cast<size_t>(p.n_soft_tokens()) * enc.text_width());
  enc.encode(p.patches.data(), p.patches_x, p.patches_y, rows.data() + at);
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
  if (a.mmproj.empty()) fail("--image needs --mmproj FILE (the vision projector that goes with the model)");
  if (!media::is_supported_budget(a.tokens)) fail("--image-tokens %d: expected 70, 140, 280, 560 or 1120", a.tokens);
  const auto file = gguf::GgufFile::open(a.mmproj);
  models::LoadOptions lo;
  lo.pool = &sess.pool();
  const auto enc = models::load_image_encoder(*file, lo);
  models::check_encoder_fits(*enc, sess.spec(), a.mmproj);
  auto soft = std::make_shared<engine::SoftTokens>();
  soft->width = enc->text_width();
  soft->blocks = enc->bidirectional_images();
  std::vector<int32_t> counts;
  for (const std::string& path : a.images) counts.push_back(encode_image(path, a.tokens, *enc, soft->rows));
  const int32_t img = marker_id(tok, kImageMarker), boi = marker_id(tok, "<|image>"), eoi = marker_id(tok, "<image|>");
  std::vector<int64_t> row_at;  // per expanded position: its soft row, or -1
  size_t next = 0;
  int64_t row = 0;
  for (int32_t t : ids) {
    if (t != img) {
      out.ids.push_back(t), row_at.push_back(-1);
      continue;
    }
    if (next == counts.size()) fail("the prompt has more '<|image|>' markers than --image files (%zu)", counts.size());
    out.ids.push_back(boi), row_at.push_back(-1);
    for (int32_t i = 0; i < counts[next]; ++i) out.ids.push_back(img), row_at.push_back(row++);
    out.ids.push_back(eoi), row_at.push_back(-1);
    ++next;
  }
  if (next != counts.size()) fail("the prompt has %zu '<|image|>' markers for %zu images", next, counts.size());
  for (int64_t r : row_at) soft->at.push_back(r < 0 ? nullptr : soft->rows.data() + r * soft->width);
  out.soft = std::move(soft);
  return out;
}

}  // namespace sluice::app
