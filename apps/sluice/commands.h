// Subcommands of the `sluice` executable. Each registers its flags on a CLI11 subcommand and
// returns the function that runs it (exit code). New commands: add a file and a line in main.cpp.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace sluice::app {

using CommandFn = std::function<int()>;

struct SessionOptions;
void add_session_options(CLI::App* cmd, SessionOptions& o, bool model_required = true);
void add_spec_options(CLI::App* cmd, SessionOptions& o);  // --spec, --draft-max, --draft, --draft-p-min

// The text of -p TEXT, else of -f FILE, else all of stdin.
std::string read_prompt(const std::string& text, const std::string& file);

CommandFn add_inspect_command(CLI::App& app);
CommandFn add_logits_command(CLI::App& app);
CommandFn add_run_command(CLI::App& app);
CommandFn add_chat_command(CLI::App& app);
CommandFn add_perplexity_command(CLI::App& app);
CommandFn add_quantize_command(CLI::App& app);
CommandFn add_bench_command(CLI::App& app);
CommandFn add_serve_command(CLI::App& app);
CommandFn add_tune_command(CLI::App& app);
// Before `serve` starts any thread: re-executes the program once with glibc's per-thread
// malloc caches off (see cmd_serve.cpp); returns only when that is not needed or fails.
void tune_malloc_for_server(char** argv);

}  // namespace sluice::app
