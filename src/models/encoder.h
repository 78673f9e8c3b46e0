// Encoders: a media item's preprocessed input → soft tokens in the text model's width, which
// replace that item's placeholder tokens in the prompt (docs/spec/gemma4.md §9.4). Loaded from
// a separate GGUF (the "mmproj" file llama.cpp also reads); the text model never sees pixels.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "models/model.h"

namespace sluice::gguf {
class GgufFile;
}

namespace sluice::models {

// One media item's encode cut into pieces, so that a caller can run it between other work on
// the same threads (the engine's steps, docs/images.md "Encoding between steps"). The encode is
// a list of stages (a patch embedding, each layer's halves, the projection), each a number of
// rows; a piece is a range of rows of one stage. The output is bit-identical however the encode
// is cut: every kernel computes a row the same way whatever rows share its call.
class EncodeJob {
 public:
  virtual ~EncodeJob() = default;
  bool done() const { return stage_ >= n_stages(); }
  // The next piece, at most `rows` rows of the current stage (at least one, rounded down to the
  // stage's alignment); returns done().
  bool run_piece(int64_t rows);
  // Pieces until `budget` has passed (at least one), each sized from the measured time per row
  // of its stage's kind to end near the budget; returns done().
  bool run_for(std::chrono::nanoseconds budget);
  void run_all();  // every stage in one piece (the unsliced encode)
  int64_t pieces() const { return pieces_; }

 protected:
  static constexpr int kKinds = 8;
  virtual int n_stages() const = 0;
  virtual int64_t stage_rows(int stage) const = 0;
  virtual int stage_kind(int stage) const = 0;     // < kKinds: stages of one kind cost alike per row
  virtual int64_t row_align(int stage) const = 0;  // a piece ends at a multiple of it or at the stage's end
  virtual void run_rows(int stage, int64_t r0, int64_t r1) = 0;

 private:
  int stage_ = 0;
  int64_t row_ = 0, pieces_ = 0;
  std::array<double, kKinds> ns_per_row_{};  // 0: not measured yet
};

class ImageEncoder {
 public:
  virtual ~ImageEncoder() = default;
  virtual const std::string& projector_type() const = 0;  // "gemma4v"
  virtual int32_t text_width() const = 0;                 // soft-token width (the text model's n_embd)
  virtual int32_t patch_size() const = 0;                 // 16
  virtual int32_t pool_kernel() const = 0;                // 3: soft tokens = patches / 9
  // Whether the text models this tower feeds attend bidirectionally within an image
  // (SeqSlice::embd_blocks): the 26B/31B tower (the one with standardisation) does; the
  // E2B/E4B one is causal. The text GGUF carries no use_bidirectional_attention key.
  virtual bool bidirectional_images() const = 0;
  // The soft tokens of one image: `patches` [rows·cols][3·p·p] in raster order, each patch
  // [py][px][channel] with values in [0, 1] (media::PreprocessedImage); cols and rows multiples
  // of pool_kernel(). Writes (rows/k)·(cols/k) rows of text_width() floats to `out`.
  // Throws sluice::Error for a grid the tower cannot take (too wide for its position table).
  virtual void encode(const float* patches, int32_t cols, int32_t rows, float* out) = 0;
  // The same encode as a job run in pieces on `pool` (the bits of encode()); `patches` and `out`
  // must outlive it. Throws sluice::Error for a bad grid at once, as encode() does.
  virtual std::unique_ptr<EncodeJob> start_encode(const float* patches, int32_t cols, int32_t rows, float* out,
                                                  ThreadPool& pool) = 0;
  // Debug taps of later encode() calls (TapView names "v_embd", "v_l_out" (layer i),
  // "v_pooled", "v_soft"); empty: stop.
  virtual void set_tap(Tap tap) = 0;
};

class AudioEncoder {
 public:
  virtual ~AudioEncoder() = default;
  virtual const std::string& projector_type() const = 0;  // "gemma4a"
  virtual int32_t text_width() const = 0;                 // soft-token width (the text model's n_embd)
  virtual int32_t n_mel() const = 0;                      // 128: the width of one input frame
  // Soft tokens of `frames` input frames whose validity `mask` gives (nullptr: all valid): the
  // valid positions after the two stride-2 stages (position t is valid iff frame 4t is).
  virtual int32_t n_tokens(const uint8_t* mask, int32_t frames) const = 0;
  // The soft tokens of one clip: `mel` [frames][n_mel()] log-mel features, `mask` one byte per
  // frame (nonzero: real audio; nullptr: all real). Padded frames are kept out exactly as
  // transformers keeps them out. Writes n_tokens(mask, frames) rows of text_width() floats.
  // Throws sluice::Error for a frame count it cannot take (none, or over 5 minutes).
  virtual void encode(const float* mel, const uint8_t* mask, int32_t frames, float* out) = 0;
  // Debug taps of later encode() calls (TapView names "a_conv0", "a_sscp", "a_l_out" (layer
  // i), "a_out" — every position, padded ones too — and "a_soft"); empty: stop.
  virtual void set_tap(Tap tap) = 0;
};

// Reads an mmproj GGUF (general.architecture "clip"); throws sluice::Error naming the file
// when it is not one, or its projector type is not one sluice implements.
std::unique_ptr<ImageEncoder> load_image_encoder(const gguf::GgufFile& f, const LoadOptions& opt);
// The same for its audio tower (clip.audio.projector_type; E2B/E4B files hold both).
std::unique_ptr<AudioEncoder> load_audio_encoder(const gguf::GgufFile& f, const LoadOptions& opt);

// Throws sluice::Error unless a projector of `projector_type` writing `text_width` floats can
// feed `text` (same width, a model family that takes it).
void check_projector_fits(const std::string& projector_type, int32_t text_width, const ModelSpec& text,
                          const std::string& mmproj_name);
inline void check_encoder_fits(const ImageEncoder& enc, const ModelSpec& text, const std::string& mmproj_name) {
  check_projector_fits(enc.projector_type(), enc.text_width(), text, mmproj_name);
}
inline void check_encoder_fits(const AudioEncoder& enc, const ModelSpec& text, const std::string& mmproj_name) {
  check_projector_fits(enc.projector_type(), enc.text_width(), text, mmproj_name);
}

}  // namespace sluice::models
