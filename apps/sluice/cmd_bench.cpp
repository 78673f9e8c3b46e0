// `sluice bench -m FILE`: prefill tokens/s and decode ms/token at chosen depths, with a
// per-op-class breakdown (time and achieved GB/s), the DRAM read bandwidth measured in the
// same run with the same threads, the floor (weight bytes one decoded token streams ÷ that
// bandwidth) and the efficiency. --json prints one JSON object (python/bench.py reads it).
//
// Timing: prefill is one forward of P tokens (logits of the last only), median over repeats,
// each on a fresh sequence. Decode at depth D: D tokens are prefilled untimed, then N
// single-token steps are timed one by one; the reported ms/step is the median over every
// timed step of every repeat. With --batch B, B sequences are each prefilled to D and every
// step decodes one token of each (one forward; weights are read once for all of them):
// ms/token is then ms/step ÷ B. Prompt ids are random (seeded) — speed does not depend on them.
// Every forward is an engine step (engine::EngineCore, as `sluice serve` runs it): a step
// includes scheduling and the greedy choice of each sequence's next token.
//
// Our machines share their memory bus with other tenants: the bandwidth a run can get drifts
// within seconds. So decode is measured in bursts of --burst steps, each between two
// bandwidth probes, and every ratio to the bandwidth (efficiency, each op class's share of
// it) is taken per burst against the mean of its two probes, then the median over bursts is
// reported. The headline bandwidth and floor are the medians over all probes.
//
// --spec-verify K1,K2,.. measures verification steps: at each depth, every sequence carries
// K random drafts after its last token (the target rejects them, so each step is exactly
// B·(K+1) tokens of work and the depth advances by one), K = 0 being the plain step. It prints
// each step's cost against the plain one and the tokens/s that implies at a per-token
// acceptance rate a: a verification yields (1 − a^(K+1)) / (1 − a) tokens in expectation
// (the accepted run, then the target's own token), K + 1 at a = 1.
//
// --machine measures the machine alone, without a model: the bus bandwidth and the cores'
// round trip, as the probes above (python/loadgen.py --probe runs it before and after every
// round, so each serving measurement says which placement of the cores it ran on).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "apps/sluice/bench_draft.h"
#include "apps/sluice/bench_probe.h"
#include "apps/sluice/commands.h"
#include "apps/sluice/engine_session.h"
#include "apps/sluice/tuner.h"
#include "base/error.h"
#include "base/process_memory.h"
#include "kernels/cpu_kernels.h"
#include "models/weight_accounting.h"

namespace sluice::app {

namespace {

using clock_type = std::chrono::steady_clock;

struct BenchArgs {
  SessionOptions session;
  int prompt = 512, n_decode = 32, repeats = 3, burst = 8, batch = 1;
  std::string depths = "0,512";
  std::string spec_verify;  // draft lengths K to time verification steps at (empty: none)
  double bandwidth_gib = 1.0;
  bool json = false;
  bool machine = false;
};

std::vector<int> parse_ints(const std::string& s, const char* flag, const char* what) {
  std::vector<int> d;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0) fail("%s: '%s' is not a %s", flag, item.c_str(), what);
    d.push_back(v);
  }
  if (d.empty()) fail("%s: no %s given", flag, what);
  return d;
}

std::vector<int32_t> random_ids(int n, int vocab, std::mt19937_64& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  // Skip the low ids (special tokens in Gemma vocabularies); any id costs the same.
  for (auto& t : ids) t = static_cast<int32_t>(16 + rng() % static_cast<uint64_t>(std::max(1, vocab - 16)));
  return ids;
}

// The proposer of --spec-verify: `k` random tokens per sequence and step (ids below n_vocab).
struct VerifyDrafts {
  int k = 0;
  int n_vocab = 0;
  std::mt19937_64 rng{4321};
};

// Expected tokens one verification of k drafts yields at per-token acceptance a.
double expected_tokens(double a, int k) {
  if (a >= 1) return k + 1;
  return (1 - std::pow(a, k + 1)) / (1 - a);
}

