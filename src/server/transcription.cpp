#include "server/transcription.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "server/api_error.h"
#include "server/model_context.h"

namespace sluice::server {

namespace {

[[noreturn]] void bad_field(const std::string& field, const std::string& why) {
  throw ApiError(400, field + ": " + why, "invalid_request_error", field);
}

// ISO-639-1 codes OpenAI's `language` takes → the names the model card's prompt uses.
const char* language_name(const std::string& code) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"en", "English"},    {"fr", "French"},   {"de", "German"},     {"es", "Spanish"},    {"it", "Italian"},
      {"pt", "Portuguese"}, {"nl", "Dutch"},    {"ja", "Japanese"},   {"zh", "Chinese"},    {"ko", "Korean"},
      {"ru", "Russian"},    {"ar", "Arabic"},   {"hi", "Hindi"},      {"tr", "Turkish"},    {"pl", "Polish"},
      {"sv", "Swedish"},    {"da", "Danish"},   {"no", "Norwegian"},  {"fi", "Finnish"},    {"cs", "Czech"},
      {"el", "Greek"},      {"he", "Hebrew"},   {"id", "Indonesian"}, {"vi", "Vietnamese"}, {"th", "Thai"},
      {"uk", "Ukrainian"},  {"ro", "Romanian"}, {"hu", "Hungarian"},  {"bn", "Bengali"},    {"ta", "Tamil"}};
  for (const auto& [c, name] : kNames)
    if (code == c) return name;
  return nullptr;
}

std::string parse_language(const std::string& v) {
  if (v.empty()) return "";
  if (const char* name = language_name(v)) return name;
  // A name ("English", "Brazilian Portuguese"): letters and spaces only, as it goes into the prompt.
  if (v.size() > 40) bad_field("language", "must be an ISO-639-1 code (\"en\") or a language's name");
  for (char c : v)
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != ' ' && c != '-')
      bad_field("language", "must be an ISO-639-1 code (\"en\") or a language's name");
  return v;
}

float parse_temperature(const std::string& v) {
  char* end = nullptr;
  const float t = std::strtof(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(t >= 0 && t <= 2))
    bad_field("temperature", "must be a number from 0 to 2");
  return t;
}

bool parse_bool(const std::string& field, const std::string& v) {
  if (v == "true" || v == "True" || v == "1") return true;
  if (v == "false" || v == "False" || v == "0") return false;
  bad_field(field, "must be true or false");
}

}  // namespace

TranscriptionRequest parse_transcription_form(const std::vector<MultipartPart>& parts, const ModelContext& m) {
  TranscriptionRequest r;
  bool have_file = false, have_model = false;
  for (const MultipartPart& p : parts) {
    const std::string v(p.name == "file" ? std::string_view() : p.data);
    if (p.name == "file") {
      r.file = p.data;
      r.filename = p.filename;
      have_file = true;
    } else if (p.name == "model") {
      have_model = true;
      if (v != m.alias())
        throw ApiError(404, "The model '" + v + "' does not exist (this server serves '" + m.alias() + "')",
                       "invalid_request_error", "model", "model_not_found");
    } else if (p.name == "prompt") {
      if (v.size() > 4096) bad_field("prompt", "is over 4096 bytes");
      r.prompt = v;
    } else if (p.name == "language") {
      r.language = parse_language(v);
    } else if (p.name == "response_format") {
      if (v != "json" && v != "text" && v != "verbose_json" && v != "srt" && v != "vtt")
        bad_field("response_format", "must be json, text, verbose_json, srt or vtt");
      r.response_format = v;
    } else if (p.name == "temperature") {
      r.temperature = parse_temperature(v);
    } else if (p.name == "stream") {
      r.stream = parse_bool("stream", v);
    } else if (p.name == "timestamp_granularities[]" || p.name == "timestamp_granularities") {
      if (v != "segment")
        bad_field("timestamp_granularities", "only \"segment\" is supported (a segment per 30 s window)");
    }  // other fields (chunking_strategy, include[], ...) change nothing here
  }
  if (!have_file) bad_field("file", "is required (the audio file, a multipart file part)");
  if (!have_model) bad_field("model", "is required");
  if (r.file.empty()) bad_field("file", "is empty");
  return r;
}

std::string transcription_instruction(const TranscriptionRequest& r) {
  std::string s = r.language.empty()
                      ? "Transcribe the following speech segment in its original language."
                      : "Transcribe the following speech segment in " + r.language + " into " + r.language + " text.";
  s += "\n\nFollow these specific instructions for formatting the answer:\n* Only output the transcription, with no "
       "newlines.\n* When transcribing numbers, write the digits, i.e. write 1.7 and not one point seven, and write 3 "
       "instead of three.";
  if (!r.prompt.empty()) s += "\n* The speech may continue this text: " + r.prompt;
  return s;
}

std::string subtitle_time(double seconds, char separator) {
  const auto ms = static_cast<int64_t>(std::llround(std::max(0.0, seconds) * 1000.0));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(ms / 3600000),
                static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60), separator,
                static_cast<long long>(ms % 1000));
  return buf;
}

std::string srt_text(const std::vector<TranscriptSegment>& segments) {
  std::string out;
  for (size_t i = 0; i < segments.size(); ++i) {
    const TranscriptSegment& s = segments[i];
    out += std::to_string(i + 1) + "\n" + subtitle_time(s.start, ',') + " --> " + subtitle_time(s.end, ',') + "\n" +
           s.text + "\n\n";
  }
  return out;
}

std::string vtt_text(const std::vector<TranscriptSegment>& segments) {
  std::string out = "WEBVTT\n\n";
  for (const TranscriptSegment& s : segments)
    out += subtitle_time(s.start, '.') + " --> " + subtitle_time(s.end, '.') + "\n" + s.text + "\n\n";
  return out;
}

std::string transcript_text(const std::vector<TranscriptSegment>& segments) {
  std::string out;
  for (const TranscriptSegment& s : segments) {
    if (s.text.empty()) continue;
    if (!out.empty()) out += ' ';
    out += s.text;
  }
  return out;
}

nlohmann::json verbose_json(const TranscriptionRequest& r, const std::vector<TranscriptSegment>& segments,
                            double duration) {
  nlohmann::json segs = nlohmann::json::array();
  for (size_t i = 0; i < segments.size(); ++i) {
    const TranscriptSegment& s = segments[i];
    segs.push_back({{"id", i},
                    {"seek", static_cast<int64_t>(std::llround(s.start * 100))},  // Whisper's: 10 ms frames
                    {"start", s.start},
                    {"end", s.end},
                    {"text", s.text},
                    {"tokens", s.tokens},
                    {"temperature", r.temperature},
                    {"avg_logprob", s.avg_logprob},
                    {"compression_ratio", 0.0},  // not measured
                    {"no_speech_prob", 0.0}});   // not measured
  }
  std::string language = r.language;
  for (char& c : language) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {{"task", "transcribe"},
          {"language", language.empty() ? "unknown" : language},
          {"duration", duration},
          {"text", transcript_text(segments)},
          {"segments", std::move(segs)},
          {"usage", {{"type", "duration"}, {"seconds", static_cast<int64_t>(std::ceil(duration))}}}};
}

}  // namespace sluice::server
