// kernels::Linear, the model's matmul: for every weight type (packed formats and the generic
// path alike) each output is dot_ref of its weight row and its quantized activation row
// (sequential fused multiply-adds for float types), bit for bit, whatever the batch size or the
// thread count; fused parts (q|k|v, gate|up, of equal or different types) land at their row
// offsets; the activation scratch is reused across calls without leaking state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cpu_kernels.h"
#include "kernels/dot_ref.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "quant/quant.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"
#include "unit/kernels/kernels_test_util.h"
#include "unit/quant/quant_test_util.h"

namespace sluice::kernels {
namespace {

constexpr int64_t kCols = 512;  // two K-quant super-blocks

using testing::Weights;

Weights make_weights(DType t, int64_t rows, uint64_t seed, int64_t cols = kCols) {
  return testing::make_weights(t, rows, seed, cols);
}

std::vector<float> activations(int64_t m, uint64_t seed, int64_t cols = kCols) {
  return testing::activations(m, seed, cols);
}

// The definition: dot_ref on the activation quantized as dot_ref's format; f32/f16/bf16
// weights (packed float formats) as fused multiply-adds on f32 activations in two chains,
// even and odd columns, added at the end.
float expected(const Mat& w, int64_t r, const float* x) {
  if (packed_act_format(packed_format(w.type)) == ActFormat::kF32 && packed_format(w.type) != PackedFormat::kNone) {
    std::vector<float> wf(static_cast<size_t>(w.cols));
    quant::dequantize_ref(w.type, w.row(r), wf.data(), w.cols);
    float chain[2] = {0, 0};
    for (int64_t c = 0; c < w.cols; ++c) chain[c % 2] = std::fma(wf[c], x[c], chain[c % 2]);
    return chain[0] + chain[1];
  }
  std::vector<uint8_t> act(act_row_bytes(w.type, w.cols));
  quantize_act_row(w.type, x, act.data(), w.cols);
  return dot_ref(w.type, w.row(r), act.data(), w.cols);
}

class LinearTypes : public ::testing::TestWithParam<DType> {};

TEST_P(LinearTypes, EqualToDotRefForAnyBatchAndThreadCount) {
  const DType t = GetParam();
  const int64_t rows = 37;  // not a multiple of 16 nor of the thread count
  const Weights w = make_weights(t, rows, 1000 + static_cast<uint64_t>(t));
  ThreadPool one(1), two(2);
  const Linear lin = Linear::build({&w.mat, 1}, two, "w");
  const int64_t kMaxM = 17;
  const std::vector<float> x = activations(kMaxM, 42);
  ActScratch scratch;
  for (int64_t m : {1, 3, 17}) {
    for (ThreadPool* pool : {&one, &two}) {
      std::vector<float> y(m * rows, -1.0f);
      lin.run(*pool, x.data(), m, y.data(), scratch);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(quant::testing::bits(y[i * rows + r]),
                    quant::testing::bits(expected(w.mat, r, x.data() + i * kCols)))
              << dtype_name(t) << " M " << m << " threads " << pool->size() << " row " << r << " act " << i;
    }
  }
}

// A wide row with an odd number of blocks (4128 columns: 129 blocks of 32, the SIMD
// quantizers' 16-block loop plus a tail) through the decode (M 1-2) paths on 1-3 threads.
TEST(LinearWideRows, OddBlockCountsEqualTheDefinition) {
  const int64_t cols = 4128, rows = 40;
  ThreadPool one(1), two(2), three(3);
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::F16}) {
    const Weights w = make_weights(t, rows, 77, cols);
    const Linear lin = Linear::build({&w.mat, 1}, two, "wide");
    const std::vector<float> x = activations(2, 5, cols);
    ActScratch scratch;
    for (ThreadPool* pool : {&one, &two, &three})
      for (int64_t m : {1, 2}) {
        std::vector<float> y(static_cast<size_t>(m * rows), -1.0f);
        lin.run(*pool, x.data(), m, y.data(), scratch);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(quant::testing::bits(y[i * rows + r]),
                      quant::testing::bits(expected(w.mat, r, x.data() + i * cols)))
                << dtype_name(t) << " threads " << pool->size() << " M " << m << " row " << r << " act " << i;
      }
  }
}

