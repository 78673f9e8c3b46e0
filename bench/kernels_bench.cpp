// Kernel micro-benchmarks (Google Benchmark), per ISA set this CPU runs:
//   * Linear/<format>/<isa>/M:  y[M × rows] = x[M × cols]·Wᵀ over repacked weights, one
//     dispatch on the engine's thread pool (2 threads), E2B shapes; reports GB/s of weight
//     bytes streamed. "dram" working sets cycle through copies larger than the last-level
//     cache, as decode does (every layer's weights are read once per token).
//   * LinearCore/<isa>/<format>/l2_1536x<rows>/M: one core, an L2-resident matrix, per ISA set:
//     the kernels' compute speed (e.g. the Q6_K decode kernel's GFNI unpack, the BF16 decode
//     kernel's FMA chains).
//   * Glu/q4_0/hot_1536x2x6144/M: the fused gate|up matmul with its GELU product, hot.
//   * ActQuantize/<isa>/<format>/6144: one activation row quantized for the packed matmuls.
//   * Attention/<isa>/hd/depth/{hot,cold}: one decode token's paged GQA attention (8 query
//     heads on one KV head, f16 cache), all heads on one thread; cold: the KV starts in DRAM.
//   * Peak/<instruction>: one core's multiply-accumulate rate for the instruction the kernels
//     are built on (f32 FMA for attention, VPDPBUSD for the int8 tiles, VDPBF16PS for scale),
//     12 independent accumulators, no memory: the ceiling a compute-bound kernel is held to.
// Build: cmake -DSLUICE_BUILD_BENCH=ON; run build/bench/kernels_bench [--benchmark_filter=...].
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/cpu_kernels.h"
#include "kernels/linear.h"
#include "quant/quant.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"

namespace sluice::kernels {
namespace {

ThreadPool& pool() {
  static ThreadPool p(ThreadPool::default_threads());
  return p;
}

// Random blocks of type t with finite, realistic scales: [cols × rows] raw file rows.
std::vector<uint8_t> random_rows(DType t, int64_t cols, int64_t rows, uint64_t seed) {
  const uint64_t rb = dtype_row_bytes(t, static_cast<uint64_t>(cols));
  std::vector<uint8_t> d(rb * static_cast<uint64_t>(rows));
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 8 <= d.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(d.data() + i, &v, 8);
  }
  // Make every f16/bf16 value or scale finite and small: quantize random floats where we can.
  if (quant::can_quantize(t) && t != DType::Q6_K) {
    std::normal_distribution<float> n(0.0f, 0.03f);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : row) x = n(rng);
      quant::quantize_ref(t, row.data(), d.data() + static_cast<uint64_t>(r) * rb, cols);
    }
  } else if (t == DType::Q6_K) {
    for (size_t b = 0; b < d.size() / 210; ++b) {
      const uint16_t h = f32_to_f16(1e-3f);
      std::memcpy(d.data() + 210 * b + 208, &h, 2);
    }
  }
  return d;
}

struct LinearSet {
  std::vector<std::vector<uint8_t>> raw;
  std::vector<Linear> lin;
  uint64_t bytes_each = 0;
};

// `copies` matrices of the shape, enough to exceed the LLC when copies > 1.
const LinearSet& linears(DType t, int64_t cols, int64_t rows, int copies, bool wide) {
  static std::vector<std::pair<std::string, std::unique_ptr<LinearSet>>> cache;
  const std::string key = std::string(dtype_name(t)) + std::to_string(cols) + "x" + std::to_string(rows) + "c" +
                          std::to_string(copies) + (wide ? "w" : "");
  for (auto& [k, v] : cache)
    if (k == key) return *v;
  auto s = std::make_unique<LinearSet>();
  for (int c = 0; c < copies; ++c) {
    s->raw.push_back(random_rows(t, cols, rows, 7 + c));
    Mat m{"bench", t, s->raw.back().data(), cols, rows, dtype_row_bytes(t, static_cast<uint64_t>(cols))};
    s->lin.push_back(Linear::build({&m, 1}, pool(), "bench", wide));
    s->raw.back() = {};  // the repacked copy is what is read
  }
  s->bytes_each = s->lin[0].stream_bytes();
  cache.emplace_back(key, std::move(s));
  return *cache.back().second;
}

