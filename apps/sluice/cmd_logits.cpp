// `sluice logits -m FILE --ids 2,651,... --out F [--chunk N]`: runs the ids as one sequence
// and writes float32 logits for every position, row-major [n_ids × vocab], little-endian.
// --chunk N feeds N ids per step (prefill chunks, then decode-sized steps when N = 1): one
// engine request in scoring mode (all_logits) with a token budget of N.
// `-f TEXT` instead of --ids tokenizes a text file (BOS first). --mmproj FILE with --image /
// --audio PATH: each placeholder id among the ids (<|image|>, <|audio|>) becomes its item's
// begin + n soft tokens + end (media_prompt.h), and the rows written are the expanded prompt's.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "apps/sluice/commands.h"
#include "apps/sluice/engine_session.h"
#include "apps/sluice/media_prompt.h"
#include "base/error.h"
#include "media/audio_features.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

namespace {
struct LogitsArgs {
  SessionOptions session;
  std::string ids, text_file;
  int max_tokens = 0;
  std::string out;
  int chunk = 0;
  ImageArgs images;
  AudioArgs audio;
};

// The most positions the media can add to the prompt: an image's budget, a clip's tokens at most
// (30 s heard; with --audio-chunks the clip's own count), and each item's begin and end markers.
int media_room(const ImageArgs& images, const AudioArgs& audio) {
  int64_t room = static_cast<int64_t>(images.images.size()) * (images.tokens + 2);
  for (const std::string& clip : audio.clips)
    room += (audio.chunks ? audio_clip_tokens(clip, audio.layout())
                          : media::audio_token_count(media::kAudioMaxSamples)) +
            2;
  if (room > (1 << 30)) fail("the media take %lld positions: too many", static_cast<long long>(room));
  return static_cast<int>(room);
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX) fail("--ids: '%s' is not a token id", item.c_str());
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) fail("--ids: no token ids given");
  return ids;
}
}  // namespace

void add_session_options(CLI::App* cmd, SessionOptions& o, bool model_required) {
  cmd->add_option("-m,--model", o.model_path, "GGUF model file")->required(model_required);
  cmd->add_option("-t,--threads", o.threads, "worker threads (default: all cores)");
  cmd->add_option("-c,--ctx-size", o.ctx_size, "context size in tokens")->capture_default_str();
  cmd->add_option("--kv-type", o.kv_type, "KV cache precision: f32, bf16 or f16")->capture_default_str();
  cmd->add_option(
         "--lm-head", o.lm_head,
         "lm_head in memory: packed (the file's type), int8 (Q6_K codes as bytes), q4_0 (requantized, opt-in: logits drift)")
      ->capture_default_str();
  cmd->add_flag(
      "--no-tune", o.no_tune,
      "use the kernels' default streaming parameters (no calibration, no tuning cache; also SLUICE_NO_TUNE=1)");
}

void add_spec_options(CLI::App* cmd, SessionOptions& o) {
  cmd->add_option("--spec", o.spec,
                  "speculative decoding: none, ngram (drafts copied from prompt and output), draft (a draft "
                  "model, --draft) or assistant (Gemma 4's assistant, --draft); the same tokens either way")
      ->capture_default_str();
  cmd->add_option("--draft-head", o.draft_head, "--spec assistant: draft head, centroid (top clusters) or full")
      ->capture_default_str();
  cmd->add_option("--draft-max", o.draft_max, "most tokens drafted per step with --spec")->capture_default_str();
  cmd->add_option("--draft", o.draft_path,
                  "drafter GGUF: a draft model (--spec draft, the target's vocabulary) or a gemma4-assistant "
                  "(--spec assistant)");
  cmd->add_option("--draft-p-min", o.draft_p_min,
                  "--spec draft|assistant: stop drafting when the draft's top probability is below this")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--spec-policy", o.spec_policy,
                  "adaptive: draft length per sequence from its acceptance and the step's cost; fixed: always "
                  "--draft-max")
      ->capture_default_str();
  cmd->add_option("--spec-cost", o.spec_cost,
                  "step-cost curve for the adaptive policy, TOKENS:COST,... (default: the host's from sluice "
                  "tune, else built-in)");
  cmd->add_option("--spec-margin", o.spec_margin,
                  "adaptive policy: drafts' extra step cost counts (1 + M) times, so only clear gains draft")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
}

