#include "server/audio_parts.h"

#include <algorithm>
#include <span>
#include <utility>

#include "base/error.h"
#include "server/api_error.h"
#include "server/base64.h"

namespace sluice::server {

using ojson = nlohmann::ordered_json;

namespace {

// The container a declared format names (OpenAI's "wav" and "mp3", and the others libsndfile
// reads here); kUnknown for a name sluice does not take.
media::AudioFormat declared_format(const std::string& f) {
  if (f == "wav" || f == "wave") return media::AudioFormat::kWav;
  if (f == "mp3" || f == "mpeg") return media::AudioFormat::kMp3;
  if (f == "flac") return media::AudioFormat::kFlac;
  if (f == "ogg" || f == "oga" || f == "opus" || f == "vorbis") return media::AudioFormat::kOgg;
  return media::AudioFormat::kUnknown;
}

constexpr const char* kFormats = "wav, mp3, flac, ogg or opus";

const std::string& string_field(const ojson& o, const char* key, const std::string& where) {
  if (!o.contains(key) || !o.at(key).is_string())
    bad_part(where, std::string("input_audio.") + key + " must be a string");
  return o.at(key).get_ref<const std::string&>();
}

}  // namespace

AudioPart parse_audio_part(const ojson& part, const std::string& where, const AudioInput* in) {
  if (in == nullptr)
    bad_part(where,
             "audio is not supported by this model: the server was started without an mmproj that has an audio "
             "tower (--mmproj FILE of a Gemma 4 E2B/E4B)");
  if (!part.contains("input_audio") || !part.at("input_audio").is_object())
    bad_part(where, "an input_audio part needs an 'input_audio' object {\"data\": BASE64, \"format\": \"wav\"}");
  const ojson& ia = part.at("input_audio");
  const std::string& data = string_field(ia, "data", where);
  AudioPart p;
  p.where = where;
  p.format = string_field(ia, "format", where);
  if (declared_format(p.format) == media::AudioFormat::kUnknown)
    bad_part(where, "input_audio.format '" + p.format + "' is not one sluice decodes (" + kFormats + ")");
  // The limit before any decoding: the base64 text tells the size it decodes to.
  const auto size = static_cast<int64_t>(base64_decoded_size(data));
  if (size > in->limits.max_bytes)
    bad_part(where, strfmt("the audio is %lld bytes, over the limit of %lld (serve --max-audio)",
                           static_cast<long long>(size), static_cast<long long>(in->limits.max_bytes)));
  p.bytes = decode_base64(data, where, "audio");
  if (p.bytes.empty()) bad_part(where, "the audio's data is empty");
  return p;
}

PreparedClip prepare_clip(const std::string& bytes, const std::string& format, const std::string& where,
                          const AudioInput& in, media::AudioLayout layout) {
  const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const media::AudioFormat declared = declared_format(format);
  const media::AudioFormat found = media::sniff_audio_format(data);
  if (declared != media::AudioFormat::kUnknown && found != media::AudioFormat::kUnknown && declared != found)
    bad_part(where, std::string("the audio is ") + media::audio_format_name(found) + " data, not the declared '" +
                        format + "'");
  media::DecodedAudio a;
  try {
    a = media::decode_audio(data, "the audio", in.limits);
  } catch (const Error& e) {
    bad_part(where, e.what());
  }
  PreparedClip c;
  c.where = where;
  c.samples = static_cast<int64_t>(a.samples.size());
  c.seconds = static_cast<double>(c.samples) / media::kAudioSampleRate;
  const std::vector<media::AudioSegment> spans = media::audio_segments(c.samples, layout);
  std::vector<media::LogMel> mels = media::audio_features(a.samples, layout);
  for (size_t i = 0; i < mels.size(); ++i) {
    const int32_t n = in.n_tokens(mels[i]);
    if (n <= 0) continue;  // a chunked clip's last few samples: nothing to hear
    c.tokens += n;
    c.counts.push_back(n);
    c.spans.push_back(spans[i]);
    c.segments.push_back(std::move(mels[i]));
  }
  if (c.tokens == 0)
    bad_part(where, strfmt("%.4f s of audio is too short to give a single audio token (it takes at least 161 "
                           "samples at 16 kHz)",
                           c.seconds));
  return c;
}

std::vector<float> encode_clips(const std::vector<PreparedClip>& clips, const AudioInput& in) {
  int64_t total = 0;
  for (const PreparedClip& c : clips) total += c.tokens;
  std::vector<float> rows(static_cast<size_t>(total) * static_cast<size_t>(in.text_width));
  float* at = rows.data();
  for (const PreparedClip& c : clips) {
    for (size_t i = 0; i < c.segments.size(); ++i) {
      try {
        in.encode(c.segments[i], at);
      } catch (const Error& e) {
        bad_part(c.where, e.what());
      }
      at += static_cast<size_t>(c.counts[i]) * static_cast<size_t>(in.text_width);
    }
  }
  return rows;
}

namespace {

// The clips' token counts, the prompt they make checked against the context as each is added:
// the first clip that does not fit is named.
std::vector<int32_t> check_context(size_t n_ids, const std::vector<PreparedClip>& clips, const api::Engine& engine) {
  std::vector<int32_t> counts;
  int64_t tokens = 0;
  for (const PreparedClip& c : clips) {
    counts.push_back(c.tokens);
    tokens += c.tokens;
    const int64_t n = chat::expanded_length(n_ids, counts);
    const auto why = engine.check_admissible(static_cast<int32_t>(std::min<int64_t>(n, INT32_MAX)));
    if (why)
      throw ApiError(400,
                     *why + strfmt(" (with %s, %.2f s, the audio takes %lld tokens: 25 a second, the first 30 s of "
                                   "each clip)",
                                   c.where.c_str(), c.seconds, static_cast<long long>(tokens)),
                     "invalid_request_error", "messages", "context_length_exceeded");
  }
  return counts;
}

}  // namespace

ImagePrompt add_audio(ImagePrompt p, const std::vector<AudioPart>& parts, const AudioInput& in,
                      const api::Engine& engine) {
  if (parts.empty()) return p;
  std::vector<PreparedClip> clips;
  for (const AudioPart& part : parts) clips.push_back(prepare_clip(part.bytes, part.format, part.where, in));
  return place_audio(std::move(p), clips, in, engine);
}

ImagePrompt place_audio(ImagePrompt p, const std::vector<PreparedClip>& clips, const AudioInput& in,
                        const api::Engine& engine) {
  if (clips.empty()) return p;
  if (p.soft && p.soft->blocks)
    throw ApiError(400,
                   "messages: this model's images attend bidirectionally (a 26B/31B tower): audio cannot share their "
                   "prompt",
                   "invalid_request_error", "messages");
  const size_t placed = chat::count_placeholders(p.ids, in.markers);
  if (placed != clips.size())
    throw ApiError(400,
                   "messages: the rendered prompt has " + std::to_string(placed) + " audio placeholders for " +
                       std::to_string(clips.size()) +
                       " clips (a text part that spells out the placeholder, or a chat template that drops audio)",
                   "invalid_request_error", "messages");
  const std::vector<int32_t> counts = check_context(p.ids.size(), clips, engine);
  const std::vector<float> audio_rows = encode_clips(clips, in);
  const chat::ExpandedPrompt e = chat::expand_placeholders(p.ids, in.markers, counts);
  // One SoftTokens for both kinds: the images' rows first, then the clips'.
  auto soft = std::make_shared<api::SoftTokens>();
  soft->width = in.text_width;
  const size_t image_floats = p.soft ? p.soft->rows.size() : 0;
  if (p.soft) soft->rows = p.soft->rows;
  soft->rows.insert(soft->rows.end(), audio_rows.begin(), audio_rows.end());
  soft->at.assign(e.ids.size(), nullptr);
  const float* audio_base = soft->rows.data() + image_floats;
  for (size_t q = 0; q < e.ids.size(); ++q)
    if (e.soft_row[q] >= 0) soft->at[q] = audio_base + e.soft_row[q] * in.text_width;
  if (p.soft) {  // the images' positions, moved by the clips expanded before them
    size_t q = 0, k = 0;
    for (size_t o = 0; o < p.ids.size(); ++o) {
      if (p.ids[o] == in.markers.placeholder) {
        q += static_cast<size_t>(counts[k++]) + 2;
        continue;
      }
      if (const float* r = p.soft->at[o]) soft->at[q] = soft->rows.data() + (r - p.soft->rows.data());
      ++q;
    }
  }
  p.ids = e.ids;
  p.soft = std::move(soft);
  return p;
}

}  // namespace sluice::server