// hot: one copy, re-read every iteration (it stays in the last-level cache): the kernel's
// compute speed with memory out of the way. The workers spin between calls, as inside a
// decode step (ThreadPool::StepScope), so a call's time includes no wake-up.
// Softcap (the final logit op): kNone; kFused, as a Linear Epilogue; kPass, a second pass over
// the outputs after the call, split over the threads.
enum class Softcap { kNone, kFused, kPass };
void BM_Linear(benchmark::State& st, DType t, int64_t cols, int64_t rows, int64_t m, bool hot = false,
               bool wide = false, Softcap cap = Softcap::kNone) {
  const uint64_t one = dtype_row_bytes(t, static_cast<uint64_t>(cols)) * static_cast<uint64_t>(rows);
  const int copies = hot ? 1 : static_cast<int>(std::max<uint64_t>(1, (uint64_t{1} << 30) / one + 1));
  const LinearSet& s = linears(t, cols, rows, copies, wide);
  std::vector<float> x(static_cast<size_t>(m * cols)), y(static_cast<size_t>(m * rows));
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& v : x) v = n(rng);
  ActScratch scratch;
  size_t i = 0;
  const Epilogue post{cpu_ops().softcap, 30.0f};
  ThreadPool::StepScope spin(pool());
  for (auto _ : st) {
    s.lin[i].run(pool(), x.data(), m, y.data(), scratch, nullptr, cap == Softcap::kFused ? &post : nullptr);
    if (cap == Softcap::kPass)
      pool().run([&](int ith, int nth) {
        for (int64_t r = 0; r < m; ++r) {
          int64_t c0, c1;
          split_range((rows + 63) / 64, ith, nth, &c0, &c1);
          if (c0 < c1) post.fn(y.data() + r * rows + c0 * 64, std::min(rows, c1 * 64) - c0 * 64, post.arg);
        }
      });
    i = (i + 1) % s.lin.size();
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * s.bytes_each));
  st.counters["MACs/s"] = benchmark::Counter(static_cast<double>(st.iterations()) * m * cols * rows,
                                             benchmark::Counter::kIsRate);
}

// One core's compute speed per ISA set: a 1536 × rows matrix, L2-resident (Q4_0 / Q6_K
// 384 rows: ~330-480 KB; BF16 256 rows: 768 KB), run on a one-thread pool, the set passed
// explicitly, so the sets compare in the same run.
void BM_LinearCore(benchmark::State& st, const CpuKernels* k, DType t, int64_t rows, int64_t m, int64_t cols = 1536) {
  static ThreadPool one(1);
  const Linear& lin = linears(t, cols, rows, 1, false).lin[0];
  std::vector<float> x(static_cast<size_t>(m * cols)), y(static_cast<size_t>(m * rows));
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& v : x) v = n(rng);
  ActScratch scratch;
  for (auto _ : st) {
    lin.run(one, x.data(), m, y.data(), scratch, k);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * lin.stream_bytes()));
  st.counters["MACs/s"] = benchmark::Counter(static_cast<double>(st.iterations()) * m * cols * rows,
                                             benchmark::Counter::kIsRate);
}

// One decode token: 8 heads on one KV head, f16 cache of `depth` positions in 16-slot blocks.
void BM_Attention(benchmark::State& st, const CpuKernels* k, int hd, int depth, bool cold) {
  const int gs = 8, bt = 16;
  const int64_t nb = (depth + bt - 1) / bt;
  const uint64_t slot = 2 * static_cast<uint64_t>(hd), block = 2 * slot * bt;
  std::vector<uint8_t> mem(block * static_cast<uint64_t>(nb));
  std::mt19937 rng(5);
  for (size_t i = 0; i + 2 <= mem.size(); i += 2) {
    const uint16_t h = f32_to_f16(static_cast<float>(rng() % 2001) / 1000.0f - 1.0f);
    std::memcpy(mem.data() + i, &h, 2);
  }
  std::vector<int32_t> table(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) table[b] = static_cast<int32_t>(b);
  std::vector<float> q(static_cast<size_t>(gs * hd), 0.05f), out(static_cast<size_t>(gs * hd));
  std::vector<float> scratch(attn_scratch_floats());
  AttnArgs a;
  a.q = q.data();
  a.out = out.data();
  a.gs = gs;
  a.hd = hd;
  a.base = mem.data();
  a.block_stride = block;
  a.k_off = 0;
  a.v_off = slot * bt;
  a.slot_stride = slot;
  a.table = table.data();
  a.block_tokens = bt;
  a.elem = KvElem::kF16;
  a.lo = 0;
  a.hi = depth - 1;
  a.scratch = scratch.data();
  const AttnKernel f = cpu_attention(*k);
  // cold: the KV rows start in DRAM, as in a decode step (every weight of the model passed
  // through the caches since the layer last ran): 64 MiB are read between calls, untimed.
  std::vector<uint8_t> flush(cold ? size_t{64} << 20 : 0, 1);
  for (auto _ : st) {
    if (cold) {
      st.PauseTiming();
      benchmark::DoNotOptimize(cpu_stream_sum(*k, flush.data(), flush.size()));
      st.ResumeTiming();
    }
    f(a);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * depth * 2 * static_cast<int64_t>(slot));
}