constexpr double kAcceptance[] = {0, 0.25, 0.5, 0.75, 1};

struct DecodeResult {
  int depth = 0;
  int draft_k = 0;           // drafts per sequence and step (--spec-verify); 0: plain decode
  double ms_per_step = 0;    // one decode step (of --batch sequences)
  models::StepProfile prof;  // summed over all timed steps
  int64_t steps = 0;
  int64_t drafted = 0;     // drafts the timed steps verified (engine counters)
  std::vector<double> bw;  // probes taken around this depth's bursts
  std::vector<double> rt;  // core-to-core round trips (HandoffProbe) at the same moments
  // Per burst: floor at the burst's bandwidth ÷ its median step; each class's GB/s ÷ that
  // bandwidth; attention + other as a share of the step.
  std::vector<double> efficiency, rest_share;
  std::vector<double> class_bw_fraction[models::kOpClassCount];
};

struct BenchResult {
  std::vector<double> prefill_s;
  std::vector<DecodeResult> dec;
  std::vector<double> bw, rt;  // every probe of the run
  uint64_t probe_bytes = 0;
  bool probe_reads_weights = false;  // the probe read the repacked weights, not a buffer of its own
  models::StreamAccount acct;
  double bandwidth() const { return median(bw); }
  double floor_ms() const { return static_cast<double>(acct.streamed_bytes) / (bandwidth() * 1e9) * 1e3; }
};

// ---- measure ----

// Drives the engine for the measurements: requests of random ids, greedy, no stop ids (a
// sequence ends only by its token limit), so every step is exactly the work asked for.
class Measurer {
 public:
  Measurer(const BenchArgs& a, EngineSession& s, VerifyDrafts& vd)
      : a_(a),
        sess_(s),
        vd_(vd),
        probe_(s.pool(), static_cast<uint64_t>(a.bandwidth_gib * (1ull << 30)), s.model().weight_memory()),
        handoff_(s.pool()) {}

  // Every depth is measured at each draft length in `ks` ({0}: plain decode only).
  BenchResult run(const std::vector<int>& depths, const std::vector<int>& ks) {
    BenchResult r;
    r.acct = models::account_decode_stream(sess_.file());
    r.probe_bytes = probe_.bytes();
    r.probe_reads_weights = probe_.reads_weights();
    probe_.measure();  // warm-up
    probe_all(r);
    warm_up();
    for (int i = 0; i < a_.repeats; ++i) r.prefill_s.push_back(time_prefill());
    probe_all(r);
    for (int depth : depths) {
      for (int k : ks) {
        vd_.k = k;
        r.dec.push_back(measure_depth(depth));
        r.bw.insert(r.bw.end(), r.dec.back().bw.begin(), r.dec.back().bw.end());
        r.rt.insert(r.rt.end(), r.dec.back().rt.begin(), r.dec.back().rt.end());
      }
    }
    vd_.k = 0;
    return r;
  }

 private:
  void probe_all(BenchResult& r) {
    for (int i = 0; i < 3; ++i) r.bw.push_back(probe_.measure());
    r.rt.push_back(handoff_.measure());
  }

  engine::RequestId submit(int n_prompt, int max_tokens) {
    engine::EngineRequest req;
    const engine::RequestId id = req.id = sess_.next_id();
    req.prompt = random_ids(n_prompt, sess_.spec().n_vocab, rng_);
    req.sampling.temperature = 0;
    req.max_tokens = max_tokens;
    sess_.core().add(std::move(req));
    return id;
  }

  void finish_all() {
    for (engine::RequestId id : live_) sess_.core().abort(id);
    live_.clear();
    while (sess_.core().has_work()) sess_.core().step();
    sess_.core().take_outputs();
  }

  // First touch of the weights and thread spin-up: a short prefill and one decode.
  void warm_up() {
    live_.push_back(submit(8, 2));
    sess_.core().step();
    sess_.core().step();
    finish_all();
  }

