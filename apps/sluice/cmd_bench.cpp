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
// ms/token is then ms/step ÷ B. Token ids are random (seeded) — speed does not depend on them.
//
// Our machines share their memory bus with other tenants: the bandwidth a run can get drifts
// within seconds. So decode is measured in bursts of --burst steps, each between two
// bandwidth probes, and every ratio to the bandwidth (efficiency, each op class's share of
// it) is taken per burst against the mean of its two probes, then the median over bursts is
// reported. The headline bandwidth and floor are the medians over all probes.
//
// --machine measures the machine alone, without a model: the bus bandwidth and the cores'
// round trip, as the probes above (python/loadgen.py --probe runs it before and after every
// round, so each serving measurement says which placement of the cores it ran on).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "apps/sluice/commands.h"
#include "apps/sluice/model_session.h"
#include "base/error.h"
#include "kernels/cpu_kernels.h"
#include "kernels/packed.h"
#include "models/weight_accounting.h"
#include "threading/thread_pool.h"

namespace sluice::app {

namespace {

using clock_type = std::chrono::steady_clock;

struct BenchArgs {
  SessionOptions session;
  int prompt = 512, n_decode = 32, repeats = 3, burst = 8, batch = 1;
  std::string depths = "0,512";
  double bandwidth_gib = 1.0;
  bool json = false;
  bool machine = false;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int> parse_depths(const std::string& s) {
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
    if (used != item.size() || v < 0) fail("--depths: '%s' is not a depth", item.c_str());
    d.push_back(v);
  }
  if (d.empty()) fail("--depths: no depth given");
  return d;
}

// The round trip of one cache line between threads 0 and 1 of the pool, in ns (median of
// 5 runs of 1000 round trips): the price of every hand-off in a step — a job's start and end,
// a barrier, a row one core writes and the other reads. Our VMs move between two placements
// of their two cores: one where they share a cache (a short round trip, a slower bus) and one
// where they do not (most likely two dies with a memory link each: a round trip several times
// longer, a faster bus). The placement explains much of a run's attention + other share
// (docs/performance.md §4). 0 with one thread.
class HandoffProbe {
 public:
  explicit HandoffProbe(ThreadPool& pool) : pool_(pool) {}
  double measure() {
    if (pool_.size() < 2) return 0;
    constexpr int kTrips = 1000;
    std::vector<double> runs;
    for (int r = 0; r < 5; ++r) {
      flag_.store(0, std::memory_order_relaxed);
      double ns = 0;
      pool_.run([&](int ith, int) {
        if (ith > 1) return;
        const auto t0 = clock_type::now();
        for (int i = 0; i < kTrips; ++i) {
          if (ith == 0) {
            flag_.store(2 * i + 1, std::memory_order_release);
            while (flag_.load(std::memory_order_acquire) != 2 * i + 2) {
            }
          } else {
            while (flag_.load(std::memory_order_acquire) != 2 * i + 1) {
            }
            flag_.store(2 * i + 2, std::memory_order_release);
          }
        }
        if (ith == 0) ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count() / kTrips;
      });
      runs.push_back(ns);
    }
    return median(runs);
  }

