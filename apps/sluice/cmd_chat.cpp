// `sluice chat -m FILE`: an interactive multi-turn chat with streaming replies. The whole
// conversation is re-rendered with the chat template each turn and submitted to the engine
// as a request resuming the previous turn's parked K/V, so only the tokens after the longest
// common prefix are evaluated. Ctrl-C stops a reply (not the program); at the prompt it
// quits, as does Ctrl-D. /reset starts over.
//
// A file without tokenizer.chat_template is a base model: it continues text and answers a
// turn by writing more turns. chat refuses it (pointing to `sluice run`) unless
// --builtin-template asks for Gemma's built-in turn format anyway.
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "apps/sluice/chat_render.h"
#include "apps/sluice/commands.h"
#include "apps/sluice/completion.h"
#include "apps/sluice/media_prompt.h"
#include "base/error.h"
#include "gguf/reader.h"

namespace sluice::app {

namespace {
std::atomic<bool> g_generating{false};
std::atomic<bool> g_interrupt{false};

extern "C" void on_sigint(int) {
  if (g_generating.load()) {
    g_interrupt.store(true);
  } else {
    static const char msg[] = "\n";
    (void)!write(STDERR_FILENO, msg, 1);
    _exit(130);
  }
}

struct ChatArgs {
  SessionOptions session;
  SamplingFlags sampling;
  std::string system;
  bool builtin_template = false;
  ImageArgs images;  // --image / --audio: in the first user turn (again after /reset)
  AudioArgs audio;
};

void check_chat_template(const gguf::GgufFile& f, const std::string& path, bool builtin_ok) {
  if (builtin_ok || !f.get_string_or("tokenizer.chat_template", "").empty()) return;
  fail(
      "%s has no chat template (tokenizer.chat_template): it looks like a base model, which continues text "
      "instead of answering turns. Use `sluice run -m %s -p TEXT` for a continuation, or `sluice chat "
      "--builtin-template` to chat in Gemma's built-in turn format anyway.",
      path.c_str(), path.c_str());
}
}  // namespace

CommandFn add_chat_command(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "interactive chat (Ctrl-C stops a reply, Ctrl-D quits, /reset clears)");
  add_session_options(cmd, args->session);
  add_spec_options(cmd, args->session);
  cmd->add_option("--system", args->system, "system message");
  cmd->add_flag("--builtin-template", args->builtin_template,
                "on a file without a chat template (a base model), use Gemma's built-in one");
  add_sampling_flags(cmd, args->sampling);
  add_image_options(cmd, args->images);
  add_audio_options(cmd, args->audio);
  return [args]() {
    configure_media(args->images, args->audio, args->session);
    EngineSession sess(args->session);
    check_chat_template(sess.file(), args->session.model_path, args->builtin_template);
    sess.print_summary();
    auto tok = Tokenizer::from_gguf(sess.file());
    const GenerationOptions opt = resolve_sampling(args->sampling, sess.file());
    const EncodedMedia media = encode_media(args->images, args->audio, sess);
    bool media_placed = false;  // the media's markers are in the conversation
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);

    ChatHistory conv;
    if (!args->system.empty()) conv.add("system", args->system);
    std::optional<engine::RequestId> last;  // the previous turn, whose K/V are parked
    std::string line;
    for (;;) {
      std::fprintf(stdout, "\n> ");
      std::fflush(stdout);
      if (!std::getline(std::cin, line)) break;
      if (line.empty()) continue;
      if (line == "/reset") {
        conv = ChatHistory{};
        if (!args->system.empty()) conv.add("system", args->system);
        if (last) sess.core().release_kv(*last);
        last.reset();
        media_placed = false;
        std::fprintf(stdout, "(conversation cleared)\n");
        continue;
      }
      conv.add("user",
               media_placed ? line : place_media_markers(line, args->images.images.size(), args->audio.clips.size()));
      media_placed = true;
      const MediaPrompt mp = place_media(tok->encode(render_chat(sess.file(), *tok, conv, true), false, true), media,
                                         args->audio, sess, *tok);
      CompletionRequest req;
      req.prompt = mp.ids;
      req.soft = mp.soft;
      req.opt = opt;
      req.keep_kv = true;
      req.resume_from = last;
      std::string reply;
      g_interrupt.store(false);
      g_generating.store(true);
      GenerationStats st;
      engine::RequestId id = 0;
      try {
        st = complete(
            sess, *tok, req, id,
            [&](const std::string& piece) {
              reply += piece;
              std::fwrite(piece.data(), 1, piece.size(), stdout);
              std::fflush(stdout);
            },
            &g_interrupt);
      } catch (const Error& e) {
        g_generating.store(false);
        std::fprintf(stderr, "\nerror: %s (use /reset)\n", e.what());
        conv.messages.pop_back();
        continue;
      }
      g_generating.store(false);
      last = id;
      conv.add("assistant", reply);
      print_stats(st);
    }
    return 0;
  };
}

}  // namespace sluice::app