  double time_prefill() {
    live_.push_back(submit(a_.prompt, 1));
    const auto t0 = clock_type::now();
    sess_.core().step();  // the whole prompt in one forward (the token budget holds it)
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    finish_all();
    return s;
  }

  DecodeResult measure_depth(int depth);
  void measure_burst(DecodeResult& d, int n_steps, double& bw_before, std::vector<double>& step_ms);

  const BenchArgs& a_;
  EngineSession& sess_;
  VerifyDrafts& vd_;
  BandwidthProbe probe_;
  HandoffProbe handoff_;
  std::mt19937_64 rng_{1234};
  std::vector<engine::RequestId> live_;
};

// Decode at `depth`: --batch sequences prefilled to it (one untimed step), then --n-decode
// timed steps of one token each, in bursts between bandwidth probes. At depth 0 each
// sequence's one-token prompt is itself the first timed step (position 0).
DecodeResult Measurer::measure_depth(int depth) {
  DecodeResult d;
  d.depth = depth;
  d.draft_k = vd_.k;
  std::vector<double> step_ms;
  for (int r = 0; r < a_.repeats; ++r) {
    for (int i = 0; i < a_.batch; ++i) live_.push_back(submit(std::max(depth, 1), a_.n_decode + 2 + vd_.k));
    if (depth > 0) sess_.core().step();
    double bw_before = probe_.measure();
    d.bw.push_back(bw_before);
    d.rt.push_back(handoff_.measure());
    for (int i0 = 0; i0 < a_.n_decode; i0 += a_.burst)
      measure_burst(d, std::min(a_.n_decode, i0 + a_.burst) - i0, bw_before, step_ms);
    finish_all();
  }
  d.steps = static_cast<int64_t>(step_ms.size());
  d.ms_per_step = median(step_ms);
  return d;
}

// Weight bytes one step of the run reads: the file's per-token account, where a MoE's expert
// share (k/E of the stacks) is replaced by what the picked experts read (the profile's
// ffn_experts bytes per step), so the floor follows the experts the run actually picked.
double step_weight_bytes(const models::StreamAccount& acct, const models::StepProfile& prof, int64_t steps) {
  double b = static_cast<double>(acct.streamed_bytes);
  if (acct.expert_count > 0 && steps > 0)
    b += static_cast<double>(prof.bytes[static_cast<int>(models::OpClass::kFfnExperts)]) / static_cast<double>(steps) -
         static_cast<double>(acct.group_bytes(models::WeightGroup::kFfnExperts));
  return b;
}

void Measurer::measure_burst(DecodeResult& d, int n_steps, double& bw_before, std::vector<double>& step_ms) {
  models::StepProfile prof;
  std::vector<double> ms;
  sess_.model().set_profile(&prof);
  const int64_t drafted0 = sess_.core().stats().drafted_tokens;
  for (int i = 0; i < n_steps; ++i) {
    const auto t0 = clock_type::now();
    sess_.core().step();
    ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  }
  sess_.model().set_profile(nullptr);
  d.drafted += sess_.core().stats().drafted_tokens - drafted0;
  const double bw_after = probe_.measure();
  d.bw.push_back(bw_after);
  d.rt.push_back(handoff_.measure());
  const double burst_bw = 0.5 * (bw_before + bw_after);
  bw_before = bw_after;
  const models::StreamAccount acct = models::account_decode_stream(sess_.file());
  d.efficiency.push_back(step_weight_bytes(acct, prof, n_steps) / (burst_bw * 1e9) * 1e3 / median(ms));
  double profiled = 0;
  for (int c = 0; c < models::kOpClassCount; ++c) {
    const double sec = prof.seconds[c] / n_steps, bytes = static_cast<double>(prof.bytes[c]) / n_steps;
    d.class_bw_fraction[c].push_back(sec > 0 ? bytes / sec / 1e9 / burst_bw : 0.0);
    d.prof.seconds[c] += prof.seconds[c];
    d.prof.bytes[c] += prof.bytes[c];
    profiled += prof.seconds[c];
  }
  d.prof.steps += prof.steps;
  const double rest = prof.seconds[static_cast<int>(models::OpClass::kAttention)] +
                      prof.seconds[static_cast<int>(models::OpClass::kOther)];
  d.rest_share.push_back(profiled > 0 ? rest / profiled : 0.0);
  step_ms.insert(step_ms.end(), ms.begin(), ms.end());
}

