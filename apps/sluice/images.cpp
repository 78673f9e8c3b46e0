#include "apps/sluice/images.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "apps/sluice/image_tower.h"
#include "base/error.h"
#include "media/decode.h"
#include "media/preprocess.h"

namespace sluice::app {

void add_image_options(CLI::App* cmd, ImageArgs& a) {
  cmd->add_option("--mmproj", a.mmproj,
                  "the model's projector (an mmproj GGUF: vision tower gemma4v, audio tower gemma4a)");
  cmd->add_option("--image", a.images, "an image (PNG, JPEG, WebP, GIF); repeatable, in prompt order")
      ->allow_extra_args(false);
  cmd->add_option("--image-tokens", a.tokens, "soft tokens per image: 70, 140, 280 (default), 560 or 1120");
}

std::string place_markers(const std::string& text, const char* marker, size_t n_items) {
  const std::string m(marker);
  size_t have = 0;
  for (size_t p = text.find(m); p != std::string::npos; p = text.find(m, p + 1)) ++have;
  if (have == n_items) return text;
  std::string out;
  for (size_t i = 0; i < n_items; ++i) out += m + "\n\n";
  return out + text;
}

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

}  // namespace sluice::app