 private:
  ThreadPool& pool_;
  alignas(64) std::atomic<int> flag_{0};
};

// What a round trip says of the placement (python/loadgen.py's CLOSE_NS is the same line).
const char* placement_words(double rt_ns) {
  return rt_ns < 150 ? "the cores share a cache" : "the cores are far apart (hand-offs cost more)";
}

// A plain streaming read of `bytes` bytes split over the pool's threads, each summing its
// contiguous share with the ISA set's widest loads (kernels::cpu_stream_sum); returns GB/s
// (1e9 bytes per second). The buffer is 2 MiB aligned (transparent huge pages where the
// system allows them, as for the repacked weights) and written once so every page is resident.
class BandwidthProbe {
 public:
  BandwidthProbe(ThreadPool& pool, uint64_t bytes) : pool_(pool), bytes_(bytes / (256 * 64) * (256 * 64)) {
    buf_ = AlignedBytes::alloc(bytes_);
    pool_.run([&](int ith, int nth) {
      int64_t a, b;
      split_range(static_cast<int64_t>(bytes_ / 8), ith, nth, &a, &b);
      auto* w = reinterpret_cast<uint64_t*>(buf_.data());
      for (int64_t i = a; i < b; ++i) w[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    });
  }
  double measure() {
    const kernels::CpuKernels& k = kernels::cpu_kernels();
    std::vector<uint64_t> sums(static_cast<size_t>(pool_.size()), 0);
    const uint64_t chunks = bytes_ / 256;
    const auto t0 = clock_type::now();
    pool_.run([&](int ith, int nth) {
      int64_t a, b;
      split_range(static_cast<int64_t>(chunks), ith, nth, &a, &b);
      sums[static_cast<size_t>(ith)] = kernels::cpu_stream_sum(k, buf_.data() + a * 256, static_cast<uint64_t>(b - a) * 256);
    });
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    sink_ += sums[0];
    return static_cast<double>(bytes_) / s / 1e9;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  ThreadPool& pool_;
  uint64_t bytes_;
  AlignedBytes buf_;
  uint64_t sink_ = 0;
};

// --machine: the probes alone, on a pool of the session's thread count.
int run_machine_probe(const BenchArgs& args) {
  ThreadPool pool(args.session.threads > 0 ? args.session.threads : ThreadPool::default_threads());
  BandwidthProbe probe(pool, static_cast<uint64_t>(args.bandwidth_gib * (1ull << 30)));
  HandoffProbe handoff(pool);
  probe.measure();   // warm-up
  std::vector<double> bw, rt;
  for (int i = 0; i < 5; ++i) bw.push_back(probe.measure());
  for (int i = 0; i < 3; ++i) rt.push_back(handoff.measure());
  if (args.json) {
    nlohmann::json j;
    j["threads"] = pool.size();
    j["isa"] = kernels::cpu_kernels().isa;
    j["bandwidth_gbs"] = median(bw);
    j["bandwidth_samples_gbs"] = bw;
    j["bandwidth_probe_bytes"] = probe.bytes();
    j["core_round_trip_ns"] = median(rt);
    j["core_round_trip_samples_ns"] = rt;
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf("bandwidth %.1f GB/s (median of %zu reads of %.2f GiB, %d threads) | isa %s\n", median(bw), bw.size(),
              probe.bytes() / double(1ull << 30), pool.size(), kernels::cpu_kernels().isa);
  if (pool.size() > 1)
    std::printf("core-to-core round trip %.0f ns (median of %zu probes): %s\n", median(rt), rt.size(),
                placement_words(median(rt)));
  return 0;
}

std::vector<int32_t> random_ids(int n, int vocab, std::mt19937_64& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  // Skip the low ids (special tokens in Gemma vocabularies); any id costs the same.
  for (auto& t : ids) t = static_cast<int32_t>(16 + rng() % static_cast<uint64_t>(std::max(1, vocab - 16)));
  return ids;
}

struct DecodeResult {
  int depth = 0;
  double ms_per_step = 0;   // one decode step (of --batch sequences)
  models::StepProfile prof;   // summed over all timed steps
  int64_t steps = 0;
  std::vector<double> bw;     // probes taken around this depth's bursts
  std::vector<double> rt;     // core-to-core round trips (HandoffProbe) at the same moments
  // Per burst: floor at the burst's bandwidth ÷ its median step; each class's GB/s ÷ that
  // bandwidth; attention + other as a share of the step.
  std::vector<double> efficiency, rest_share;
  std::vector<double> class_bw_fraction[models::kOpClassCount];
};

}  // namespace

CommandFn add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "prefill and decode speed, per-op breakdown, bandwidth floor");
  add_session_options(cmd, args->session, false);   // required unless --machine
  cmd->add_option("-p,--prompt", args->prompt, "prefill length in tokens")->capture_default_str();
  cmd->add_option("-n,--n-decode", args->n_decode, "timed decode steps per depth and repeat")->capture_default_str();
  cmd->add_option("--depths", args->depths, "comma-separated KV depths to decode at")->capture_default_str();
  cmd->add_option("--repeats", args->repeats, "repeats of every measurement")->capture_default_str();
  cmd->add_option("--burst", args->burst, "decode steps between two bandwidth probes")->capture_default_str();
  cmd->add_option("--batch", args->batch, "sequences decoded together in every decode step (each at the depth)")
      ->capture_default_str();
  cmd->add_option("--bandwidth-gib", args->bandwidth_gib, "size of the bandwidth probe's buffer")->capture_default_str();
  cmd->add_flag("--json", args->json, "print one JSON object instead of tables");
  cmd->add_flag("--machine", args->machine, "measure only the machine (bus bandwidth, core-to-core round trip); no model");
  return [args]() {
    if (args->bandwidth_gib < 0.0625) fail("--bandwidth-gib must be at least 0.0625");
    if (args->machine) return run_machine_probe(*args);
    if (args->session.model_path.empty()) fail("bench needs a model: -m FILE (or --machine)");
    const std::vector<int> depths = parse_depths(args->depths);
    if (args->prompt < 1 || args->n_decode < 1 || args->repeats < 1 || args->burst < 1 || args->batch < 1)
      fail("--prompt, --n-decode, --repeats, --burst and --batch must be >= 1");
    args->session.n_seqs = args->batch;
    const int max_depth = *std::max_element(depths.begin(), depths.end());
    args->session.ctx_size = std::max(args->prompt, max_depth + args->n_decode) + 1;
    ModelSession sess(args->session);
    if (!args->json) sess.print_summary();
    const models::StreamAccount acct = models::account_decode_stream(sess.file());
    const int V = sess.spec().n_vocab;
    std::mt19937_64 rng(1234);

    BandwidthProbe probe(sess.pool(), static_cast<uint64_t>(args->bandwidth_gib * (1ull << 30)));
    HandoffProbe handoff(sess.pool());
    std::vector<double> bw, rt;
    auto probe_bw = [&] {
      for (int i = 0; i < 3; ++i) bw.push_back(probe.measure());
      rt.push_back(handoff.measure());
    };
    probe.measure();   // warm-up
    probe_bw();

    std::vector<float> logits;
    // Warm-up: one short prefill and decode (first-touch of weights, thread spin-up).
    {
      const auto ids = random_ids(8, V, rng);
      sess.reset();
      sess.eval(ids, 0, models::LogitsWanted::kLast, logits);
      const int32_t one[1] = {ids[0]};
      sess.eval(one, 8, models::LogitsWanted::kLast, logits);
    }

    std::vector<double> prefill_s;
    for (int r = 0; r < args->repeats; ++r) {
      const auto ids = random_ids(args->prompt, V, rng);
      sess.reset();
      const auto t0 = clock_type::now();
      sess.eval(ids, 0, models::LogitsWanted::kLast, logits);
      prefill_s.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    probe_bw();

    std::vector<DecodeResult> dec;
    for (int depth : depths) {
      DecodeResult d;
      d.depth = depth;
      std::vector<double> step_ms;
      for (int r = 0; r < args->repeats; ++r) {
        sess.reset();
        const int B = args->batch;
        const auto ids = random_ids((depth + args->n_decode) * B, V, rng);   // sequence i: ids[i·(depth + n) ...]
        const auto seq_ids = [&](int i) { return ids.data() + static_cast<size_t>(i) * (depth + args->n_decode); };
        if (depth > 0)
          for (int i = 0; i < B; ++i)
            sess.eval({seq_ids(i), static_cast<size_t>(depth)}, 0, models::LogitsWanted::kLast, logits, i);
        std::vector<int32_t> step_ids(static_cast<size_t>(B));
        double bw_before = probe.measure();
        d.bw.push_back(bw_before);
        d.rt.push_back(handoff.measure());
        for (int i0 = 0; i0 < args->n_decode; i0 += args->burst) {
          const int i1 = std::min(args->n_decode, i0 + args->burst);
          models::StepProfile burst_prof;
          std::vector<double> burst_ms;
          sess.model().set_profile(&burst_prof);
          for (int i = i0; i < i1; ++i) {
            for (int q = 0; q < B; ++q) step_ids[static_cast<size_t>(q)] = seq_ids(q)[depth + i];
            const auto t0 = clock_type::now();
            sess.eval_each(step_ids, depth + i, logits);
            burst_ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
          }
          sess.model().set_profile(nullptr);
          const double bw_after = probe.measure();
          d.bw.push_back(bw_after);
          d.rt.push_back(handoff.measure());
          const double burst_bw = 0.5 * (bw_before + bw_after);
          bw_before = bw_after;
          const double ms = median(burst_ms);
          d.efficiency.push_back(static_cast<double>(acct.streamed_bytes) / (burst_bw * 1e9) * 1e3 / ms);
          const double n = static_cast<double>(i1 - i0);
          double profiled = 0;
          for (int c = 0; c < models::kOpClassCount; ++c) profiled += burst_prof.seconds[c];
          for (int c = 0; c < models::kOpClassCount; ++c) {
            const double sec = burst_prof.seconds[c] / n, bytes = static_cast<double>(burst_prof.bytes[c]) / n;
            d.class_bw_fraction[c].push_back(sec > 0 ? bytes / sec / 1e9 / burst_bw : 0.0);
            d.prof.seconds[c] += burst_prof.seconds[c];
            d.prof.bytes[c] += burst_prof.bytes[c];
          }
          d.prof.steps += burst_prof.steps;
          const double rest = burst_prof.seconds[static_cast<int>(models::OpClass::kAttention)] +
                              burst_prof.seconds[static_cast<int>(models::OpClass::kOther)];
          d.rest_share.push_back(profiled > 0 ? rest / profiled : 0.0);
          step_ms.insert(step_ms.end(), burst_ms.begin(), burst_ms.end());
        }
      }
      bw.insert(bw.end(), d.bw.begin(), d.bw.end());
      rt.insert(rt.end(), d.rt.begin(), d.rt.end());
      d.steps = static_cast<int64_t>(step_ms.size());
      d.ms_per_step = median(step_ms);
      dec.push_back(d);
    }

    const double bandwidth = median(bw);
    const double floor_ms = static_cast<double>(acct.streamed_bytes) / (bandwidth * 1e9) * 1e3;
    const double pre_s = median(prefill_s);
    nlohmann::json j;
    j["model"] = sess.spec().name;
    j["file"] = args->session.model_path;
    j["arch"] = sess.spec().arch;
    j["threads"] = sess.threads();
    j["isa"] = kernels::cpu_kernels().isa;
    j["kv_type"] = args->session.kv_type;
    j["bandwidth_gbs"] = bandwidth;
    j["bandwidth_samples_gbs"] = bw;
    j["bandwidth_probe_bytes"] = probe.bytes();
    j["core_round_trip_ns"] = median(rt);
    j["core_round_trip_samples_ns"] = rt;
    j["bytes_per_token"] = acct.streamed_bytes;
    j["floor_ms"] = floor_ms;
    j["prefill"] = {{"tokens", args->prompt}, {"ms", pre_s * 1e3}, {"tokens_per_s", args->prompt / pre_s},
                    {"samples_ms", [&] { std::vector<double> v; for (double s : prefill_s) v.push_back(s * 1e3); return v; }()}};
    j["decode"] = nlohmann::json::array();
    for (const DecodeResult& d : dec) {
      nlohmann::json classes;
      double named = 0;
      for (int c = 0; c < models::kOpClassCount; ++c) {
        const double ms = d.prof.seconds[c] * 1e3 / static_cast<double>(d.steps);
        const double bytes = static_cast<double>(d.prof.bytes[c]) / static_cast<double>(d.steps);
        classes[models::op_class_name(static_cast<models::OpClass>(c))] = {
            {"ms", ms}, {"bytes", bytes}, {"gbs", ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0},
            {"bw_fraction", median(d.class_bw_fraction[c])}};
        named += ms;
      }
      const double dbw = median(d.bw);
      const double dfloor = static_cast<double>(acct.streamed_bytes) / (dbw * 1e9) * 1e3;
      j["decode"].push_back({{"depth", d.depth},
                             {"batch", args->batch},
                             {"ms_per_step", d.ms_per_step},
                             {"ms_per_token", d.ms_per_step / args->batch},
                             {"tokens_per_s", args->batch * 1e3 / d.ms_per_step},
                             {"bandwidth_gbs", dbw},
                             {"core_round_trip_ns", median(d.rt)},
                             {"floor_ms", dfloor},
                             {"efficiency", median(d.efficiency)},
                             {"efficiency_bursts", d.efficiency},
                             {"attention_other_share", median(d.rest_share)},
                             {"profiled_ms_per_step", named},
                             {"steps", d.steps},
                             {"classes", classes}});
    }
    if (args->json) {
      std::printf("%s\n", j.dump(1).c_str());
      return 0;
    }
    std::printf("\nbandwidth %.1f GB/s (median of %zu reads of %.2f GiB, %d threads) | %.1f MB per decoded token | floor %.2f ms/token | isa %s\n",
                bandwidth, bw.size(), probe.bytes() / double(1ull << 30), sess.threads(), acct.streamed_bytes / 1e6, floor_ms,
                kernels::cpu_kernels().isa);
    if (sess.threads() > 1) {
      const auto [lo, hi] = std::minmax_element(rt.begin(), rt.end());
      std::printf("core-to-core round trip %.0f ns (median of %zu probes, %.0f-%.0f): %s\n", median(rt), rt.size(), *lo, *hi,
                  placement_words(median(rt)));
    }
    std::printf("prefill %d tokens: %.1f ms, %.1f tokens/s\n", args->prompt, pre_s * 1e3, args->prompt / pre_s);
    for (const auto& d : j["decode"]) {
      if (args->batch > 1)
        std::printf("\nbatch of %d sequences: %.1f tokens/s in all", args->batch, d["tokens_per_s"].get<double>());
      std::printf("\ndecode at depth %d: %.2f ms/step | bandwidth around it %.1f GB/s, core round trip %.0f ns, floor %.2f ms | "
                  "efficiency %.0f%% (median of %zu bursts) | attention + other %.1f%% of a step\n",
                  d["depth"].get<int>(), d["ms_per_step"].get<double>(), d["bandwidth_gbs"].get<double>(),
                  d["core_round_trip_ns"].get<double>(),
                  d["floor_ms"].get<double>(), 100 * d["efficiency"].get<double>(), d["efficiency_bursts"].size(),
                  100 * d["attention_other_share"].get<double>());
      std::printf("  %-12s %9s %10s %8s %10s\n", "op class", "ms/step", "MB/step", "GB/s", "of bw");
      for (int c = 0; c < models::kOpClassCount; ++c) {
        const auto& e = d["classes"][models::op_class_name(static_cast<models::OpClass>(c))];
        std::printf("  %-12s %9.3f %10.1f %8.1f %9.0f%%\n", models::op_class_name(static_cast<models::OpClass>(c)),
                    e["ms"].get<double>(), e["bytes"].get<double>() / 1e6, e["gbs"].get<double>(),
                    100 * e["bw_fraction"].get<double>());
      }
    }
    return 0;
  };
}

}  // namespace sluice::app
