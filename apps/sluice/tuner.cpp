// Calibration: coordinate descent over the parameters of kernels/tuning.h, one group at a
// time, each candidate timed on whole decode steps of the loaded model (an engine step of one
// sequence, as `sluice bench` times them). Our hosts share their memory bus with other tenants,
// so candidates are compared in interleaved rounds (every candidate once per round) and by
// their medians, and a candidate replaces the incumbent only when it is faster by more than
// kMinGain: on a host where the defaults are already right, tuning keeps them.
//
// The step-cost curve times steps that verify T tokens of one sequence (T − 1 drafted tokens
// after the sampled one, as a speculative step does) against T = 1, interleaved the same way.
// The budget is priced in steps of the model at hand: on a slow or loaded host fewer groups
// are searched (the defaults stay), never more time is taken.
#include "apps/sluice/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "apps/sluice/bench_probe.h"
#include "base/error.h"
#include "engine/engine_core.h"
#include "kernels/cpu_kernels.h"
#include "kernels/tuning.h"
#include "models/model.h"
#include "models/weight_accounting.h"
#include "threading/thread_pool.h"

namespace sluice::app {

namespace {

using clock_type = std::chrono::steady_clock;
using kernels::PackedFormat;
using kernels::Tuning;

constexpr double kMinGain = 0.02;  // a candidate must be this much faster to replace the incumbent
constexpr int kCalibCtx = 128;     // positions the calibration's sequences use at most
constexpr int kMinCtx = 64;        // the 32-token steps need 33 positions, and room to decode

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Steps the engine on one sequence at a time: decode steps of the live sequence, each verifying
// `tokens` tokens (tokens − 1 drafts; 1: a plain decode step).
class StepTimer {
 public:
  StepTimer(models::Model& model, KvCache& kv, int ctx) : vocab_(model.spec().n_vocab), ctx_(ctx) {
    engine::EngineConfig cfg;
    cfg.sched.max_running = 1;
    cfg.sched.token_budget = 2 * tune::kCurveTokens.back();
    cfg.sched.ctx_size = ctx;
    cfg.sched.draft_max = tune::kCurveTokens.back() - 1;
    cfg.sched.draft_hook = [this](engine::RequestId, std::span<const int32_t> toks, int32_t k_max,
                                  std::vector<int32_t>& drafts) {
      // Random ids, as `sluice bench --spec-verify` drafts: the target rejects them at once, so
      // every step computes its T tokens and samples one row, whatever the model predicts (a
      // repeated token, which a small model may accept, made steps longer by the rows it samples).
      (void)toks;
      drafts.clear();
      for (int i = 0; i < std::min(k_max, drafts_); ++i)
        drafts.push_back(static_cast<int32_t>(16 + rng_() % static_cast<uint64_t>(std::max(1, vocab_ - 16))));
    };
    cfg.prefix_caching = false;
    core_ = std::make_unique<engine::EngineCore>(model, kv, cfg);
  }
  ~StepTimer() { end_live(); }

  // Milliseconds of one step verifying `tokens` tokens of the live sequence. A step's drafts
  // are proposed at the end of the step before it, so the caller names the next step's tokens
  // too; a step whose drafts were proposed for another count gets an untimed step first.
  double step_ms(int tokens, int next) {
    // Room for this step's tokens (and that untimed one) before the sequence's limit; else a
    // fresh sequence.
    if (live_ == 0 || used_ + proposed_ + tokens + 1 >= ctx_) restart(tokens);
    if (proposed_ != tokens) step(tokens);
    const auto t0 = clock_type::now();
    step(next);
    return seconds_since(t0) * 1e3;
  }

 private:
  void end_live() {
    if (live_ == 0) return;
    core_->abort(live_);
    while (core_->has_work()) core_->step();
    core_->take_outputs();
    live_ = 0;
  }
  // One step of the live sequence: it verifies the drafts proposed before it, and its end
  // proposes next − 1 drafts for the step after it.
  void step(int next) {
    drafts_ = next - 1;
    core_->step();
    used_ += proposed_;  // at most: rejected drafts are rolled back
    proposed_ = next;
  }
  // A sequence of one random token, its first step (the prompt) untimed; it proposes `first` − 1
  // drafts for the step after it.
  void restart(int first) {
    end_live();
    engine::EngineRequest req;
    req.id = live_ = ++last_id_;
    req.prompt = {static_cast<int32_t>(16 + rng_() % static_cast<uint64_t>(std::max(1, vocab_ - 16)))};
    req.sampling.temperature = 0;
    req.max_tokens = ctx_ - 2;
    core_->add(std::move(req));
    drafts_ = first - 1;
    core_->step();
    used_ = 2;
    proposed_ = first;
  }

