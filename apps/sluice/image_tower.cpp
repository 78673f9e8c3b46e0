#include "apps/sluice/image_tower.h"

#include <chrono>

#include "base/error.h"
#include "gguf/reader.h"
#include "models/encoder.h"
#include "threading/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

ImageTower::ImageTower(const std::string& mmproj, const models::ModelSpec& text, ThreadPool& pool)
    : path_(mmproj), file_(gguf::GgufFile::open(mmproj)), pool_(pool) {
  // A file that is not an mmproj at all gets load_image_encoder's own message.
  if (!has_vision_tower(*file_))
    fail("%s has no vision tower (no clip.vision.projector_type): --image needs the mmproj of a model that sees",
         mmproj.c_str());
  models::LoadOptions lo;
  lo.pool = &pool_;
  enc_ = models::load_image_encoder(*file_, lo);
  models::check_encoder_fits(*enc_, text, mmproj);
}

ImageTower::~ImageTower() = default;

bool has_vision_tower(const gguf::GgufFile& f) {
  return f.get_string_or("general.architecture", "") != "clip" || f.get_bool_or("clip.has_vision_encoder", false) ||
         f.has("clip.vision.projector_type") || f.has("clip.projector_type");
}

int32_t ImageTower::text_width() const { return enc_->text_width(); }
bool ImageTower::bidirectional_images() const { return enc_->bidirectional_images(); }

double ImageTower::encode(const media::PreprocessedImage& img, float* out) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto t0 = std::chrono::steady_clock::now();
  enc_->encode(img.patches.data(), img.patches_x, img.patches_y, out);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::unique_ptr<models::EncodeJob> ImageTower::start(const media::PreprocessedImage& img, float* out) {
  return enc_->start_encode(img.patches.data(), img.patches_x, img.patches_y, out, pool_);
}

chat::ChatFormat model_chat_format(const gguf::GgufFile& file, const Tokenizer& tok) {
  return chat::chat_format(chat::chat_arch_from_gguf(file.get_string_or("general.architecture", "")), tok);
}

chat::MediaMarkers checked_markers(const chat::MediaMarkers& m, const char* const (&texts)[3], const char* needs) {
  const int32_t ids[3] = {m.placeholder, m.begin, m.end};
  for (int i = 0; i < 3; ++i)
    if (ids[i] < 0) fail("the model's vocabulary has no '%s' token: %s", texts[i], needs);
  return m;
}

chat::MediaMarkers image_markers(const chat::ChatFormat& f) {
  static const char* const kTexts[3] = {"<|image|>", "<|image>", "<image|>"};
  return checked_markers(f.image, kTexts, "images need a Gemma 4 model (with its mmproj)");
}

}  // namespace sluice::app
