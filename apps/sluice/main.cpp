// sluice: run and serve Gemma 4 / Gemma 3 from GGUF files.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "apps/sluice/commands.h"
#include "base/cpu_features.h"
#include "base/error.h"

int main(int argc, char** argv) {
  CLI::App app{"sluice: runs and serves Gemma 4 / Gemma 3 models from GGUF files"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("sluice 0.1.0 (cpu: ") + sluice::cpu_features_string() + ")");

  std::map<std::string, sluice::app::CommandFn> commands;
  commands["inspect"] = sluice::app::add_inspect_command(app);
  commands["logits"] = sluice::app::add_logits_command(app);
  commands["run"] = sluice::app::add_run_command(app);
  commands["chat"] = sluice::app::add_chat_command(app);
  commands["perplexity"] = sluice::app::add_perplexity_command(app);
  commands["quantize"] = sluice::app::add_quantize_command(app);
  commands["bench"] = sluice::app::add_bench_command(app);
  commands["serve"] = sluice::app::add_serve_command(app);
  commands["tune"] = sluice::app::add_tune_command(app);

  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("serve")) sluice::app::tune_malloc_for_server(argv);
  try {
    for (auto& [name, fn] : commands)
      if (app.got_subcommand(name)) return fn();
  } catch (const sluice::Error& e) {
    std::fprintf(stderr, "sluice: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