  std::unique_ptr<engine::EngineCore> core_;
  int vocab_, ctx_;
  int drafts_ = 0;    // what the next proposal holds
  int proposed_ = 1;  // tokens the next step verifies: its drafts (proposed) + 1
  engine::RequestId live_ = 0, last_id_ = 0;
  int used_ = 0;
  std::mt19937_64 rng_{99};
};

using Budget = std::function<double()>;  // seconds left

// Median step time of each candidate, over `rounds` rounds of `steps` steps each, every
// candidate once per round; rounds after the first stop when the budget is spent.
std::vector<double> compare(StepTimer& st, const std::vector<Tuning>& cands, int rounds, int steps,
                            const Budget& left_s) {
  std::vector<std::vector<double>> ms(cands.size());
  for (int r = 0; r < rounds && (r == 0 || left_s() > 0); ++r)
    for (size_t c = 0; c < cands.size(); ++c) {
      kernels::set_tuning(cands[c]);
      for (int s = 0; s < steps; ++s) ms[c].push_back(st.step_ms(1, 1));
    }
  std::vector<double> med;
  for (auto& v : ms) med.push_back(median(v));
  return med;
}

// The packed formats whose decode kernels take a weight prefetch distance and that carry at
// least 5% of a token's bytes, largest first.
std::vector<PackedFormat> prefetch_formats(const gguf::GgufFile& file) {
  const models::StreamAccount acct = models::account_decode_stream(file);
  std::map<PackedFormat, uint64_t> bytes;
  for (const models::TensorAccount& t : acct.tensors) bytes[kernels::packed_format(t.type)] += t.streamed_bytes;
  std::vector<std::pair<uint64_t, PackedFormat>> v;
  for (PackedFormat f : {PackedFormat::kQ4_0, PackedFormat::kQ5_0, PackedFormat::kQ8_0, PackedFormat::kQ6_K})
    if (bytes[f] * 20 >= acct.streamed_bytes && bytes[f] > 0) v.push_back({bytes[f], f});
  std::sort(v.rbegin(), v.rend());
  std::vector<PackedFormat> out;
  for (const auto& p : v) out.push_back(p.second);
  return out;
}

// The candidate groups, tried in order, each as edits of the incumbent.
using Edit = std::function<void(Tuning&)>;
std::vector<std::vector<Edit>> search_groups(const std::vector<PackedFormat>& formats) {
  // The weight prefetch first: the group that moved the step most where the defaults fall short
  // (docs/perf-log.md), so a tight budget spends itself there.
  std::vector<std::vector<Edit>> groups;
  for (PackedFormat f : formats) {
    std::vector<Edit> g;
    const int idx = static_cast<int>(f);
    for (int d :
         f == PackedFormat::kQ6_K ? std::vector<int>{0, 2048, 8192} : std::vector<int>{0, 512, 1024, 2048, 4096})
      g.push_back([idx, d](Tuning& t) { t.weight_ahead[idx] = d; });
    groups.push_back(g);
  }
  std::vector<Edit> streams, act, split;
  for (auto [s, i] : {std::pair{2, 1}, {2, 8}, {3, 1}, {4, 1}})
    streams.push_back([s, i](Tuning& t) {
      t.streams = s;
      t.interleave = i;
    });
  groups.push_back(streams);
  for (int a : {2, 4, 8}) act.push_back([a](Tuning& t) { t.act_ahead = a; });
  for (int d : {2, 4, 8}) split.push_back([d](Tuning& t) { t.split_div = d; });
  groups.push_back(act);
  groups.push_back(split);
  return groups;
}

struct Calibration {
  Tuning tuning;
  double default_ms = 0, tuned_ms = 0;
};

constexpr int kRounds = 3, kSteps = 2;            // per search group
constexpr int kFinalRounds = 3, kFinalSteps = 2;  // the winner against the defaults

// Coordinate descent over the groups while the budget allows a whole group (priced at `t1_s`
// a step) and the final comparison, then the winner against the defaults in interleaved
// rounds.
Calibration search(StepTimer& st, const gguf::GgufFile& file, double t1_s, double reserve_s, const Budget& left_s) {
  Tuning best;
  const double final_s = 2 * kFinalRounds * kFinalSteps * t1_s + reserve_s;
  const std::vector<std::vector<Edit>> groups = search_groups(prefetch_formats(file));
  int searched = 0, reduced = 0;
  for (const std::vector<Edit>& group : groups) {
    std::vector<Tuning> cands{best};
    for (const Edit& e : group) {
      Tuning t = best;
      e(t);
      if (!(t == best)) cands.push_back(t);
    }
    int steps = kSteps;
    if (static_cast<double>(cands.size()) * kRounds * kSteps * t1_s + final_s > left_s()) {
      // A tight budget (a slow or loaded host): the group's middle value alone, one step a round.
      if (cands.size() < 2) continue;
      cands = {cands[0], cands[cands.size() / 2]};
      steps = 1;
      if (2.0 * kRounds * t1_s + final_s > left_s()) break;
      ++reduced;
    }
    ++searched;
    const std::vector<double> ms = compare(st, cands, kRounds, steps, left_s);
    const size_t win = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
    if (ms[win] < (1 - kMinGain) * ms[0]) best = cands[win];
  }
  std::fprintf(stderr, "tuning: searched %d of %zu parameter groups (%d with one candidate: a %.0f ms step)\n",
               searched, groups.size(), reduced, t1_s * 1e3);
  Calibration c;
  if (best == Tuning{}) return c;  // nothing beat the defaults: no final rounds needed
  const std::vector<double> ms = compare(st, {Tuning{}, best}, kFinalRounds, kFinalSteps, left_s);
  c.default_ms = ms[0];
  c.tuned_ms = ms[1];
  // The final rounds decide: a winner of one noisy group that does not hold up is dropped.
  c.tuning = ms[1] < (1 - kMinGain) * ms[0] ? best : Tuning{};
  if (c.tuning == Tuning{}) c.tuned_ms = c.default_ms;
  return c;
}

// The curve in `rounds` interleaved rounds (every T once per round) into r.curve and
// r.curve_t1_ms; left empty (not measured) when the budget runs out before one round is
// complete. A step of more tokens never costs less: a measured dip is noise, and the policy
// needs a non-decreasing curve.
void measure_curve(StepTimer& st, int rounds, const Budget& left_s, tune::TuneRecord& r) {
  const auto& T = tune::kCurveTokens;
  std::vector<std::vector<double>> ms(T.size());
  for (int k = 0; k < rounds && (k == 0 || left_s() > 0); ++k)
    for (size_t i = 0; i < T.size(); ++i) {
      if (left_s() <= 0 && k == 0) return;
      ms[i].push_back(st.step_ms(T[i], T[(i + 1) % T.size()]));
    }
  r.curve_t1_ms = median(ms[0]);
  for (size_t i = 0; i < T.size(); ++i) {
    const double rel = i == 0 ? 1.0 : median(ms[i]) / r.curve_t1_ms;
    r.curve.points.emplace_back(T[i], i == 0 ? rel : std::max(rel, r.curve.points.back().second));
  }
}

tune::HostKey host_key(ThreadPool& pool, const models::Model& model, const gguf::GgufFile& file) {
  tune::HostKey k;
  k.cpu_model = tune::cpu_model_name();
  k.isa = kernels::cpu_kernels().isa;
  k.threads = pool.size();
  // The placement bench reports (bench_probe.h): the fastest of a few probes against one line.
  std::vector<double> rt;
  if (pool.size() > 1) {
    HandoffProbe probe(pool);
    for (int i = 0; i < 5; ++i) rt.push_back(probe.measure());
  }
  k.placement = placement_of(pool.size(), rt);
  k.model = strfmt("%s %llu B/token", model.spec().arch.c_str(),
                   static_cast<unsigned long long>(models::account_decode_stream(file).streamed_bytes));
  return k;
}

// The budget is split by the cost of a step measured first: as many search groups as fit while
// one round of the curve (about 14 one-token steps' worth) stays affordable, the final rounds,
// then the curve in as many rounds (up to 5) as are left.
tune::TuneRecord calibrate(models::Model& model, KvCache& kv, const gguf::GgufFile& file, int ctx, double budget_s) {
  const auto t0 = clock_type::now();
  const auto left_s = [&] { return budget_s - seconds_since(t0); };
  tune::TuneRecord r;
  StepTimer st(model, kv, std::min(ctx, kCalibCtx));
  kernels::set_tuning(Tuning{});
  std::vector<double> warm;
  for (int i = 0; i < 3; ++i) warm.push_back(st.step_ms(1, 1));  // first touch, threads spun up
  const double t1_s = median(warm) * 1e-3;
  double curve_units = 0;  // one round of the curve, in one-token steps (about T/8 + 1 each)
  for (int t : tune::kCurveTokens) curve_units += 1 + t / 8.0;
  const Calibration c = search(st, file, t1_s, curve_units * t1_s, left_s);
  kernels::set_tuning(c.tuning);
  r.tuning = c.tuning;
  r.default_step_ms = c.default_ms;
  r.tuned_step_ms = c.tuned_ms;
  const int curve_rounds = std::clamp(static_cast<int>(left_s() / (curve_units * t1_s)), 1, 5);
  measure_curve(st, curve_rounds, left_s, r);
  if (r.curve.points.empty()) r.curve_t1_ms = t1_s * 1e3;  // out of time: not cached (apply_tuning)
  r.calibration_s = seconds_since(t0);
  return r;
}

}  // namespace

namespace {

// SLUICE_TUNE_BUDGET_S overrides the calibration's budget (seconds; tests force a failure with
// a tiny one, a slow host may allow more).
double budget_from_environment(double budget_s) {
  const char* env = std::getenv("SLUICE_TUNE_BUDGET_S");
  if (env == nullptr || *env == 0) return budget_s;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != 0 || !(v > 0) || !std::isfinite(v))
    fail("SLUICE_TUNE_BUDGET_S must be a positive number of seconds, got '%s'", env);
  return v;
}

void save_quietly(const std::string& path, const tune::TuneRecord& r) {
  try {
    tune::save_record(path, r);
  } catch (const Error& e) {
    std::fprintf(stderr, "warning: %s\n", e.what());
  }
}

}  // namespace