// ---- report ----

struct ClassRow {
  double ms = 0, bytes = 0, gbs = 0, bw_fraction = 0;
};

ClassRow class_row(const DecodeResult& d, int c) {
  ClassRow r;
  r.ms = d.prof.seconds[c] * 1e3 / static_cast<double>(d.steps);
  r.bytes = static_cast<double>(d.prof.bytes[c]) / static_cast<double>(d.steps);
  r.gbs = r.ms > 0 ? r.bytes / (r.ms * 1e-3) / 1e9 : 0.0;
  r.bw_fraction = median(d.class_bw_fraction[c]);
  return r;
}

double depth_floor_ms(const BenchResult& r, const DecodeResult& d) {
  return step_weight_bytes(r.acct, d.prof, d.steps) / (median(d.bw) * 1e9) * 1e3;
}

nlohmann::json decode_json(const BenchArgs& a, const BenchResult& r, const DecodeResult& d) {
  nlohmann::json classes;
  double named = 0;
  for (int c = 0; c < models::kOpClassCount; ++c) {
    const ClassRow row = class_row(d, c);
    classes[models::op_class_name(static_cast<models::OpClass>(c))] = {
        {"ms", row.ms}, {"bytes", row.bytes}, {"gbs", row.gbs}, {"bw_fraction", row.bw_fraction}};
    named += row.ms;
  }
  return {{"depth", d.depth},
          {"batch", a.batch},
          {"draft_k", d.draft_k},
          {"tokens_per_step", a.batch * (d.draft_k + 1)},
          {"ms_per_step", d.ms_per_step},
          {"ms_per_token", d.ms_per_step / a.batch},
          {"tokens_per_s", a.batch * 1e3 / d.ms_per_step},
          {"bandwidth_gbs", median(d.bw)},
          {"core_round_trip_ns", median(d.rt)},
          {"floor_ms", depth_floor_ms(r, d)},
          {"efficiency", median(d.efficiency)},
          {"efficiency_bursts", d.efficiency},
          {"attention_other_share", median(d.rest_share)},
          {"profiled_ms_per_step", named},
          {"steps", d.steps},
          {"classes", classes}};
}

// The plain step (draft_k 0) at the same depth as d.
const DecodeResult& plain_step(const BenchResult& r, const DecodeResult& d) {
  for (const DecodeResult& p : r.dec)
    if (p.depth == d.depth && p.draft_k == 0) return p;
  return d;
}

// --spec-verify: per depth and K, the step's cost against the plain step and the tokens/s of
// all --batch sequences at each acceptance rate.
nlohmann::json verify_json(const BenchArgs& a, const BenchResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const DecodeResult& d : r.dec) {
    nlohmann::json at;
    for (double acc : kAcceptance)
      at[strfmt("%.2f", acc)] = a.batch * expected_tokens(acc, d.draft_k) * 1e3 / d.ms_per_step;
    out.push_back({{"depth", d.depth},
                   {"batch", a.batch},
                   {"k", d.draft_k},
                   {"tokens_per_step", a.batch * (d.draft_k + 1)},
                   {"drafts_verified", d.drafted},
                   {"steps", d.steps},
                   {"ms_per_step", d.ms_per_step},
                   {"cost_vs_plain", d.ms_per_step / plain_step(r, d).ms_per_step},
                   {"tokens_per_s_at_acceptance", at}});
  }
  return out;
}

