// `sluice tune -m FILE`: calibrates the kernels' streaming parameters for this host on the
// model's own matrices and measures the step-cost curve (tuner.h), whatever is cached, and
// writes the cache file. run, chat, bench and serve do the same at first use when nothing is
// cached; this command reruns it (after a hardware or placement change, or to compare).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "apps/sluice/commands.h"
#include "apps/sluice/engine_session.h"
#include "apps/sluice/tuner.h"
#include "base/error.h"
#include "kernels/tuning.h"

namespace sluice::app {

namespace {

struct TuneArgs {
  SessionOptions session;
  bool json = false;
  bool force = false;  // what `sluice tune` always does; spelled out to retry a cached failure
};

int run_tune(TuneArgs& a) {
  if (a.session.no_tune) fail("sluice tune: --no-tune contradicts the command");
  a.session.retune = true;
  a.session.ctx_size = std::max(a.session.ctx_size, 128);
  EngineSession sess(a.session);
  const TuneOutcome& o = sess.tuning();
  if (a.json) {
    std::printf("%s", tune::to_json_text(o.record).c_str());
    return 0;
  }
  std::printf("%s\n", describe_outcome(o).c_str());
  std::printf("host: %s\n", o.record.key.text().c_str());
  std::printf("step cost relative to one token:");
  for (const auto& [tokens, cost] : o.record.curve.points) std::printf(" T=%d %.3f", tokens, cost);
  if (o.record.curve.points.empty()) std::printf(" not measured");
  std::printf(" (T=1: %.2f ms)\ncalibration %.1f s | cache %s\n", o.record.curve_t1_ms, o.record.calibration_s,
              o.path.empty() ? "(none)" : o.path.c_str());
  return 0;
}

}  // namespace

CommandFn add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand("tune",
                                     "calibrate the kernels for this host and model (cached; run/serve/bench "
                                     "do it at first use)");
  add_session_options(cmd, args->session);
  cmd->add_flag("--json", args->json, "print the cache record (JSON) instead of text");
  cmd->add_flag("--force", args->force,
                "calibrate whatever is cached, a calibration that failed here included (tune always does)");
  return [args]() { return run_tune(*args); };
}

}  // namespace sluice::app
