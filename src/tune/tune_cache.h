// The per-host tuning cache: what `sluice tune` measured (kernels::Tuning, the step-cost curve)
// for one host key, one JSON file per key under the user's cache directory
// ($XDG_CACHE_HOME/sluice, else ~/.cache/sluice), written atomically (a temporary file in the
// same directory, then rename). A file that cannot be read or parsed, or that holds another
// key or out-of-range values, is ignored with a warning (the caller re-tunes or uses the
// defaults). A calibration that could not finish is cached too, with its reason (`failed`). Format: docs/performance.md
// "Tuning".
#pragma once

#include <array>
#include <optional>
#include <string>

#include "kernels/tuning.h"
#include "spec/policy.h"

namespace sluice::tune {

// What decides the best parameters: the CPU model and ISA set, the thread count and the cores'
// placement (bench_probe.h: "close" when a cache line's round trip is short, "far", or "one
// thread"), and the model's shape (its architecture and weight bytes per decoded token: the
// calibration runs on the model's own matrices).
struct HostKey {
  std::string cpu_model;  // /proc/cpuinfo "model name" (ARM64: implementer/part)
  std::string isa;        // kernels::cpu_kernels().isa
  int threads = 0;
  std::string placement;  // "close" | "far" | "one thread"
  std::string model;      // e.g. "gemma4 1406908416 B/token"

  std::string text() const;  // all fields in one line: the identity a cache file must match
  bool operator==(const HostKey&) const = default;
};

// The token counts at which the calibration measures the step-cost curve: the cost of a
// decode-like step of T tokens of one sequence (a verification step: T positions, logits of
// each) relative to T = 1. The speculative-decoding policy reads it (spec::StepCostCurve):
// drafting k tokens pays off when the expected accepted tokens exceed cost(k + 1).
inline constexpr std::array<int, 6> kCurveTokens = {1, 2, 4, 8, 16, 32};

struct TuneRecord {
  HostKey key;
  kernels::Tuning tuning;
  spec::StepCostCurve curve;   // points (T, cost relative to T = 1) at kCurveTokens; empty: not measured
  double curve_t1_ms = 0;      // the T = 1 step the curve is relative to
  double default_step_ms = 0;  // median decode step with the defaults, in the calibration
  double tuned_step_ms = 0;    // the same with `tuning`, interleaved with it
  double calibration_s = 0;
  std::string created;  // UTC, ISO 8601
  // Not empty: the calibration could not finish here (why, e.g. it ran out of its budget).
  // The record then holds the defaults and no curve, and is kept so that the next run on this
  // host does not spend the budget again; `sluice tune --force` calibrates anew.
  std::string failed;
  bool operator==(const TuneRecord&) const = default;
};

// $XDG_CACHE_HOME/sluice, else $HOME/.cache/sluice ("" when neither is set).
std::string cache_dir();
// cache_dir()/tune-<16 hex digits of a hash of key.text()>.json
std::string cache_path(const HostKey& key);

std::string to_json_text(const TuneRecord& r);
// Parses a record; the reason in *error (and nullopt) when the text is not one.
std::optional<TuneRecord> from_json_text(const std::string& text, std::string* error);

// Writes r to `path` atomically (creating the directory): readers see the old file or the
// new one, never a part. sluice::Error when it cannot.
void save_record(const std::string& path, const TuneRecord& r);
// The record at `path` for `key`: nullopt when there is no file (warning empty) or when it is
// unusable (warning says why: unreadable, not a record, another key).
std::optional<TuneRecord> load_record(const std::string& path, const HostKey& key, std::string* warning);

// "model name" of /proc/cpuinfo (x86), "implementer 0x41 part 0xd0b" (ARM64), else "unknown".
std::string cpu_model_name();

}  // namespace sluice::tune
