// `sluice tune` and the automatic tuning at first use (run, chat, bench, serve, ...): the
// kernels' streaming parameters (kernels/tuning.h) picked per host by timing decode steps of
// the loaded model, and the step-cost curve of T-token steps, cached per host key
// (tune/tune_cache.h). Results never depend on the parameters, only the speed.
#pragma once

#include <string>

#include "tune/tune_cache.h"

namespace sluice {
class ThreadPool;
class KvCache;
namespace gguf {
class GgufFile;
}
namespace models {
class Model;
}
}  // namespace sluice

namespace sluice::app {

// kOff: the defaults (--no-tune, or SLUICE_NO_TUNE=1 in the environment: the test suites set
// it). kAuto: the cached record for this host, else calibrate and cache. kForce: calibrate and
// cache whatever is cached (`sluice tune`).
enum class TuneMode { kOff, kAuto, kForce };
TuneMode tune_mode(bool no_tune);

struct TuneOutcome {
  tune::TuneRecord record;  // the key always; the tuning in use; the curve when known
  std::string source;       // "cache", "calibrated", or "defaults (<why>)"
  std::string path;         // the cache file ("" when none applies)
  bool from_cache() const { return source == "cache"; }
};

// The tuning for this host and model, set with kernels::set_tuning before returning. Call
// before the first step, with nothing running on the pool, the KV cache unused; `ctx_size` is
// the positions one sequence may use (calibration needs 64). Calibration takes at most about
// `budget_s` seconds; a warning (stderr) names a cache file that was unusable.
TuneOutcome apply_tuning(TuneMode mode, models::Model& model, KvCache& kv, ThreadPool& pool, const gguf::GgufFile& file,
                         int ctx_size, double budget_s = 15.0);

// One line for people: "tuning: cache (streams 1x1, ...)".
std::string describe_outcome(const TuneOutcome& o);

}  // namespace sluice::app
