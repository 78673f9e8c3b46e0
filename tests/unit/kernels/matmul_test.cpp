// kernels::matmul_act_quant: every element is dot_ref of its weight row and its quantized activation
// row (dot for F32 weights), and the result does not depend on the batch size or the thread
// count, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "kernels/dot_ref.h"
#include "kernels/ops.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"
#include "unit/kernels/kernels_test_util.h"
#include "unit/quant/quant_test_util.h"

namespace sluice::kernels {
namespace {

constexpr int64_t kRows = 37;   // not a multiple of the thread count
constexpr int64_t kCols = 512;  // two K-quant super-blocks

struct Weights {
  std::vector<uint8_t> data;
  Mat mat;
};

Weights make_weights(DType t, uint64_t seed) {
  Weights w;
  for (int64_t r = 0; r < kRows; ++r) {
    const auto row = testing::weight_row(t, kCols, seed + static_cast<uint64_t>(r), /*sane=*/true);
    w.data.insert(w.data.end(), row.begin(), row.end());
  }
  w.mat.type = t;
  w.mat.cols = kCols;
  w.mat.rows = kRows;
  w.mat.row_bytes = dtype_row_bytes(t, kCols);
  w.mat.data = w.data.data();
  return w;
}

std::vector<float> activations(int64_t m, uint64_t seed) {
  std::vector<float> x;
  for (int64_t i = 0; i < m; ++i) {
    const auto row = testing::act_row(kCols, seed + static_cast<uint64_t>(i), i % 2 == 1);
    x.insert(x.end(), row.begin(), row.end());
  }
  return x;
}

class Matmul : public ::testing::TestWithParam<DType> {};

TEST_P(Matmul, BatchAndThreadInvariantAndEqualToDotRef) {
  const DType t = GetParam();
  const Weights w = make_weights(t, 1000 + static_cast<uint64_t>(t));
  ThreadPool one(1), two(2);
  const int64_t kMaxM = 17;
  const std::vector<float> x = activations(kMaxM, 42);

  // Row i alone (M = 1, one thread): the reference for every other configuration.
  std::vector<float> alone(kMaxM * kRows);
  for (int64_t i = 0; i < kMaxM; ++i) matmul_act_quant(one, w.mat, x.data() + i * kCols, 1, alone.data() + i * kRows);

  for (int64_t m : {1, 3, 17}) {
    for (ThreadPool* pool : {&one, &two}) {
      std::vector<float> y(m * kRows, -1.0f);
      matmul_act_quant(*pool, w.mat, x.data(), m, y.data());
      ASSERT_EQ(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)), 0)
          << dtype_name(t) << " M " << m << " threads " << pool->size();
    }
  }

  // Each element is the dot product of its two rows by the kernel set in use (bit for bit).
  std::vector<uint8_t> act(act_row_bytes(t, kCols));
  for (int64_t i = 0; i < kMaxM; ++i) {
    quantize_act_row(t, x.data() + i * kCols, act.data(), kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      const float want = t == DType::F32
                             ? dot(reinterpret_cast<const float*>(w.mat.row(r)), x.data() + i * kCols, kCols)
                             : cpu_dot(cpu_kernels(), t, w.mat.row(r), act.data(), kCols);
      ASSERT_EQ(quant::testing::bits(alone[i * kRows + r]), quant::testing::bits(want))
          << dtype_name(t) << " row " << r << " act " << i;
    }
  }
}

// The scratch buffer is reused across calls of different sizes and types without leaking
// state: a small call after a big one gives the same bits as before it.
TEST(MatmulScratch, ReuseAcrossCallsAndTypes) {
  ThreadPool pool(2);
  const Weights a = make_weights(DType::Q4_K, 7), b = make_weights(DType::Q8_0, 8);
  const std::vector<float> x = activations(17, 9);
  std::vector<float> y1(kRows), y2(kRows), big(17 * kRows);
  matmul_act_quant(pool, a.mat, x.data(), 1, y1.data());
  matmul_act_quant(pool, b.mat, x.data(), 17, big.data());
  matmul_act_quant(pool, a.mat, x.data(), 1, y2.data());
  EXPECT_EQ(y1, y2);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Matmul, ::testing::ValuesIn(quant::testing::supported_types()),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace sluice::kernels
