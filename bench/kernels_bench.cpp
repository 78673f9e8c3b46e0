// Decode-shaped matmul throughput: y[1 × rows] = x[1 × cols] · Wᵀ with Q4_0 weights in
// llama.cpp's scheme (activations quantized to Q8_0 once, then one dot per weight row), per ISA
// set (kernels/cpu_kernels.h) and thread count. Reports GB/s of WEIGHT bytes streamed.
//
//   kernels_bench --benchmark_filter=Q4_0        (SLUICE_ISA does not matter here: every
//                                                  runnable set is benchmarked by name)
// Two working sets: "hot" reuses one [cols × rows] matrix (it stays in the last-level cache on
// big-L3 machines), "dram" cycles through enough copies to exceed the LLC, which is what
// decode does (each layer's weights are read once per token).
#include <benchmark/benchmark.h>

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
#include "kernels/cpu_kernels.h"
#include "kernels/dot_ref.h"
#include "kernels/ops.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"

namespace sluice::kernels {
namespace {

constexpr int64_t kCols = 1536, kRows = 6144;   // Gemma-3-1B-ish FFN up/gate shape
constexpr int64_t kDramBytes = int64_t{1} << 30;  // > a 480 MiB L3

struct WeightSet {
  std::vector<uint8_t> data;
  std::vector<Mat> mats;
};

// Random Q4_0 blocks with realistic f16 scales, `copies` matrices back to back.
const WeightSet& weights(int copies) {
  static std::vector<std::unique_ptr<WeightSet>> cache(2);
  auto& slot = cache[copies > 1 ? 1 : 0];
  if (slot) return *slot;
  slot = std::make_unique<WeightSet>();
  const uint64_t row_bytes = dtype_row_bytes(DType::Q4_0, kCols);
  const uint64_t mat_bytes = row_bytes * kRows;
  slot->data.resize(mat_bytes * copies);
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < slot->data.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(slot->data.data() + i, &v, std::min<size_t>(8, slot->data.size() - i));
  }
  for (size_t b = 0; b < slot->data.size() / 18; ++b) {
    const uint16_t d = f32_to_f16(std::ldexp(1.0f, -7 - static_cast<int>(b % 4)));
    std::memcpy(slot->data.data() + 18 * b, &d, 2);
  }
  for (int c = 0; c < copies; ++c) {
    Mat m;
    m.type = DType::Q4_0;
    m.cols = kCols;
    m.rows = kRows;
    m.row_bytes = row_bytes;
    m.data = slot->data.data() + mat_bytes * c;
    slot->mats.push_back(m);
  }
  return *slot;
}

// matmul_act_quant for M = 1 with an explicit ISA set (matmul_act_quant itself always uses
// cpu_kernels()): quantize once, then rows split across the pool as ops_ref.cpp does.
void matvec(ThreadPool& pool, const CpuKernels& k, const Mat& w, const float* x, uint8_t* act, float* y) {
  quantize_act_row(w.type, x, act, w.cols);
  const DotKernel f = k.dot[static_cast<uint32_t>(w.type)];
  pool.run([&](int ith, int nth) {
    const int64_t r0 = w.rows * ith / nth, r1 = w.rows * (ith + 1) / nth;
    for (int64_t r = r0; r < r1; ++r)
      y[r] = f ? f(w.row(r), act, w.cols) : dot_ref(w.type, w.row(r), act, w.cols);
  });
}

void BM_Q4_0_matvec(benchmark::State& state, const CpuKernels* k, int threads, bool dram) {
  const int copies = dram ? static_cast<int>(kDramBytes / (dtype_row_bytes(DType::Q4_0, kCols) * kRows)) + 1 : 1;
  const WeightSet& ws = weights(copies);
  ThreadPool pool(threads);
  std::vector<float> x(kCols), y(kRows);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> act(act_row_bytes(DType::Q4_0, kCols));
  size_t next = 0;
  for (auto _ : state) {
    matvec(pool, *k, ws.mats[next], x.data(), act.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    next = (next + 1) % ws.mats.size();
  }
  const double bytes = static_cast<double>(ws.mats[0].row_bytes) * kRows;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * static_cast<double>(state.iterations())));
  state.counters["GB/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

// The real entry point (whatever cpu_kernels() chose), DRAM working set.
void BM_Q4_0_matmul_act_quant(benchmark::State& state, int threads) {
  const WeightSet& ws = weights(static_cast<int>(kDramBytes / (dtype_row_bytes(DType::Q4_0, kCols) * kRows)) + 1);
  ThreadPool pool(threads);
  std::vector<float> x(kCols, 0.5f), y(kRows);
  size_t next = 0;
  for (auto _ : state) {
    matmul_act_quant(pool, ws.mats[next], x.data(), 1, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    next = (next + 1) % ws.mats.size();
  }
  const double bytes = static_cast<double>(ws.mats[0].row_bytes) * kRows;
  state.counters["GB/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
  state.SetLabel(cpu_kernels().isa);
}

int register_all() {
  for (const CpuKernels* k : runnable_cpu_kernels())
    for (bool dram : {false, true})
      for (int threads : {1, 2}) {
        const std::string name = std::string("Q4_0_matvec_1536x6144/") + k->isa + (dram ? "/dram" : "/hot") +
                                 "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_Q4_0_matvec, k, threads, dram)->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
  for (int threads : {1, 2}) {
    const std::string name = "Q4_0_matmul_act_quant_1536x6144/dram/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(name.c_str(), BM_Q4_0_matmul_act_quant, threads)->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
  return 0;
}
const int kRegistered = register_all();

}  // namespace
}  // namespace sluice::kernels

BENCHMARK_MAIN();
