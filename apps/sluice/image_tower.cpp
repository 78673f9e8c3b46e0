#include "apps/sluice/image_tower.h"

#include <chrono>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/encoder.h"
#include "threading/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

ImageTower::ImageTower(const std::string& mmproj, const models::ModelSpec& text, int threads)
    : path_(mmproj), file_(gguf::GgufFile::open(mmproj)), pool_(std::make_unique<ThreadPool>(threads)) {
  models::LoadOptions lo;
  lo.pool = pool_.get();
  enc_ = models::load_image_encoder(*file_, lo);
  models::check_encoder_fits(*enc_, text, mmproj);
}

ImageTower::~ImageTower() = default;

int32_t ImageTower::text_width() const { return enc_->text_width(); }
bool ImageTower::bidirectional_images() const { return enc_->bidirectional_images(); }

double ImageTower::encode(const media::PreprocessedImage& img, float* out) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto t0 = std::chrono::steady_clock::now();
  enc_->encode(img.patches.data(), img.patches_x, img.patches_y, out);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

namespace {
int32_t marker_id(const Tokenizer& tok, const char* text) {
  const int32_t id = tok.token_id(text);
  if (id == kNoToken)
    fail("the model's vocabulary has no '%s' token: images need a Gemma 4 model (with its mmproj)", text);
  return id;
}
}  // namespace

chat::MediaMarkers image_markers(const Tokenizer& tok) {
  chat::MediaMarkers m;
  m.placeholder = marker_id(tok, "<|image|>");
  m.begin = marker_id(tok, "<|image>");
  m.end = marker_id(tok, "<image|>");
  return m;
}

}  // namespace sluice::app
