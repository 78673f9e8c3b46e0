#include "server/transcribe.h"

#include <chrono>
#include <functional>
#include <memory>
#include <utility>

#include "server/api_error.h"
#include "server/audio_parts.h"
#include "server/generation.h"
#include "server/multipart.h"
#include "server/openai_responses.h"
#include "server/transcription.h"

namespace sluice::server {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr int32_t kWindowMaxTokens = 512;  // a 30 s window's words with room to spare

struct Job {
  TranscriptionRequest req;
  PreparedClip clip;
  std::vector<int32_t> ids;  // the prompt, one audio placeholder
  GenerationParams gen;
  int64_t n_prompt = 0, n_out = 0;
};

// The chat prompt: the user turn holds the window's audio, then the instruction.
std::vector<int32_t> prompt_ids(const ModelContext& m, const TranscriptionRequest& r) {
  const json messages = json::array(
      {{{"role", "user"},
        {"content", json::array({{{"type", "audio"}}, {{"type", "text"}, {"text", transcription_instruction(r)}}})}}});
  const std::string text = m.render_chat(messages, {{"enable_thinking", false}});
  return m.tokenizer().encode(text, false, true);
}

// One window generated to its end; `on_delta` gets each piece of text (false: the client is
// gone, the window is cancelled).
TranscriptSegment run_window(api::Engine& engine, const ModelContext& m, Job& job, size_t w,
                             const std::function<bool(const std::string&)>& on_delta) {
  PreparedClip one;
  one.where = "file";
  one.segments = {job.clip.segments[w]};
  one.counts = {job.clip.counts[w]};
  one.tokens = job.clip.counts[w];
  one.seconds = static_cast<double>(job.clip.spans[w].count) / media::kAudioSampleRate;
  ImagePrompt p;
  p.ids = job.ids;
  p = place_audio(std::move(p), {one}, *m.audio(), engine);
  Generation gen(engine, m, std::move(p.ids), job.gen, m.format().reasons(), {}, p.soft);
  TranscriptSegment s;
  double sum = 0;
  while (!gen.done())
    for (ChoiceEvent& ev : gen.poll(100ms)) {
      if (ev.error || ev.aborted)
        throw ApiError(ev.error ? 500 : 503,
                       ev.error ? "generation failed: " + *ev.error : "the server is shutting down", "server_error");
      for (const LogprobItem& lp : ev.logprobs) {
        s.tokens.push_back(lp.token);
        sum += lp.logprob;
      }
      s.text += ev.text.content;
      if (!ev.text.content.empty() && on_delta && !on_delta(ev.text.content)) {
        gen.cancel_all();
        return s;
      }
    }
  job.n_prompt += gen.n_prompt();
  job.n_out += gen.n_completion_tokens();
  if (!s.tokens.empty()) s.avg_logprob = sum / static_cast<double>(s.tokens.size());
  return s;
}

// The window's place in the file: from its first sample to the next window's first (the last
// one to the end of the file), so the segments cover the input with no gap.
void place_in_time(TranscriptSegment& s, const PreparedClip& clip, size_t w) {
  s.start = static_cast<double>(clip.spans[w].offset) / media::kAudioSampleRate;
  const int64_t end = w + 1 < clip.spans.size() ? clip.spans[w + 1].offset : clip.samples;
  s.end = static_cast<double>(end) / media::kAudioSampleRate;
}

std::string trimmed(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  const size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(' ') - a + 1);
}

json usage(const Job& job) {
  return {{"type", "tokens"},
          {"input_tokens", job.n_prompt},
          {"output_tokens", job.n_out},
          {"total_tokens", job.n_prompt + job.n_out}};
}