CommandFn add_logits_command(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand("logits", "write the logits of every position of a token sequence");
  args->session.kv_type = "f32";  // a measuring tool: exact K/V unless asked otherwise
  add_session_options(cmd, args->session);
  auto* ids_opt = cmd->add_option("--ids", args->ids, "comma-separated token ids");
  auto* text_opt = cmd->add_option("-f,--file", args->text_file,
                                   "or: a text file, tokenized with the model's tokenizer (BOS first)");
  ids_opt->excludes(text_opt);
  cmd->add_option("--max-tokens", args->max_tokens, "with -f: keep at most this many tokens (0 = all)");
  cmd->add_option("--out", args->out, "output file: float32 [n_ids × vocab], little-endian")->required();
  cmd->add_option("--chunk", args->chunk, "feed this many ids per step (default: all at once)");
  add_image_options(cmd, args->images);
  add_audio_options(cmd, args->audio);
  return [args]() {
    configure_media(args->images, args->audio, args->session);
    if (args->ids.empty() == args->text_file.empty()) fail("give exactly one of --ids and -f");
    std::vector<int32_t> ids;
    std::unique_ptr<gguf::GgufFile> vocab_file;
    if (!args->ids.empty()) {
      ids = parse_ids(args->ids);
    } else {
      vocab_file = gguf::GgufFile::open(args->session.model_path);
      ids = Tokenizer::from_gguf(*vocab_file)->encode(read_prompt("", args->text_file), true, false);
      if (args->max_tokens > 0 && ids.size() > static_cast<size_t>(args->max_tokens))
        ids.resize(static_cast<size_t>(args->max_tokens));
      if (ids.empty()) fail("%s: no tokens", args->text_file.c_str());
    }
    // Room for the ids, their media and the one token the engine samples after them (discarded).
    const int room = media_room(args->images, args->audio);
    args->session.ctx_size = std::max(args->session.ctx_size, static_cast<int>(ids.size()) + room + 1);
    args->session.token_budget = args->chunk > 0 ? args->chunk : static_cast<int>(ids.size()) + room;
    args->session.prefix_caching = false;
    EngineSession sess(args->session);
    MediaPrompt media;
    if (room > 0) {
      media = expand_media(ids, args->images, args->audio, sess, *Tokenizer::from_gguf(sess.file()));
      ids = std::move(media.ids);
    }
    const int64_t V = sess.spec().n_vocab;
    std::ofstream out(args->out, std::ios::binary | std::ios::trunc);
    if (!out) fail("%s: cannot open for writing", args->out.c_str());
    const engine::RequestId id = sess.add_scoring(ids, media.soft);
    int64_t written = 0;
    sess.drive(id, [&](engine::TokenOutput& o) {
      if (o.logits.empty()) return;
      if (o.logits_pos0 != written)
        fail("logits rows out of order (position %d after %lld)", o.logits_pos0, static_cast<long long>(written));
      out.write(reinterpret_cast<const char*>(o.logits.data()),
                static_cast<std::streamsize>(o.logits.size() * sizeof(float)));
      written += static_cast<int64_t>(o.logits.size()) / V;
    });
    if (written != static_cast<int64_t>(ids.size()))
      fail("the engine returned %lld of %zu rows", static_cast<long long>(written), ids.size());
    if (!out) fail("%s: write failed", args->out.c_str());
    std::fprintf(stderr, "wrote %zu × %lld logits to %s\n", ids.size(), static_cast<long long>(V), args->out.c_str());
    return 0;
  };
}

}  // namespace sluice::app
