// The mmproj's audio tower as a member of the stack (--mmproj FILE with --audio): loaded once,
// checked against the text model at start-up (projector type, family, width), encoding one clip
// at a time on a thread pool of its own (images, unlike clips, run on the engine's pool between
// steps: image_tower.h).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "chat/format.h"
#include "chat/media_expand.h"
#include "gguf/reader.h"
#include "media/audio_features.h"
#include "models/encoder.h"
#include "threading/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

class AudioTower {
 public:
  // Throws sluice::Error naming `mmproj` for a file that is not an mmproj, one without an audio
  // tower (a vision-only mmproj), a projector sluice does not implement, or one that cannot
  // feed `text` (another family or width).
  AudioTower(const std::string& mmproj, const models::ModelSpec& text, int threads);
  ~AudioTower();
  AudioTower(const AudioTower&) = delete;
  AudioTower& operator=(const AudioTower&) = delete;

  const std::string& path() const { return path_; }
  int32_t text_width() const;
  // The soft tokens one segment's features give (the valid frames after subsampling).
  int32_t n_tokens(const media::LogMel& mel) const;
  // n_tokens(mel) rows of text_width() floats to `out`. Thread-safe: callers take turns.
  void encode(const media::LogMel& mel, float* out);

 private:
  std::string path_;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<models::AudioEncoder> enc_;
  std::mutex mu_;
};

// Whether an mmproj GGUF has an audio tower (clip.has_audio_encoder or an audio projector type).
bool has_audio_tower(const gguf::GgufFile& f);

// The format's audio ids ("<|audio|>" placeholder, "<|audio>" begin, "<audio|>" end).
// Throws sluice::Error when one is missing: audio needs a Gemma 4 E2B/E4B vocabulary.
chat::MediaMarkers audio_markers(const chat::ChatFormat& f);

}  // namespace sluice::app