Reply whole_reply(api::Engine& engine, const ModelContext& m, Metrics& metrics, Job& job) {
  std::vector<TranscriptSegment> segs;
  for (size_t w = 0; w < job.clip.segments.size(); ++w) {
    segs.push_back(run_window(engine, m, job, w, nullptr));
    segs.back().text = trimmed(segs.back().text);
    place_in_time(segs.back(), job.clip, w);
  }
  metrics.add_tokens(job.n_prompt, job.n_out);
  Reply r;
  const std::string& f = job.req.response_format;
  if (f == "json") r.body = dump_json({{"text", transcript_text(segs)}, {"usage", usage(job)}});
  if (f == "verbose_json") r.body = dump_json(verbose_json(job.req, segs, job.clip.seconds));
  if (f == "text" || f == "srt" || f == "vtt") r.content_type = "text/plain; charset=utf-8";
  if (f == "text") r.body = transcript_text(segs) + "\n";
  if (f == "srt") r.body = srt_text(segs);
  if (f == "vtt") r.body = vtt_text(segs);
  return r;
}

std::string event(const json& j) { return sse_data(j); }

Reply stream_reply(api::Engine& engine, const ModelContext& m, Metrics& metrics, std::shared_ptr<Job> job) {
  Reply r;
  r.content_type = "text/event-stream";
  r.stream = [&engine, &m, &metrics, job](const StreamWriter& write) {
    std::string text;
    try {
      for (size_t w = 0; w < job->clip.segments.size(); ++w) {
        bool alive = true;
        // Windows after the first start with a space, as transcript_text joins them.
        bool first_piece = true;
        run_window(engine, m, *job, w, [&](const std::string& piece) {
          std::string d = piece;
          if (first_piece && w > 0 && !text.empty()) d = " " + d;
          first_piece = false;
          text += d;
          alive = write(event({{"type", "transcript.text.delta"}, {"delta", d}}));
          return alive;
        });
        if (!alive) return;
      }
    } catch (const ApiError& e) {
      write(event({{"error", {{"message", e.what()}, {"type", "server_error"}}}}));
      return;
    }
    metrics.add_tokens(job->n_prompt, job->n_out);
    write(event({{"type", "transcript.text.done"}, {"text", text}, {"usage", usage(*job)}}));
    write("data: [DONE]\n\n");
  };
  return r;
}

}  // namespace

Reply transcribe(api::Engine& engine, const ModelContext& m, Metrics& metrics, const std::string& body,
                 const std::string& content_type) {
  const AudioInput* in = m.audio();
  if (in == nullptr)
    throw ApiError(400,
                   "file: this server does not transcribe: it was started without an mmproj that has an audio tower "
                   "(--mmproj FILE of a Gemma 4 E2B/E4B)",
                   "invalid_request_error", "file");
  const std::vector<MultipartPart> parts = parse_multipart(body, multipart_boundary(content_type));
  auto job = std::make_shared<Job>();
  job->req = parse_transcription_form(parts, m);
  if (static_cast<int64_t>(job->req.file.size()) > in->limits.max_bytes)
    throw ApiError(400,
                   "file: the audio is " + std::to_string(job->req.file.size()) + " bytes, over the limit of " +
                       std::to_string(in->limits.max_bytes) + " (serve --max-audio)",
                   "invalid_request_error", "file");
  job->clip = prepare_clip(std::string(job->req.file), "", "file", *in, media::AudioLayout::kChunk30s);
  job->req.file = {};  // the body does not outlive this call; the stream does
  job->ids = prompt_ids(m, job->req);
  job->gen.sampling.temperature = job->req.temperature;
  job->gen.max_tokens = kWindowMaxTokens;
  job->gen.top_logprobs = 0;  // the chosen tokens' logprobs: verbose_json's tokens and avg_logprob
  // The longest window must fit the context before any is encoded.
  int32_t longest = 0;
  for (int32_t n : job->clip.counts) longest = std::max(longest, n);
  const auto n = static_cast<int32_t>(job->ids.size()) + longest + 2;
  if (const auto why = engine.check_admissible(n))
    throw ApiError(400, "file: " + *why + " (a 30 s window of audio takes " + std::to_string(longest) + " tokens)",
                   "invalid_request_error", "file", "context_length_exceeded");
  if (job->req.stream) return stream_reply(engine, m, metrics, std::move(job));
  return whole_reply(engine, m, metrics, *job);
}

}  // namespace sluice::server