// Activation rows past 1 MiB of f32 (here 450 × 640 floats) split a float matrix's call by
// blocks of rows instead of row groups (linear.cpp kRowSplitBytes): one and two threads, a
// fused F16|BF16|F32 matrix (rows at their offsets), blocks of unequal length, an epilogue.
TEST(LinearRowBlocks, ManyRowsEqualTheDefinition) {
  const int64_t cols = 640, m = 450;
  const Weights a = make_weights(DType::F16, 37, 501, cols), b = make_weights(DType::BF16, 21, 502, cols),
                c = make_weights(DType::F32, 16, 503, cols);
  const Mat parts[3] = {a.mat, b.mat, c.mat};
  ThreadPool one(1), two(2);
  const Linear lin = Linear::build(parts, two, "rows");
  const std::vector<float> x = activations(m, 9, cols);
  const Epilogue post{[](float* y, int64_t n, float arg) {
                        for (int64_t i = 0; i < n; ++i) y[i] = y[i] * arg + 1.0f;
                      },
                      0.5f};
  ActScratch scratch;
  for (ThreadPool* pool : {&one, &two})
    for (const Epilogue* e : {static_cast<const Epilogue*>(nullptr), &post}) {
      std::vector<float> y(static_cast<size_t>(m * lin.rows()), -1.0f);
      lin.run(*pool, x.data(), m, y.data(), scratch, nullptr, e);
      for (int64_t i = 0; i < m; ++i) {
        int64_t row0 = 0;
        for (const Mat& p : parts) {
          for (int64_t r = 0; r < p.rows; ++r) {
            float want = expected(p, r, x.data() + i * cols);
            if (e) e->fn(&want, 1, e->arg);
            ASSERT_EQ(quant::testing::bits(y[i * lin.rows() + row0 + r]), quant::testing::bits(want))
                << dtype_name(p.type) << " threads " << pool->size() << " epilogue " << (e != nullptr) << " row " << r
                << " act " << i;
          }
          row0 += p.rows;
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, LinearTypes, ::testing::ValuesIn(quant::testing::supported_types()),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

// q|k|v-style fusion: parts of the same type become one packed matrix, parts of other types
// (here also one without a packed format) follow; every output row lands at its offset.
TEST(LinearFusion, MixedPartsLandAtTheirRowOffsets) {
  ThreadPool pool(2);
  const Weights q = make_weights(DType::Q5_0, 40, 1), k = make_weights(DType::Q5_0, 8, 2),
                v = make_weights(DType::Q8_0, 24, 3), g = make_weights(DType::Q4_1, 5, 4);
  const Mat parts[4] = {q.mat, k.mat, v.mat, g.mat};
  const Linear lin = Linear::build(parts, pool, "qkvg");
  ASSERT_EQ(lin.rows(), 40 + 8 + 24 + 5);
  EXPECT_NE(lin.describe().find("q5_0x16 [48]"), std::string::npos) << lin.describe();
  EXPECT_NE(lin.describe().find("q4_1 (generic)"), std::string::npos) << lin.describe();
  const int64_t m = 5;
  const std::vector<float> x = activations(m, 7);
  std::vector<float> y(m * lin.rows());
  ActScratch scratch;
  lin.run(pool, x.data(), m, y.data(), scratch);
  for (int64_t i = 0; i < m; ++i) {
    int64_t row0 = 0;
    for (const Mat& p : parts) {
      for (int64_t r = 0; r < p.rows; ++r)
        ASSERT_EQ(quant::testing::bits(y[i * lin.rows() + row0 + r]),
                  quant::testing::bits(expected(p, r, x.data() + i * kCols)))
            << p.name << " row " << r << " act " << i;
      row0 += p.rows;
    }
  }
  // Q5_0 / Q8_0 repack to the file's bytes plus the zero rows that pad a group to 16; the
  // generic Q4_1 part streams its file rows.
  auto rb = [](DType t) { return dtype_row_bytes(t, kCols); };
  EXPECT_EQ(lin.file_bytes(), 48 * rb(DType::Q5_0) + 24 * rb(DType::Q8_0) + 5 * rb(DType::Q4_1));
  EXPECT_EQ(lin.stream_bytes(), 48 * rb(DType::Q5_0) + 32 * rb(DType::Q8_0) + 5 * rb(DType::Q4_1));
}

// The byte ranges a build hands to its ReleasePages, merged, as [begin, end) pairs.
struct Released {
  std::vector<std::pair<const uint8_t*, const uint8_t*>> runs;
  int calls = 0;
  ReleasePages fn() {
    return [this](const uint8_t* p, uint64_t n) {
      runs.emplace_back(p, p + n);
      ++calls;
    };
  }
  std::vector<std::pair<const uint8_t*, const uint8_t*>> merged() const {
    auto r = runs;
    std::sort(r.begin(), r.end());
    std::vector<std::pair<const uint8_t*, const uint8_t*>> out;
    for (const auto& x : r) {
      EXPECT_TRUE(out.empty() || x.first >= out.back().second) << "a byte released twice";
      if (!out.empty() && x.first == out.back().second) out.back().second = x.second;
      else out.push_back(x);
    }
    return out;
  }
};

std::pair<const uint8_t*, const uint8_t*> span_of(const Mat& m) {
  return {m.data, m.data + m.row_bytes * static_cast<uint64_t>(m.rows)};
}

// With a ReleasePages, a build hands back every byte of the rows it repacked, once, and none
// of a part it reads in place (the generic path): the file's pages of the repacked copy may go.
// The results are those of a build without it.
TEST(LinearRelease, ReleasesRepackedRowsOnceAndNoOthers) {
  const Weights q = make_weights(DType::Q8_0, 40, 1), g = make_weights(DType::Q4_1, 5, 2);
  const Mat parts[2] = {q.mat, g.mat};
  ThreadPool two(2);
  Released rel;
  const Linear lin = Linear::build(parts, two, "mixed", false, nullptr, rel.fn());
  EXPECT_EQ(rel.merged(), (std::vector{span_of(q.mat)}));
  const Linear plain = Linear::build(parts, two, "mixed");
  const std::vector<float> x = activations(3, 5);
  std::vector<float> y1(3 * lin.rows()), y2(3 * lin.rows());
  ActScratch scratch;
  lin.run(two, x.data(), 3, y1.data(), scratch);
  plain.run(two, x.data(), 3, y2.data(), scratch);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), 4 * y1.size()), 0);

  // gate|up interleaved by 16 rows: both matrices, whole.
  const Weights gate = make_weights(DType::Q4_0, 48, 3), up = make_weights(DType::Q4_0, 48, 4);
  Released rg;
  (void)Linear::build_glu(gate.mat, up.mat, two, "gate_up", nullptr, rg.fn());
  auto want = std::vector{span_of(gate.mat), span_of(up.mat)};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(rg.merged(), want);
}

// A matrix of more than one release slab (32 MiB of rows) is released in several calls, as it
// is packed, so the load never holds all of it twice.
TEST(LinearRelease, LargeMatrixGoesSlabBySlab) {
  const int64_t cols = 4096, rows = 4200;  // F16: 8 KiB rows, 34.4 MB
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols * 2), 0);
  const Mat big{"big", DType::F16, bytes.data(), cols, rows, static_cast<uint64_t>(cols * 2)};
  ThreadPool two(2);
  Released rel;
  (void)Linear::build({&big, 1}, two, "big", false, nullptr, rel.fn());
  EXPECT_GE(rel.calls, 2);
  EXPECT_EQ(rel.merged(), (std::vector{span_of(big)}));
}