void print_verify(const BenchArgs& a, const BenchResult& r) {
  std::printf(
      "\nverification steps (%d sequence%s, each the last token + K random drafts; tokens/s at per-token "
      "acceptance a):\n",
      a.batch, a.batch > 1 ? "s" : "");
  std::printf("  %6s %3s %7s %9s %8s", "depth", "K", "tokens", "ms/step", "vs K=0");
  for (double acc : kAcceptance) std::printf("  a=%-5.2f", acc);
  std::printf("\n");
  for (const DecodeResult& d : r.dec) {
    std::printf("  %6d %3d %7d %9.2f %7.2fx", d.depth, d.draft_k, a.batch * (d.draft_k + 1), d.ms_per_step,
                d.ms_per_step / plain_step(r, d).ms_per_step);
    for (double acc : kAcceptance)
      std::printf("  %7.1f", a.batch * expected_tokens(acc, d.draft_k) * 1e3 / d.ms_per_step);
    std::printf("\n");
  }
}

// Resident memory (bytes, /proc/self/status) when the session was ready and the peak of the
// whole run so far (VmHWM: the load, the prefills and the decodes), beside the file's size.
nlohmann::json memory_json(const EngineSession& sess) {
  const ProcessMemory now = process_memory();
  if (!now.known) return nullptr;
  return {{"file_bytes", sess.file().file_size()},
          {"rss_after_load", sess.memory_after_load().rss},
          {"peak_rss_after_load", sess.memory_after_load().peak_rss},
          {"peak_rss", now.peak_rss}};
}

void print_memory(const EngineSession& sess, const BenchResult& r) {
  const ProcessMemory now = process_memory();
  if (!now.known) return;
  const double file = static_cast<double>(sess.file().file_size());
  const ProcessMemory& l = sess.memory_after_load();
  std::printf(
      "memory: resident after load %.1f MiB (%.2fx the file), peak by then %.1f MiB (%.2fx), peak of the run %.1f MiB (%.2fx",
      l.rss / 1048576.0, l.rss / file, l.peak_rss / 1048576.0, l.peak_rss / file, now.peak_rss / 1048576.0,
      now.peak_rss / file);
  if (r.probe_reads_weights) std::printf(")\n");
  else std::printf(", the bandwidth probe's %.0f MiB buffer included)\n", r.probe_bytes / 1048576.0);
}

// The JSON contract of python/README.md "Benchmarks" (python/bench.py reads it).
nlohmann::json to_json(const BenchArgs& a, EngineSession& sess, const BenchResult& r) {
  const double pre_s = median(r.prefill_s);
  std::vector<double> prefill_ms;
  for (double s : r.prefill_s) prefill_ms.push_back(s * 1e3);
  nlohmann::json j;
  j["model"] = sess.spec().name;
  j["file"] = a.session.model_path;
  j["arch"] = sess.spec().arch;
  j["threads"] = sess.threads();
  j["isa"] = kernels::cpu_kernels().isa;
  j["cpu_model"] = sess.tuning().record.key.cpu_model;
  j["tuning"] = nlohmann::json::parse(tune::to_json_text(sess.tuning().record));
  j["tuning"]["source"] = sess.tuning().source;
  j["tuning"]["from_cache"] = sess.tuning().from_cache();
  j["tuning"]["path"] = sess.tuning().path;
  j["kv_type"] = a.session.kv_type;
  j["bandwidth_gbs"] = r.bandwidth();
  j["bandwidth_samples_gbs"] = r.bw;
  j["bandwidth_probe_bytes"] = r.probe_bytes;
  j["bandwidth_probe_reads_weights"] = r.probe_reads_weights;
  j["core_round_trip_ns"] = median(r.rt);
  j["core_round_trip_samples_ns"] = r.rt;
  j["placement"] = placement_of(sess.threads(), r.rt);
  j["bytes_per_token"] = r.acct.streamed_bytes;
  j["floor_ms"] = r.floor_ms();
  j["prefill"] = {
      {"tokens", a.prompt}, {"ms", pre_s * 1e3}, {"tokens_per_s", a.prompt / pre_s}, {"samples_ms", prefill_ms}};
  j["decode"] = nlohmann::json::array();
  for (const DecodeResult& d : r.dec) j["decode"].push_back(decode_json(a, r, d));
  if (!a.spec_verify.empty()) j["spec_verify"] = verify_json(a, r);
  j["memory"] = memory_json(sess);
  return j;
}