// The fused gate|up matmul with its GELU product (Linear::run_glu), hot (one copy, in the
// last-level cache): the matmul tiles plus the GELU of m × ff values.
void BM_Glu(benchmark::State& st, int64_t cols, int64_t ff, int64_t m) {
  static std::vector<std::pair<int64_t, std::unique_ptr<std::pair<std::vector<uint8_t>, Linear>>>> cache;
  Linear* lin = nullptr;
  for (auto& [k, v] : cache)
    if (k == cols * 1000000 + ff) lin = &v->second;
  if (!lin) {
    auto e = std::make_unique<std::pair<std::vector<uint8_t>, Linear>>();
    e->first = random_rows(DType::Q4_0, cols, 2 * ff, 13);
    const uint64_t rb = dtype_row_bytes(DType::Q4_0, static_cast<uint64_t>(cols));
    Mat gate{"gate", DType::Q4_0, e->first.data(), cols, ff, rb};
    Mat up{"up", DType::Q4_0, e->first.data() + rb * static_cast<uint64_t>(ff), cols, ff, rb};
    e->second = Linear::build_glu(gate, up, pool(), "bench_glu");
    cache.emplace_back(cols * 1000000 + ff, std::move(e));
    lin = &cache.back().second->second;
  }
  std::vector<float> x(static_cast<size_t>(m * cols)), act(static_cast<size_t>(m * ff));
  std::mt19937 rng(4);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& v : x) v = n(rng);
  ActScratch scratch;
  ThreadPool::StepScope spin(pool());  // as BM_Linear: workers spin between calls
  for (auto _ : st) {
    lin->run_glu(pool(), x.data(), m, act.data(), scratch);
    benchmark::DoNotOptimize(act.data());
  }
  st.counters["MACs/s"] = benchmark::Counter(static_cast<double>(st.iterations()) * m * cols * 2 * ff,
                                             benchmark::Counter::kIsRate);
}

// One activation row quantized for the packed matmuls (act.h), one thread: decode does this
// once per matmul per row (every thread its own copy), batched steps split the rows.
void BM_ActQuantize(benchmark::State& st, const CpuKernels* k, ActFormat f, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> out(act_row_stride(f, n));
  for (auto _ : st) {
    cpu_quantize_act(*k, f, x.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations()) * n);
}

// `body(n)` runs n iterations of 12 independent instructions of `macs_per_instr` MACs each.
template <typename Body>
void BM_Peak(benchmark::State& st, Body body, double macs_per_instr) {
  constexpr int64_t kIters = 1 << 16;
  for (auto _ : st) benchmark::DoNotOptimize(body(kIters));
  st.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(st.iterations()) * kIters * 12 * macs_per_instr / 1e9,
                                             benchmark::Counter::kIsRate);
}

// 12 independent chains of OP (distinct starting values, or the compiler merges identical
// chains into one), then their sum through ADD so none is dead code.
#define SLUICE_PEAK_LOOP(T, INIT, OP, ADD)                                                                          \
  T a0 = INIT(0), a1 = INIT(1), a2 = INIT(2), a3 = INIT(3), a4 = INIT(4), a5 = INIT(5), a6 = INIT(6), a7 = INIT(7), \
    a8 = INIT(8), a9 = INIT(9), a10 = INIT(10), a11 = INIT(11);                                                     \
  for (int64_t i = 0; i < n; ++i) {                                                                                 \
    a0 = OP(a0);                                                                                                    \
    a1 = OP(a1);                                                                                                    \
    a2 = OP(a2);                                                                                                    \
    a3 = OP(a3);                                                                                                    \
    a4 = OP(a4);                                                                                                    \
    a5 = OP(a5);                                                                                                    \
    a6 = OP(a6);                                                                                                    \
    a7 = OP(a7);                                                                                                    \
    a8 = OP(a8);                                                                                                    \
    a9 = OP(a9);                                                                                                    \
    a10 = OP(a10);                                                                                                  \
    a11 = OP(a11);                                                                                                  \
    __asm__ volatile("" : "+v"(x), "+v"(y)); /* opaque operands: nothing hoisted or folded */                       \
  }                                                                                                                 \
  const T sum = ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))), ADD(ADD(a8, a9), ADD(a10, a11)));

