// `sluice run -m FILE (-p TEXT | -f FILE | stdin)`: streams the continuation of a prompt.
// --chat renders the prompt as one user turn with the model's chat template. --mmproj FILE
// --image PATH and --audio PATH (repeatable) put images and audio clips in the prompt
// (apps/sluice/media_prompt.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "apps/sluice/chat_render.h"
#include "apps/sluice/commands.h"
#include "apps/sluice/completion.h"
#include "apps/sluice/media_prompt.h"
#include "base/error.h"
#include "grammar/compiled.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace sluice::app {

namespace {
struct RunArgs {
  SessionOptions session;
  SamplingFlags sampling;
  std::string prompt, prompt_file, system;
  std::string json_schema_file, grammar_file;
  bool chat = false;
  ImageArgs images;
  AudioArgs audio;
};

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
}  // namespace

std::string read_prompt(const std::string& text, const std::string& file) {
  if (!text.empty()) return text;
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail("%s: cannot open prompt file", file.c_str());
    return read_all(in);
  }
  return read_all(std::cin);
}

namespace {
// --json-schema / --grammar: the file compiled against the model's vocabulary, or null.
std::shared_ptr<const grammar::CompiledGrammar> load_grammar(const RunArgs& a, const Tokenizer& tok) {
  const std::string& path = a.json_schema_file.empty() ? a.grammar_file : a.json_schema_file;
  if (path.empty()) return nullptr;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("%s: cannot open", path.c_str());
  const std::string text = read_all(in);
  try {
    grammar::Grammar g = a.json_schema_file.empty() ? grammar::gbnf_grammar(text)
                                                    : grammar::json_schema_grammar_text(text);
    return std::make_shared<const grammar::CompiledGrammar>(std::move(g), grammar::TokenVocab::from_tokenizer(tok));
  } catch (const Error& e) {
    fail("%s: %s", path.c_str(), e.what());
  }
}
}  // namespace

CommandFn add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "generate a continuation of a prompt, streamed to stdout");
  add_session_options(cmd, args->session);
  add_spec_options(cmd, args->session);
  cmd->add_option("-p,--prompt", args->prompt, "prompt text");
  cmd->add_option("-f,--file", args->prompt_file, "read the prompt from a file (default: stdin)");
  cmd->add_flag("--chat", args->chat, "wrap the prompt as a user turn with the model's chat template");
  cmd->add_option("--system", args->system, "system message (with --chat)");
  auto* js = cmd->add_option("--json-schema", args->json_schema_file,
                             "constrain the output to a JSON Schema (a file; docs/structured-output.md)");
  cmd->add_option("--grammar", args->grammar_file, "constrain the output to a GBNF grammar (a file)")->excludes(js);
  add_sampling_flags(cmd, args->sampling);
  add_image_options(cmd, args->images);
  add_audio_options(cmd, args->audio);
  return [args]() {
    configure_media(args->images, args->audio, args->session);
    const std::string text = place_media_markers(read_prompt(args->prompt, args->prompt_file),
                                                 args->images.images.size(), args->audio.clips.size());
    EngineSession sess(args->session);
    sess.print_summary();
    auto tok = Tokenizer::from_gguf(sess.file());
    std::vector<int32_t> prompt;
    if (args->chat) {
      ChatHistory h;
      if (!args->system.empty()) h.add("system", args->system);
      h.add("user", text);
      prompt = tok->encode(render_chat(sess.file(), *tok, h, true), false, true);
    } else {
      prompt = tok->encode(text, true, true);
    }
    const MediaPrompt ip = expand_media(prompt, args->images, args->audio, sess, *tok);
    CompletionRequest req;
    req.prompt = ip.ids;
    req.soft = ip.soft;
    req.opt = resolve_sampling(args->sampling, sess.file());
    req.grammar = load_grammar(*args, *tok);
    engine::RequestId id = 0;
    const GenerationStats st = complete(sess, *tok, req, id, [](const std::string& piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    std::printf("\n");
    print_stats(st);
    return 0;
  };
}

}  // namespace sluice::app