void print_decode(const BenchArgs& a, const BenchResult& r, const DecodeResult& d) {
  if (a.batch > 1) std::printf("\nbatch of %d sequences: %.1f tokens/s in all", a.batch, a.batch * 1e3 / d.ms_per_step);
  std::printf(
      "\ndecode at depth %d: %.2f ms/step | bandwidth around it %.1f GB/s, core round trip %.0f ns, floor %.2f ms | "
      "efficiency %.0f%% (median of %zu bursts) | attention + other %.1f%% of a step\n",
      d.depth, d.ms_per_step, median(d.bw), median(d.rt), depth_floor_ms(r, d), 100 * median(d.efficiency),
      d.efficiency.size(), 100 * median(d.rest_share));
  std::printf("  %-12s %9s %10s %8s %10s\n", "op class", "ms/step", "MB/step", "GB/s", "of bw");
  for (int c = 0; c < models::kOpClassCount; ++c) {
    const ClassRow row = class_row(d, c);
    std::printf("  %-12s %9.3f %10.1f %8.1f %9.0f%%\n", models::op_class_name(static_cast<models::OpClass>(c)), row.ms,
                row.bytes / 1e6, row.gbs, 100 * row.bw_fraction);
  }
}

void print_text(const BenchArgs& a, EngineSession& sess, const BenchResult& r) {
  std::printf(
      "\nbandwidth %.1f GB/s (median of %zu reads of %.2f GiB%s, %d threads) | %.1f MB per decoded token | floor %.2f ms/token | isa %s\n",
      r.bandwidth(), r.bw.size(), r.probe_bytes / double(1ull << 30), r.probe_reads_weights ? " of the weights" : "",
      sess.threads(), r.acct.streamed_bytes / 1e6, r.floor_ms(), kernels::cpu_kernels().isa);
  if (r.acct.expert_count > 0)
    std::printf(
        "mixture of experts: %llu of %llu experts a token (the MB above count that share); each depth's "
        "floor and efficiency use the bytes its picked experts read\n",
        static_cast<unsigned long long>(r.acct.expert_used), static_cast<unsigned long long>(r.acct.expert_count));
  std::printf("cpu %s | %s\n", sess.tuning().record.key.cpu_model.c_str(), describe_outcome(sess.tuning()).c_str());
  if (sess.threads() > 1) {
    const auto [lo, hi] = std::minmax_element(r.rt.begin(), r.rt.end());
    std::printf("core-to-core round trip %.0f ns (median of %zu probes, %.0f-%.0f): %s\n", median(r.rt), r.rt.size(),
                *lo, *hi, placement_words(placement_round_trip(r.rt)));
  }
  const double pre_s = median(r.prefill_s);
  std::printf("prefill %d tokens: %.1f ms, %.1f tokens/s\n", a.prompt, pre_s * 1e3, a.prompt / pre_s);
  for (const DecodeResult& d : r.dec)
    if (d.draft_k == 0) print_decode(a, r, d);
  if (!a.spec_verify.empty()) print_verify(a, r);
  print_memory(sess, r);
}