// An epilogue is applied exactly once to every output, wherever the call's spans fall: the
// result equals the plain call followed by the op, bit for bit. Parts of several types (one
// generic), a packed part of more groups than one epilogue span, rows not a multiple of 16.
TEST(LinearEpilogue, EqualsOnePassAfterTheCall) {
  const Weights q = make_weights(DType::Q5_0, 40, 1), big = make_weights(DType::Q8_0, 600, 2),
                g = make_weights(DType::Q4_1, 5, 4);
  const Mat parts[3] = {q.mat, big.mat, g.mat};
  ThreadPool one(1), two(2);
  const Linear lin = Linear::build(parts, two, "mixed");
  // Not idempotent: applying it twice, or skipping a span, changes the bits.
  const Epilogue post{[](float* y, int64_t n, float a) {
                        for (int64_t i = 0; i < n; ++i) y[i] = y[i] * a + 1.0f;
                      },
                      3.0f};
  const std::vector<float> x = activations(17, 9);
  ActScratch scratch;
  for (int64_t m : {1, 3, 17}) {
    for (ThreadPool* pool : {&one, &two}) {
      std::vector<float> plain(m * lin.rows()), fused(m * lin.rows(), -7.0f);
      lin.run(*pool, x.data(), m, plain.data(), scratch);
      post.fn(plain.data(), static_cast<int64_t>(plain.size()), post.arg);
      lin.run(*pool, x.data(), m, fused.data(), scratch, nullptr, &post);
      for (size_t i = 0; i < plain.size(); ++i)
        ASSERT_EQ(quant::testing::bits(fused[i]), quant::testing::bits(plain[i]))
            << "M " << m << " threads " << pool->size() << " output " << i;
    }
  }
}

TEST(LinearFusion, RejectsDifferentInputWidths) {
  ThreadPool pool(1);
  const Weights a = make_weights(DType::Q8_0, 16, 1);
  std::vector<uint8_t> raw(dtype_row_bytes(DType::Q8_0, 256) * 16);
  const Mat b{"narrow", DType::Q8_0, raw.data(), 256, 16, dtype_row_bytes(DType::Q8_0, 256)};
  const Mat parts[2] = {a.mat, b};
  EXPECT_THROW(Linear::build(parts, pool, "bad"), sluice::Error);
}

