// The mmproj's vision tower as a member of the stack (--mmproj FILE): loaded once, checked
// against the text model at start-up (projector type, family, width), and encoding on the
// stack's thread pool — the engine's: the single-user commands encode before they step, and
// `sluice serve` hands each encode to the engine thread as a job it runs in pieces between steps
// (api::Engine::run_between_steps), so that an image never competes with the step for cores.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "chat/format.h"
#include "chat/media_expand.h"
#include "media/preprocess.h"

namespace sluice {
class ThreadPool;
class Tokenizer;
namespace gguf {
class GgufFile;
}
namespace models {
class EncodeJob;
class ImageEncoder;
struct ModelSpec;
}  // namespace models
}  // namespace sluice

namespace sluice::app {

class ImageTower {
 public:
  // Throws sluice::Error naming `mmproj` for a file that is not an mmproj, a projector sluice
  // does not implement, or one that cannot feed `text` (another family or width).
  ImageTower(const std::string& mmproj, const models::ModelSpec& text, ThreadPool& pool);
  ~ImageTower();
  ImageTower(const ImageTower&) = delete;
  ImageTower& operator=(const ImageTower&) = delete;

  const std::string& path() const { return path_; }
  int32_t text_width() const;
  bool bidirectional_images() const;  // SoftTokens::blocks
  // n_soft_tokens() rows of text_width() floats to `out`, on the pool: only where no step runs
  // (callers take turns). Returns the milliseconds it took.
  double encode(const media::PreprocessedImage& img, float* out);
  // The same encode as a job for the engine thread (the same bits); `img` and `out` must
  // outlive it. Throws sluice::Error for a grid the tower cannot take.
  std::unique_ptr<models::EncodeJob> start(const media::PreprocessedImage& img, float* out);
  ThreadPool& pool() { return pool_; }

 private:
  std::string path_;
  std::unique_ptr<gguf::GgufFile> file_;
  ThreadPool& pool_;
  std::unique_ptr<models::ImageEncoder> enc_;
  std::mutex mu_;
};

// Whether an mmproj GGUF has a vision tower (false only for a clip file that says it has none:
// anything else is left to the loader, which names what is wrong with it).
bool has_vision_tower(const gguf::GgufFile& f);

// The model's chat format (chat::chat_format for the file's architecture, ids from `tok`).
chat::ChatFormat model_chat_format(const gguf::GgufFile& file, const Tokenizer& tok);

// A kind of media's ids as the chat format found them (placeholder, begin, end; `texts` in that
// order, for the message); throws sluice::Error naming the missing token and saying what
// `needs` ("images need a Gemma 4 model").
chat::MediaMarkers checked_markers(const chat::MediaMarkers& m, const char* const (&texts)[3], const char* needs);

// The format's image ids ("<|image|>" placeholder, "<|image>" begin, "<image|>" end).
// Throws sluice::Error when one is missing: images need a Gemma 4 vocabulary.
chat::MediaMarkers image_markers(const chat::ChatFormat& f);

}  // namespace sluice::app
