// POST /v1/audio/transcriptions (docs/audio.md): OpenAI's form fields read from a multipart body,
// the prompt the model transcribes with, and the reply in each response_format. The model
// answers each 30 s window of the file on its own; a window is one segment of the transcript,
// its timestamps the window's place in the file (monotonic, covering it from 0 to its length).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/multipart.h"

namespace sluice::server {

class ModelContext;

struct TranscriptionRequest {
  std::string_view file;  // the upload's bytes (a view into the body)
  std::string filename;
  std::string prompt;    // text the speech may continue (OpenAI's "prompt")
  std::string language;  // the language's name ("English"), from an ISO-639-1 code or as given; empty: any
  std::string response_format = "json";  // json, text, verbose_json, srt, vtt
  float temperature = 0;                 // 0: greedy
  bool stream = false;
};

// The form's fields. 400 naming the field for a missing file, a bad response_format,
// temperature, stream or language, word timestamps; 404 for another model than `m`'s.
TranscriptionRequest parse_transcription_form(const std::vector<MultipartPart>& parts, const ModelContext& m);

// The user turn's text after the audio: the ASR instruction of Gemma 4's model card
// ("Transcribe the following speech segment in {LANGUAGE} into {LANGUAGE} text. ..."; "in its
// original language" with no language), and the prompt as context when there is one.
std::string transcription_instruction(const TranscriptionRequest& r);

struct TranscriptSegment {
  double start = 0, end = 0;  // seconds
  std::string text;
  std::vector<int32_t> tokens;
  double avg_logprob = 0;
};

// "HH:MM:SS,mmm" (srt) or "HH:MM:SS.mmm" (vtt).
std::string subtitle_time(double seconds, char separator);
std::string srt_text(const std::vector<TranscriptSegment>& segments);
std::string vtt_text(const std::vector<TranscriptSegment>& segments);
// verbose_json: {task, language, duration, text, segments: [{id, seek, start, end, text, tokens,
// temperature, avg_logprob, compression_ratio, no_speech_prob}], usage}.
nlohmann::json verbose_json(const TranscriptionRequest& r, const std::vector<TranscriptSegment>& segments,
                            double duration);
// The segments' texts joined by spaces.
std::string transcript_text(const std::vector<TranscriptSegment>& segments);

}  // namespace sluice::server
