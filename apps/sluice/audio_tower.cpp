#include "apps/sluice/audio_tower.h"

#include "apps/sluice/image_tower.h"

#include "base/error.h"
#include "gguf/reader.h"
#include "models/encoder.h"
#include "threading/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

bool has_audio_tower(const gguf::GgufFile& f) {
  return f.get_bool_or("clip.has_audio_encoder", false) || f.has("clip.audio.projector_type");
}

AudioTower::AudioTower(const std::string& mmproj, const models::ModelSpec& text, int threads)
    : path_(mmproj), file_(gguf::GgufFile::open(mmproj)), pool_(std::make_unique<ThreadPool>(threads)) {
  // A file that is not an mmproj at all gets load_audio_encoder's own message.
  if (file_->get_string_or("general.architecture", "") == "clip" && !has_audio_tower(*file_))
    fail(
        "%s has no audio tower (no clip.audio.projector_type): --audio needs the mmproj of a model that hears "
        "(Gemma 4 E2B/E4B)",
        mmproj.c_str());
  models::LoadOptions lo;
  lo.pool = pool_.get();
  enc_ = models::load_audio_encoder(*file_, lo);
  models::check_encoder_fits(*enc_, text, mmproj);
}

AudioTower::~AudioTower() = default;

int32_t AudioTower::text_width() const { return enc_->text_width(); }

int32_t AudioTower::n_tokens(const media::LogMel& mel) const {
  return enc_->n_tokens(mel.mask.data(), static_cast<int32_t>(mel.frames));
}

void AudioTower::encode(const media::LogMel& mel, float* out) {
  std::lock_guard<std::mutex> lock(mu_);
  enc_->encode(mel.values.data(), mel.mask.data(), static_cast<int32_t>(mel.frames), out);
}

chat::MediaMarkers audio_markers(const chat::ChatFormat& f) {
  static const char* const kTexts[3] = {"<|audio|>", "<|audio>", "<audio|>"};
  return checked_markers(f.audio, kTexts, "audio needs a Gemma 4 E2B/E4B model (with its mmproj)");
}

}  // namespace sluice::app