TuneMode tune_mode(bool no_tune) {
  const char* env = std::getenv("SLUICE_NO_TUNE");
  if (no_tune || (env && *env && std::string(env) != "0")) return TuneMode::kOff;
  return TuneMode::kAuto;
}

TuneOutcome apply_tuning(TuneMode mode, models::Model& model, KvCache& kv, ThreadPool& pool, const gguf::GgufFile& file,
                         int ctx_size, double budget_s) {
  TuneOutcome o;
  kernels::set_tuning(Tuning{});
  if (mode == TuneMode::kOff) {  // no probe, no cache: only what bench prints
    o.record.key.cpu_model = tune::cpu_model_name();
    o.record.key.isa = kernels::cpu_kernels().isa;
    o.record.key.threads = pool.size();
    o.source = "defaults (tuning off)";
    return o;
  }
  o.record.key = host_key(pool, model, file);
  if (tune::cache_dir().empty()) {
    o.source = "defaults (no cache directory: neither XDG_CACHE_HOME nor HOME is set)";
    return o;
  }
  o.path = tune::cache_path(o.record.key);
  if (mode == TuneMode::kAuto) {
    std::string warning;
    if (auto r = tune::load_record(o.path, o.record.key, &warning)) {
      o.record = *r;
      if (!r->failed.empty()) {  // remembered: the defaults, without spending the budget again
        o.record.tuning = Tuning{};
        o.source = "defaults (calibration failed here before: " + r->failed + "; `sluice tune --force` retries)";
        return o;
      }
      kernels::set_tuning(r->tuning);
      o.source = "cache";
      return o;
    }
    if (!warning.empty()) std::fprintf(stderr, "warning: %s; tuning again\n", warning.c_str());
  }
  if (ctx_size < kMinCtx) {
    if (mode == TuneMode::kForce) fail("sluice tune needs a context of at least %d positions", kMinCtx);
    o.source = strfmt("defaults (a context of %d is too small to calibrate)", ctx_size);
    return o;
  }
  budget_s = budget_from_environment(budget_s);
  std::fprintf(stderr, "tuning the kernels for this host (once; --no-tune skips it) ...\n");
  tune::TuneRecord r = calibrate(model, kv, file, ctx_size, budget_s);
  r.key = o.record.key;
  o.record = r;
  o.source = "calibrated";
  if (r.curve.points.empty()) {
    // Steps too slow for the budget (a loaded or slow host): the defaults, and the failure is
    // cached with its reason so that the next run does not spend the budget again.
    o.record.failed = strfmt("calibration ran out of its %.0f s budget (a step takes %.0f ms)", budget_s,
                             r.curve_t1_ms);
    o.record.tuning = Tuning{};
    o.record.curve = spec::StepCostCurve{};
    o.record.default_step_ms = o.record.tuned_step_ms = 0;
    kernels::set_tuning(o.record.tuning);
    o.source = "defaults (" + o.record.failed + ")";
    std::fprintf(stderr, "warning: %s; using the defaults, remembered in %s (`sluice tune --force` retries)\n",
                 o.record.failed.c_str(), o.path.c_str());
    save_quietly(o.path, o.record);
    return o;
  }
  save_quietly(o.path, r);
  return o;
}

std::string describe_outcome(const TuneOutcome& o) {
  std::string s = strfmt("tuning: %s (%s)", o.source.c_str(), kernels::describe_tuning(kernels::tuning()).c_str());
  if (o.record.tuned_step_ms > 0)
    s += strfmt(", calibrated step %.2f ms vs %.2f ms with the defaults", o.record.tuned_step_ms,
                o.record.default_step_ms);
  else if (o.record.calibration_s > 0 && o.record.failed.empty())
    s += ": the defaults held (or the budget allowed no search on this host)";
  return s;
}

}  // namespace sluice::app