// The scratch buffer is reused across calls of different sizes and formats without leaking
// state: a small call after a big one gives the same bits as before it.
TEST(LinearScratch, ReuseAcrossCallsAndTypes) {
  ThreadPool pool(2);
  const Weights a = make_weights(DType::Q4_K, 37, 7), b = make_weights(DType::Q8_0, 37, 8);
  const Linear la = Linear::build({&a.mat, 1}, pool, "a"), lb = Linear::build({&b.mat, 1}, pool, "b");
  const std::vector<float> x = activations(17, 9);
  std::vector<float> y1(37), y2(37), big(17 * 37);
  ActScratch scratch;
  la.run(pool, x.data(), 1, y1.data(), scratch);
  lb.run(pool, x.data(), 17, big.data(), scratch);
  la.run(pool, x.data(), 1, y2.data(), scratch);
  EXPECT_EQ(y1, y2);
}

// run_glu with a quantized output (the FFN's down input): act is unchanged, q holds exactly
// the quantized act rows, and the down matrix run on q equals it run on act — for the packed
// gate|up (units in pairs, odd pair counts per thread) and the generic one (Q4_1), any thread
// count and batch size.
TEST(LinearGlu, QuantizedOutputFeedsTheDownMatrixAsRunWould) {
  const int64_t ff = 1312;  // 82 units of 16 rows, 41 blocks of 32: runs of several blocks per thread
  const Weights down_w = make_weights(DType::Q4_0, 37, 500, ff);
  ThreadPool one(1), two(2), three(3);
  const Linear down = Linear::build({&down_w.mat, 1}, two, "down");
  ASSERT_EQ(down.quantized_input(), ActFormat::kA8_32);
  const std::vector<float> x = activations(17, 31);
  for (DType t : {DType::Q4_0, DType::Q4_1}) {
    const Weights gate = make_weights(t, ff, 100), up = make_weights(t, ff, 300);
    const Linear glu = Linear::build_glu(gate.mat, up.mat, two, "gate_up");
    for (ThreadPool* pool : {&one, &two, &three})
      for (int64_t m : {1, 3, 17}) {
        ActScratch scratch;
        std::vector<float> act(static_cast<size_t>(m * ff)), act_q(act.size(), -1.0f);
        glu.run_glu(*pool, x.data(), m, act.data(), scratch);
        const uint64_t stride = act_row_stride(ActFormat::kA8_32, ff);
        std::vector<uint8_t> qbuf(static_cast<size_t>(m) * stride, 0xAB);
        const ActRows q{ActFormat::kA8_32, qbuf.data(), stride, ff};
        glu.run_glu(*pool, x.data(), m, act_q.data(), scratch, nullptr, &q);
        ASSERT_EQ(act, act_q) << dtype_name(t) << " threads " << pool->size() << " M " << m;
        std::vector<uint8_t> want(static_cast<size_t>(stride));
        for (int64_t i = 0; i < m; ++i) {
          cpu_quantize_act(cpu_kernels(), ActFormat::kA8_32, act.data() + i * ff, ff, want.data());
          ASSERT_EQ(0, std::memcmp(want.data(), qbuf.data() + i * stride, static_cast<size_t>(40 * ff / 32)))
              << dtype_name(t) << " threads " << pool->size() << " M " << m << " row " << i;
        }
        std::vector<float> y(static_cast<size_t>(m * 37)), y_q(y.size(), -1.0f);
        down.run(*pool, act.data(), m, y.data(), scratch);
        down.run_quantized(*pool, q, m, y_q.data(), scratch);
        for (size_t j = 0; j < y.size(); ++j)
          ASSERT_EQ(quant::testing::bits(y[j]), quant::testing::bits(y_q[j])) << dtype_name(t) << " output " << j;
      }
  }
  // Float weights read f32 activations: nothing to hand them pre-quantized.
  const Weights f = make_weights(DType::F16, 16, 600, ff);
  const Linear lf = Linear::build({&f.mat, 1}, two, "f16");
  EXPECT_EQ(lf.quantized_input(), ActFormat::kF32);
  ActScratch scratch;
  std::vector<uint8_t> qbuf(act_row_stride(ActFormat::kA8_32, ff));
  std::vector<float> y(16);
  EXPECT_THROW(lf.run_quantized(two, ActRows{ActFormat::kA8_32, qbuf.data(), qbuf.size(), ff}, 1, y.data(), scratch),
               std::exception);
}

}  // namespace
}  // namespace sluice::kernels
