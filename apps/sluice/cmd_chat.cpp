// `sluice chat -m FILE`: an interactive multi-turn chat with streaming replies. The whole
// conversation is re-rendered with the chat template each turn and only the tokens after
// the longest prefix already in the KV cache are evaluated. Ctrl-C stops a reply (not the
// program); at the prompt it quits, as does Ctrl-D. /reset starts over.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <unistd.h>

#include "apps/sluice/chat_render.h"
#include "apps/sluice/commands.h"
#include "apps/sluice/generation.h"
#include "base/error.h"

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
};
}  // namespace

CommandFn add_chat_command(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "interactive chat (Ctrl-C stops a reply, Ctrl-D quits, /reset clears)");
  add_session_options(cmd, args->session);
  cmd->add_option("--system", args->system, "system message");
  add_sampling_flags(cmd, args->sampling);
  return [args]() {
    ModelSession sess(args->session);
    sess.print_summary();
    auto tok = Tokenizer::from_gguf(sess.file());
    const GenerationOptions opt = resolve_sampling(args->sampling, sess.file());
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);

    ChatHistory conv;
    if (!args->system.empty()) conv.add("system", args->system);
    std::vector<int32_t> cached;   // tokens whose K/V are in the cache, in order
    std::string line;
    for (;;) {
      std::fprintf(stdout, "\n> ");
      std::fflush(stdout);
      if (!std::getline(std::cin, line)) break;
      if (line.empty()) continue;
      if (line == "/reset") {
        conv = ChatHistory{};
        if (!args->system.empty()) conv.add("system", args->system);
        sess.reset();
        cached.clear();
        std::fprintf(stdout, "(conversation cleared)\n");
        continue;
      }
      conv.add("user", line);
      const std::vector<int32_t> full = tok->encode(render_chat(sess.file(), *tok, conv, true), false, true);
      size_t keep = 0;   // longest prefix already evaluated (at least one new token must run)
      while (keep < cached.size() && keep + 1 < full.size() && cached[keep] == full[keep]) ++keep;
      if (!sess.can_resume_at(static_cast<int32_t>(keep))) {
        sess.reset();
        keep = 0;
      }
      cached.resize(keep);
      int32_t pos = static_cast<int32_t>(keep);
      std::string reply;
      g_interrupt.store(false);
      g_generating.store(true);
      GenerationStats st;
      try {
        st = generate(sess, *tok, cached, pos, std::span<const int32_t>(full).subspan(keep), opt,
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
      conv.add("assistant", reply);
      print_stats(st);
    }
    return 0;
  };
}

}  // namespace sluice::app
