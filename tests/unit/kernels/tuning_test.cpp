// kernels/tuning.h: the streaming parameters change the order of reads and the prefetches,
// never a result. Linear::run (with and without an epilogue), run_glu with its quantized
// output and run_quantized give the same bits under every parameter set as under the defaults,
// for every runnable ISA set, decode (M 1) and a small batch, on 1-3 threads. Out-of-range
// values are rejected.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cpu_kernels.h"
#include "kernels/linear.h"
#include "kernels/tuning.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"
#include "unit/kernels/kernels_test_util.h"

namespace sluice::kernels {
namespace {

using testing::activations;
using testing::make_weights;
using testing::Weights;

// Restores the defaults however a test ends.
struct TuningGuard {
  ~TuningGuard() { set_tuning(Tuning{}); }
};

std::vector<Tuning> parameter_sets() {
  std::vector<Tuning> sets;
  Tuning t;
  t.streams = 2;
  sets.push_back(t);
  t.streams = 3;
  t.interleave = 4;
  t.split_div = 1;
  sets.push_back(t);
  t = Tuning{};
  t.streams = 4;
  t.interleave = 2;
  t.act_ahead = 0;
  t.split_div = 64;
  for (int& w : t.weight_ahead) w = 4096;
  sets.push_back(t);
  t = Tuning{};
  t.act_ahead = 32;
  for (int& w : t.weight_ahead) w = 64;
  sets.push_back(t);
  return sets;
}

// Every output of the calls under test, in one vector.
std::vector<float> outputs(const std::vector<const Linear*>& mats, const Linear& glu, const Linear& down,
                           ThreadPool& pool, const CpuKernels* isa, int64_t m, const std::vector<float>& x,
                           const std::vector<float>& xff) {
  std::vector<float> all;
  ActScratch scratch;
  const Epilogue post{[](float* y, int64_t n, float a) {
                        for (int64_t i = 0; i < n; ++i) y[i] = y[i] * a + 1.0f;
                      },
                      0.5f};
  for (const Linear* l : mats)
    for (const Epilogue* e : {static_cast<const Epilogue*>(nullptr), &post}) {
      std::vector<float> y(static_cast<size_t>(m * l->rows()), -1.0f);
      l->run(pool, x.data(), m, y.data(), scratch, isa, e);
      all.insert(all.end(), y.begin(), y.end());
    }
  const int64_t ff = down.cols();
  const uint64_t stride = act_row_stride(ActFormat::kA8_32, ff);
  std::vector<uint8_t> qbuf(static_cast<size_t>(m) * stride);
  const ActRows q{ActFormat::kA8_32, qbuf.data(), stride, ff};
  std::vector<float> act(static_cast<size_t>(m * ff), -1.0f), y(static_cast<size_t>(m * down.rows()), -1.0f);
  glu.run_glu(pool, xff.data(), m, act.data(), scratch, isa, &q);
  down.run_quantized(pool, q, m, y.data(), scratch, isa);
  all.insert(all.end(), act.begin(), act.end());
  all.insert(all.end(), y.begin(), y.end());
  return all;
}

TEST(Tuning, ResultsAreBitIdenticalUnderEveryParameterSet) {
  TuningGuard guard;
  const int64_t cols = 512, rows = 16 * 41 + 5;  // 42 groups: several per thread and stream
  ThreadPool one(1), two(2), three(3);
  std::vector<Weights> ws;
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q6_K, DType::Q4_K, DType::BF16, DType::Q4_1})
    ws.push_back(make_weights(t, rows, 10 + static_cast<uint64_t>(t), cols));
  std::vector<Linear> lins;
  for (const Weights& w : ws) lins.push_back(Linear::build({&w.mat, 1}, two, "w"));
  std::vector<const Linear*> mats;
  for (const Linear& l : lins) mats.push_back(&l);
  const int64_t ff = 16 * 38;  // 19 blocks of 32: an odd count of unit pairs
  const Weights gate = make_weights(DType::Q4_0, ff, 100, cols), up = make_weights(DType::Q4_0, ff, 300, cols);
  const Weights down_w = make_weights(DType::Q4_0, 40, 500, ff);
  const Linear glu = Linear::build_glu(gate.mat, up.mat, two, "gate_up");
  const Linear down = Linear::build({&down_w.mat, 1}, two, "down");
  const std::vector<float> x = activations(3, 42, cols);
  for (const CpuKernels* isa : runnable_cpu_kernels())
    for (ThreadPool* pool : {&one, &two, &three})
      for (int64_t m : {1, 3}) {
        set_tuning(Tuning{});
        const std::vector<float> want = outputs(mats, glu, down, *pool, isa, m, x, x);
        for (const Tuning& t : parameter_sets()) {
          set_tuning(t);
          const std::vector<float> got = outputs(mats, glu, down, *pool, isa, m, x, x);
          ASSERT_EQ(got.size(), want.size());
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
              << isa->isa << " threads " << pool->size() << " M " << m << " " << describe_tuning(t);
        }
      }
}

TEST(Tuning, OutOfRangeValuesAreRejected) {
  TuningGuard guard;
  EXPECT_TRUE(tuning_error(Tuning{}).empty());
  Tuning t;
  t.streams = 0;
  EXPECT_NE(tuning_error(t).find("streams"), std::string::npos);
  EXPECT_THROW(set_tuning(t), Error);
  t = Tuning{};
  t.weight_ahead[static_cast<int>(PackedFormat::kQ4_0)] = 100;  // not a whole line
  EXPECT_NE(tuning_error(t).find("q4_0"), std::string::npos);
  t = Tuning{};
  t.split_div = kMaxSplitDiv + 1;
  EXPECT_THROW(set_tuning(t), Error);
  EXPECT_EQ(tuning(), Tuning{});  // a rejected set leaves the current one
}

}  // namespace
}  // namespace sluice::kernels
