// `sluice perplexity -m FILE -f TEXT --ctx N`: the text's tokens in non-overlapping windows
// of N tokens, each window starting with BOS followed by N-1 text tokens; every token after
// the first in a window is scored. PPL = exp(mean negative log-likelihood). Each window is
// one engine request in scoring mode (all_logits), computed in one forward.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "apps/sluice/commands.h"
#include "apps/sluice/engine_session.h"
#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace sluice::app {

namespace {
struct PplArgs {
  SessionOptions session;
  std::string file;
  int ctx = 512;
  int max_windows = 0;
};
}  // namespace

CommandFn add_perplexity_command(CLI::App& app) {
  auto args = std::make_shared<PplArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a text file in windows of --ctx tokens");
  add_session_options(cmd, args->session);
  cmd->add_option("-f,--file", args->file, "text file")->required();
  cmd->add_option("--ctx", args->ctx, "window size in tokens (BOS included)")->capture_default_str();
  cmd->add_option("--max-windows", args->max_windows, "score at most this many windows (0 = all)");
  return [args]() {
    if (args->ctx < 2) fail("--ctx must be at least 2");
    const std::string text = read_prompt("", args->file);
    args->session.ctx_size = args->ctx + 1;  // the window and the one token the engine samples after it
    args->session.token_budget = args->ctx;
    args->session.prefix_caching = false;
    EngineSession sess(args->session);
    sess.print_summary();
    auto tok = Tokenizer::from_gguf(sess.file());
    if (tok->bos() < 0) fail("the model has no BOS token");
    const std::vector<int32_t> ids = tok->encode(text, false, false);
    const size_t per = static_cast<size_t>(args->ctx - 1);
    size_t n_windows = ids.size() / per;
    if (args->max_windows > 0) n_windows = std::min<size_t>(n_windows, args->max_windows);
    if (n_windows == 0) fail("the text has %zu tokens, fewer than one window of %d", ids.size(), args->ctx - 1);
    const int64_t V = sess.spec().n_vocab;
    double nll = 0;
    size_t scored = 0;
    std::vector<int32_t> win(args->ctx);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t w = 0; w < n_windows; ++w) {
      win[0] = tok->bos();
      std::copy(ids.begin() + w * per, ids.begin() + (w + 1) * per, win.begin() + 1);
      const engine::RequestId id = sess.add_scoring(win);
      sess.drive(id, [&](engine::TokenOutput& o) {
        const int64_t rows = static_cast<int64_t>(o.logits.size()) / V;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = o.logits_pos0 + r;
          if (i + 1 >= args->ctx) continue;  // the last position predicts past the window
          const float* row = &o.logits[r * V];
          float mx = row[0];
          for (int64_t v = 1; v < V; ++v) mx = std::max(mx, row[v]);
          double sum = 0;
          for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
          nll += -(row[win[i + 1]] - mx - std::log(sum));
          ++scored;
        }
      });
      std::fprintf(stderr, "[%zu/%zu] ppl so far %.4f\n", w + 1, n_windows, std::exp(nll / scored));
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("perplexity %.6f over %zu tokens in %zu windows of %d (%.1f tokens/s)\n", std::exp(nll / scored),
                scored, n_windows, args->ctx, n_windows * args->ctx / secs);
    return 0;
  };
}

}  // namespace sluice::app
