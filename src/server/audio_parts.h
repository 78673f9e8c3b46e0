// OpenAI's audio content part (docs/audio.md):
// {"type": "input_audio", "input_audio": {"data": BASE64, "format": "wav"}} → the clip's bytes
// (size checked before base64 is decoded) → media/ (decode to 16 kHz mono, log-mel features of
// the first 30 s, as transformers' Gemma4AudioFeatureExtractor) → the served model's audio tower
// (AudioInput::encode, on the HTTP worker's thread, after the context check) → soft tokens at the
// positions of the chat template's audio placeholders. Every bad part is a 400 naming it
// ("messages[0].content[1]: ..."). The markup ids come in AudioInput, from the app that loaded
// the tower: no model's markup text is written here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/engine.h"
#include "chat/media_expand.h"
#include "media/audio_decode.h"
#include "media/audio_features.h"
#include "server/content_parts.h"

namespace sluice::server {

// The served model's audio input (sluice serve --mmproj with an audio tower); absent: no audio.
struct AudioInput {
  chat::MediaMarkers markers;  // the vocabulary's placeholder, begin and end ids
  int32_t text_width = 0;      // floats per soft token
  media::AudioLimits limits;   // max_bytes: serve --max-audio
  // The soft tokens one segment's features give, and its rows (n × text_width floats to `out`).
  // Thread-safe.
  std::function<int32_t(const media::LogMel&)> n_tokens;
  std::function<void(const media::LogMel&, float* out)> encode;
};

// One input_audio part, its base64 decoded (the bytes not yet decoded as audio).
struct AudioPart {
  std::string where;   // "messages[0].content[1]", for errors
  std::string bytes;   // the audio file's bytes
  std::string format;  // as the client declared it ("wav", "mp3", ...)
};

// Parses an input_audio part. 400 naming `where` for a model without audio (`in` null), a
// missing or non-string data/format, an unknown format, data over the limit (before decoding),
// bad or empty base64.
AudioPart parse_audio_part(const nlohmann::ordered_json& part, const std::string& where, const AudioInput* in);

// A clip decoded and featurised, not yet encoded: its segments' features and token counts.
struct PreparedClip {
  std::string where;
  std::vector<media::LogMel> segments;
  std::vector<media::AudioSegment> spans;  // each segment's samples (16 kHz) in the clip
  std::vector<int32_t> counts;             // each segment's tokens
  int32_t tokens = 0;                      // summed over the segments
  int64_t samples = 0;                     // of the whole clip
  double seconds = 0;                      // of audio decoded
};
// Decodes one clip's bytes (`format` checked against what the bytes are) and featurises it in
// `layout`. 400 naming `where` for corrupt, truncated, empty or too short audio, an absurd
// rate or channel count, or a format that is not what the bytes are.
PreparedClip prepare_clip(const std::string& bytes, const std::string& format, const std::string& where,
                          const AudioInput& in, media::AudioLayout layout = media::AudioLayout::kTruncate30s);

// The clips' rows, encoded in order into one block (counts[i] rows for clip i).
std::vector<float> encode_clips(const std::vector<PreparedClip>& clips, const AudioInput& in);

// `p` (the prompt with its images already expanded, expand_images) with each audio placeholder
// expanded for its clip and the clips' soft tokens added. Checks the expanded prompt against the
// context before encoding any clip. 400 for a placeholder count that differs from the clips, a
// clip past the context (naming the first that does not fit), audio beside bidirectional images.
ImagePrompt place_audio(ImagePrompt p, const std::vector<PreparedClip>& clips, const AudioInput& in,
                        const api::Engine& engine);

// Every part decoded (prepare_clip), then place_audio.
ImagePrompt add_audio(ImagePrompt p, const std::vector<AudioPart>& parts, const AudioInput& in,
                      const api::Engine& engine);

}  // namespace sluice::server