int run_bench(BenchArgs& a) {
  if (a.session.model_path.empty()) fail("bench needs a model: -m FILE (or --machine)");
  const std::vector<int> depths = parse_ints(a.depths, "--depths", "depth");
  std::vector<int> ks{0};
  if (!a.spec_verify.empty())
    for (int k : parse_ints(a.spec_verify, "--spec-verify", "draft length")) {
      if (k < 1 || k > 64) fail("--spec-verify: draft lengths must be in [1, 64], got %d", k);
      if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
    }
  const int k_top = *std::max_element(ks.begin(), ks.end());
  if (a.prompt < 1 || a.n_decode < 1 || a.repeats < 1 || a.burst < 1 || a.batch < 1)
    fail("--prompt, --n-decode, --repeats, --burst and --batch must be >= 1");
  const int max_depth = *std::max_element(depths.begin(), depths.end());
  a.session.n_seqs = a.batch;
  // At least the positions a calibration needs (tuner.h), when this host is not tuned yet.
  a.session.ctx_size = std::max(std::max(a.prompt, max_depth + a.n_decode + k_top + 2) + 1, 128);
  // One step holds the prefill, or every sequence's prefill to the deepest depth, or every
  // sequence's verification.
  a.session.token_budget = std::max({a.prompt, a.batch * std::max(max_depth, 1), a.batch * (k_top + 1)});
  a.session.prefix_caching = false;  // random prompts: nothing to reuse, nothing to hash
  auto vd = std::make_shared<VerifyDrafts>();
  if (k_top > 0) {
    a.session.spec = "none";
    a.session.draft_max = k_top;
    a.session.draft_hook = [vd](engine::RequestId, std::span<const int32_t>, int32_t k_max, std::vector<int32_t>& out) {
      for (int i = 0; i < std::min(vd->k, k_max); ++i)
        out.push_back(static_cast<int32_t>(16 + vd->rng() % static_cast<uint64_t>(std::max(1, vd->n_vocab - 16))));
    };
  }
  EngineSession sess(a.session);
  vd->n_vocab = sess.spec().n_vocab;
  if (!a.json) sess.print_summary();
  const BenchResult r = Measurer(a, sess, *vd).run(depths, ks);
  DraftStepCost c;
  const bool draft = !a.session.draft_path.empty();
  if (draft) c = measure_draft_step(sess, a.session.draft_path, std::max(max_depth, 1), a.n_decode);
  if (a.json) {
    nlohmann::json j = to_json(a, sess, r);
    if (draft)
      j["draft_step"] = {{"depth", c.depth},
                         {"target_ms", c.target_ms},
                         {"centroid_ms", c.centroid_ms},
                         {"full_ms", c.full_ms},
                         {"centroid_1t_ms", c.centroid_1t_ms}};
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    print_text(a, sess, r);
    if (draft) print_draft_step(c);
  }
  return 0;
}

}  // namespace

CommandFn add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "prefill and decode speed, per-op breakdown, bandwidth floor");
  add_session_options(cmd, args->session, false);  // required unless --machine
  cmd->add_option("-p,--prompt", args->prompt, "prefill length in tokens")->capture_default_str();
  cmd->add_option("-n,--n-decode", args->n_decode, "timed decode steps per depth and repeat")->capture_default_str();
  cmd->add_option("--depths", args->depths, "comma-separated KV depths to decode at")->capture_default_str();
  cmd->add_option("--repeats", args->repeats, "repeats of every measurement")->capture_default_str();
  cmd->add_option("--burst", args->burst, "decode steps between two bandwidth probes")->capture_default_str();
  cmd->add_option("--batch", args->batch, "sequences decoded together in every decode step (each at the depth)")
      ->capture_default_str();
  cmd->add_option("--spec-verify", args->spec_verify,
                  "comma-separated draft lengths K: time (K+1)-token verification steps against 1-token steps")
      ->capture_default_str();
  cmd->add_option("--bandwidth-gib", args->bandwidth_gib, "size of the bandwidth probe's buffer")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print one JSON object instead of tables");
  cmd->add_option("--draft", args->session.draft_path,
                  "also time one draft step of this Gemma 4 assistant (centroid and full head) against a target step");
  cmd->add_flag("--machine", args->machine,
                "measure only the machine (bus bandwidth, core-to-core round trip); no model");
  return [args]() {
    if (args->bandwidth_gib < 0.0625) fail("--bandwidth-gib must be at least 0.0625");
    if (args->machine) return run_machine_probe(args->session.threads, args->bandwidth_gib, args->json);
    return run_bench(*args);
  };
}

}  // namespace sluice::app