__attribute__((target("avx512f"))) float peak_fma_f32(int64_t n) {
  __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
#define OP(a) _mm512_fmadd_ps(x, y, a)
  SLUICE_PEAK_LOOP(__m512, _mm512_set1_ps, OP, _mm512_add_ps)
#undef OP
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx512f,avx512vnni"))) int peak_vnni(int64_t n) {
  __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(5);
#define OP(a) _mm512_dpbusd_epi32(a, x, y)
  SLUICE_PEAK_LOOP(__m512i, _mm512_set1_epi32, OP, _mm512_add_epi32)
#undef OP
  return _mm512_reduce_add_epi32(sum);
}

__attribute__((target("avx512f,avx512bf16"))) float peak_dpbf16(int64_t n) {
  __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = x;
#define OP(a) _mm512_dpbf16_ps(a, x, y)
  SLUICE_PEAK_LOOP(__m512, _mm512_set1_ps, OP, _mm512_add_ps)
#undef OP
  return _mm512_reduce_add_ps(sum);
}
#undef SLUICE_PEAK_LOOP

int register_all() {
  struct Shape {
    const char* name;
    DType t;
    int64_t cols, rows;
  };
  const Shape shapes[] = {
      {"q4_0/gate_up_1536x12288", DType::Q4_0, 1536, 12288}, {"q4_0/down_6144x1536", DType::Q4_0, 6144, 1536},
      {"q4_0/q_1536x2048", DType::Q4_0, 1536, 2048},         {"q4_0/ple_gate_1536x256", DType::Q4_0, 1536, 256},
      {"q4_0/ple_proj_256x1536", DType::Q4_0, 256, 1536},    {"q6_K/lm_head_1536x262144", DType::Q6_K, 1536, 262144},
      {"q8_0/lm_head_640x262144", DType::Q8_0, 640, 262144}, {"q5_0/gate_up_640x4096", DType::Q5_0, 640, 4096},
      {"bf16/ple_proj_1536x8960", DType::BF16, 1536, 8960},
  };
  for (const Shape& s : shapes)
    for (int64_t m : {1, 4, 8, 64})
      benchmark::RegisterBenchmark((std::string("Linear/") + s.name + "/M" + std::to_string(m)).c_str(),
                                   [=](benchmark::State& st) { BM_Linear(st, s.t, s.cols, s.rows, m); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  for (int64_t m : {1, 8})
    benchmark::RegisterBenchmark(
        (std::string("Linear/q6_K8/lm_head_1536x262144/M") + std::to_string(m)).c_str(),
        [=](benchmark::State& st) { BM_Linear(st, DType::Q6_K, 1536, 262144, m, false, true); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  // The logit softcap fused into the lm_head call against a pass after it, streaming and hot.
  for (bool hot : {false, true})
    for (int64_t m : {1, 8})
      for (Softcap c : {Softcap::kFused, Softcap::kPass})
        benchmark::RegisterBenchmark(
            (std::string("Linear/q6_K/") + (hot ? "hot_1536x8192" : "lm_head_1536x262144") + "/softcap_" +
             (c == Softcap::kFused ? "fused" : "pass") + "/M" + std::to_string(m))
                .c_str(),
            [=](benchmark::State& st) { BM_Linear(st, DType::Q6_K, 1536, hot ? 8192 : 262144, m, hot, false, c); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
  const Shape hot_shapes[] = {{"q6_K/hot_1536x8192", DType::Q6_K, 1536, 8192},
                              {"q4_0/hot_1536x8192", DType::Q4_0, 1536, 8192},
                              {"q4_0/hot_ple_gate_1536x256", DType::Q4_0, 1536, 256},
                              {"q4_0/hot_ple_proj_256x1536", DType::Q4_0, 256, 1536}};
  for (const Shape& s : hot_shapes)
    for (int64_t m : {1, 8})
      benchmark::RegisterBenchmark((std::string("Linear/") + s.name + "/M" + std::to_string(m)).c_str(),
                                   [=](benchmark::State& st) { BM_Linear(st, s.t, s.cols, s.rows, m, true); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  // The vision tower's F16 matmuls over one 280-token image's 2520 patches (E2B shapes, the
  // weights hot: a few MB each, reused by every patch; bench/encoder_bench.py times the tower).
  const Shape vit_shapes[] = {{"f16/vit_qkvo_768x768", DType::F16, 768, 768},
                              {"f16/vit_up_768x3072", DType::F16, 768, 3072},
                              {"f16/vit_down_3072x768", DType::F16, 3072, 768}};
  // A prefill chunk through the BF16 per-layer projection (27.5 MB): rows past 1 MiB of f32,
  // so split by row blocks that each stream the whole matrix (linear.cpp kRowSplitBytes).
  benchmark::RegisterBenchmark("Linear/bf16/ple_proj_1536x8960/M512",
                               [](benchmark::State& st) { BM_Linear(st, DType::BF16, 1536, 8960, 512); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (const Shape& s : vit_shapes)
    benchmark::RegisterBenchmark((std::string("Linear/") + s.name + "/M2520").c_str(),
                                 [=](benchmark::State& st) { BM_Linear(st, s.t, s.cols, s.rows, 2520, true); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  for (const CpuKernels* k : runnable_cpu_kernels())
    for (DType t : {DType::Q6_K, DType::Q4_0, DType::BF16})
      for (int64_t m : {1, 4, 8}) {
        const int64_t rows = t == DType::BF16 ? 256 : 384;
        benchmark::RegisterBenchmark((std::string("LinearCore/") + k->isa + "/" + std::string(dtype_name(t)) +
                                      "/l2_1536x" + std::to_string(rows) + "/M" + std::to_string(m))
                                         .c_str(),
                                     [=](benchmark::State& st) { BM_LinearCore(st, k, t, rows, m); })
            ->Unit(benchmark::kMicrosecond);
      }
  // The float prefill tile's compute speed: one core, the vision tower's F16 768 × 768, 120 rows.
  for (const CpuKernels* k : runnable_cpu_kernels())
    benchmark::RegisterBenchmark((std::string("LinearCore/") + k->isa + "/f16/vit_768x768/M120").c_str(),
                                 [=](benchmark::State& st) { BM_LinearCore(st, k, DType::F16, 768, 120, 768); })
        ->Unit(benchmark::kMicrosecond);
  for (int64_t m : {1, 8})
    benchmark::RegisterBenchmark((std::string("Glu/q4_0/hot_1536x2x6144/M") + std::to_string(m)).c_str(),
                                 [=](benchmark::State& st) { BM_Glu(st, 1536, 6144, m); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  for (const CpuKernels* k : runnable_cpu_kernels())
    for (ActFormat f : {ActFormat::kA8_32, ActFormat::kA8_256})
      benchmark::RegisterBenchmark(
          (std::string("ActQuantize/") + k->isa + (f == ActFormat::kA8_32 ? "/a8_32" : "/a8_256") + "/6144").c_str(),
          [=](benchmark::State& st) { BM_ActQuantize(st, k, f, 6144); })
          ->Unit(benchmark::kMicrosecond);
  for (const CpuKernels* k : runnable_cpu_kernels())
    for (int hd : {256, 512})
      for (int depth : {64, 512})
        for (bool cold : {false, true})
          benchmark::RegisterBenchmark((std::string("Attention/") + k->isa + "/hd" + std::to_string(hd) + "/depth" +
                                        std::to_string(depth) + (cold ? "/cold" : "/hot"))
                                           .c_str(),
                                       [=](benchmark::State& st) { BM_Attention(st, k, hd, depth, cold); })
              ->Unit(benchmark::kMicrosecond);
  if (__builtin_cpu_supports("avx512f"))
    benchmark::RegisterBenchmark("Peak/vfmadd231ps_zmm", [](benchmark::State& st) { BM_Peak(st, peak_fma_f32, 16); });
  if (__builtin_cpu_supports("avx512vnni"))
    benchmark::RegisterBenchmark("Peak/vpdpbusd_zmm", [](benchmark::State& st) { BM_Peak(st, peak_vnni, 64); });
  if (__builtin_cpu_supports("avx512bf16"))
    benchmark::RegisterBenchmark("Peak/vdpbf16ps_zmm", [](benchmark::State& st) { BM_Peak(st, peak_dpbf16, 32); });
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace sluice::kernels

BENCHMARK_MAIN();
