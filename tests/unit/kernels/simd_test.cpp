// The runtime-dispatched SIMD dot kernels (kernels/cpu_kernels.h) against the scalar reference
// dot_ref: for every ISA set this CPU can run and every kernel it provides, random rows of
// several lengths (realistic scales, and raw random bytes with finite scales), unaligned.
// Kernels need not be bit-identical to dot_ref (only the f32 accumulation order may differ):
// |simd − ref| ≤ 1e-5·Σ|w·a| per row. They must be pure functions of the two rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/dtype.h"
#include "kernels/cpu_kernels.h"
#include "kernels/dot_ref.h"
#include "quant/quant.h"
#include "unit/kernels/kernels_test_util.h"

namespace sluice::kernels {
namespace {

// A copy of `src` at byte offset `off` of a heap buffer of exactly off + size bytes (so that
// ASan catches a read past the row, and the row is not aligned).
struct Placed {
  std::unique_ptr<uint8_t[]> buf;
  const uint8_t* p;
  Placed(const void* src, size_t size, size_t off) : buf(new uint8_t[size + off]) {
    std::memcpy(buf.get() + off, src, size);
    p = buf.get() + off;
  }
};

// Σ|w·a| in double from the decoded rows (the scale of the allowed error).
double abs_dot(DType t, const void* w, const void* act, int64_t n) {
  std::vector<float> wf(static_cast<size_t>(n));
  quant::dequantize_ref(t, w, wf.data(), n);
  const std::vector<float> af = testing::decode_act(vec_dot_type(t), act, n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(wf[i]) * af[i]);
  return s;
}

TEST(CpuKernels, SelectionAndTables) {
  const auto sets = runnable_cpu_kernels();
  ASSERT_FALSE(sets.empty());
  EXPECT_STREQ(sets.front()->isa, "scalar");
  for (const DotKernel f : sets.front()->dot) EXPECT_EQ(f, nullptr);
  const CpuKernels& chosen = cpu_kernels();
  bool found = false;
  for (const CpuKernels* k : sets) found |= k == &chosen;
  EXPECT_TRUE(found) << chosen.isa;
  const char* env = std::getenv("SLUICE_ISA");
  if (env == nullptr || *env == '\0') EXPECT_EQ(&chosen, sets.back()) << "default must be the best runnable set";
  else EXPECT_STREQ(chosen.isa, env);
  std::string names;
  for (const CpuKernels* k : sets) names += std::string(" ") + k->isa;
  std::printf("ISA sets run:%s (cpu_kernels() = %s)\n", names.c_str(), chosen.isa);
  // Every SIMD set has a packed kernel for every packed format, the activation quantizers, the
  // row ops (argmax included), paged attention, the bandwidth probe and a dot kernel (the
  // generic path) for the legacy formats; the x86 sets also for Q4_K and Q6_K.
  for (const CpuKernels* k : sets) {
    if (std::strcmp(k->isa, "scalar") == 0) continue;
    for (int f = 1; f < kPackedFormatCount; ++f)
      EXPECT_NE(k->gemm[f], nullptr) << k->isa << " " << packed_format_name(static_cast<PackedFormat>(f));
    EXPECT_NE(k->quantize_act[static_cast<int>(ActFormat::kA8_32)], nullptr) << k->isa;
    EXPECT_NE(k->quantize_act[static_cast<int>(ActFormat::kA8_256)], nullptr) << k->isa;
    EXPECT_NE(k->ops.rms_norm, nullptr) << k->isa;
    EXPECT_NE(k->ops.argmax, nullptr) << k->isa;
    EXPECT_NE(k->attention, nullptr) << k->isa;
    EXPECT_NE(k->attention_chunks, nullptr) << k->isa;
    EXPECT_NE(k->attention_merge, nullptr) << k->isa;
    EXPECT_NE(k->stream_sum, nullptr) << k->isa;
    const bool x86 = std::strncmp(k->isa, "avx", 3) == 0;
    for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0})
      EXPECT_NE(k->dot[static_cast<uint32_t>(t)], nullptr) << k->isa << " " << dtype_name(t);
    if (!x86) continue;
    for (DType t : {DType::Q4_K, DType::Q6_K})
      EXPECT_NE(k->dot[static_cast<uint32_t>(t)], nullptr) << k->isa << " " << dtype_name(t);
  }
}

// The set the dispatch picks on a known CPU: SLUICE_EXPECT_ISA names it (make test-arm64 runs
// this under qemu's max, cortex-a76 and cortex-a72 models: i8mm, dotprod, neon).
TEST(CpuKernels, DispatchPicksExpectedSet) {
  const char* want = std::getenv("SLUICE_EXPECT_ISA");
  if (want == nullptr || *want == '\0') GTEST_SKIP() << "SLUICE_EXPECT_ISA not set";
  EXPECT_STREQ(cpu_kernels().isa, want) << "cpu features: " << cpu_features_string();
}

TEST(CpuKernels, EveryKernelMatchesDotRef) {
  int checked = 0;
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    for (uint32_t id = 0; id < kDTypeIdCount; ++id) {
      const DotKernel f = k->dot[id];
      if (f == nullptr) continue;
      const DType t = static_cast<DType>(id);
      const int64_t be = dtype_info(t).block_elems;
      std::vector<int64_t> lengths = {256, 512, 2048, 6144, 256 * 23};
      if (be == 32) lengths.insert(lengths.end(), {32, 64, 96, 160, 2048 + 32, 6144 + 96});
      int row = 0;
      for (int64_t n : lengths) {
        for (int variant = 0; variant < 4; ++variant, ++row) {
          const uint64_t seed = 0x51D0ull * id + 977ull * static_cast<uint64_t>(row);
          const bool sane = variant < 2;
          const std::vector<uint8_t> w = testing::weight_row(t, n, seed, sane);
          const std::vector<float> x = testing::act_row(n, seed ^ 0xF00D, variant % 2 == 1);
          std::vector<uint8_t> act(act_row_bytes(t, n));
          quantize_act_row(t, x.data(), act.data(), n);
          const Placed wp(w.data(), w.size(), static_cast<size_t>(row % 7));
          const Placed ap(act.data(), act.size(), static_cast<size_t>((row + 3) % 5));

          const float want = dot_ref(t, w.data(), act.data(), n);
          const float got = f(wp.p, ap.p, n);
          const double scale = abs_dot(t, w.data(), act.data(), n);
          ASSERT_TRUE(std::isfinite(got)) << k->isa << " " << dtype_name(t) << " n " << n;
          if (std::strncmp(k->isa, "avx", 3) != 0) {  // the ARM sets follow dot_ref's f32 order: same bits
            ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << k->isa << " " << dtype_name(t) << " n " << n;
          }
          ASSERT_LE(std::fabs(static_cast<double>(got) - want), 1e-5 * scale + 1e-30)
              << k->isa << " " << dtype_name(t) << " n " << n << " variant " << variant << " got " << got << " want "
              << want << " Σ|w·a| " << scale;
          // Pure function of the rows: same bits again, from other addresses.
          const float again = f(w.data(), act.data(), n);
          ASSERT_EQ(std::memcmp(&got, &again, sizeof got), 0) << k->isa << " " << dtype_name(t) << " n " << n;
          EXPECT_EQ(cpu_dot(*k, t, w.data(), act.data(), n), got);
          ++checked;
        }
      }
      // n = 0: an empty sum.
      EXPECT_EQ(f(nullptr, nullptr, 0), 0.0f) << k->isa << " " << dtype_name(t);
    }
  }
  std::printf("SIMD kernel rows checked: %d\n", checked);
}

// Activations from an all-zero block (d = 0) and extreme codes: weights whose codes are all
// at the ends of their range (-128/127 for Q8_0, 0/15 nibbles).
TEST(CpuKernels, ExtremeCodes) {
  for (const CpuKernels* k : runnable_cpu_kernels()) {
    for (uint32_t id = 0; id < kDTypeIdCount; ++id) {
      const DotKernel f = k->dot[id];
      if (f == nullptr) continue;
      const DType t = static_cast<DType>(id);
      const int64_t n = 1024;
      for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<uint8_t> w = testing::weight_row(t, n, 7 + pattern, true);
        const std::vector<int> offs = quant::testing::f16_scale_offsets(t);
        const int64_t bb = dtype_info(t).block_bytes;
        for (size_t b = 0; b < w.size() / bb; ++b)
          for (int64_t j = 0; j < bb; ++j) {
            bool scale = false;
            for (int o : offs) scale |= j == o || j == o + 1;
            if (!scale && (t != DType::Q4_K || j >= 16) && (t != DType::Q6_K || j < 192))
              w[b * bb + j] = pattern == 0 ? 0x00 : pattern == 1 ? 0xFF : 0x80;
          }
        std::vector<float> x(n);
        for (int64_t i = 0; i < n; ++i) x[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (i < 256 ? 0.0f : 1.0f + i % 5);
        std::vector<uint8_t> act(act_row_bytes(t, n));
        quantize_act_row(t, x.data(), act.data(), n);
        const float want = dot_ref(t, w.data(), act.data(), n);
        const double scale = abs_dot(t, w.data(), act.data(), n);
        EXPECT_LE(std::fabs(static_cast<double>(f(w.data(), act.data(), n)) - want), 1e-5 * scale + 1e-30)
            << k->isa << " " << dtype_name(t) << " pattern " << pattern;
      }
    }
  }
}

// The bandwidth probe's read (cpu_stream_sum): every set's sum of a buffer's 64-bit words,
// wrapping modulo 2^64 as plain unsigned adds do. Words near 2^63 make every partial sum
// overflow, which a signed reduction would turn into undefined behaviour (UBSan: make test-asan).
TEST(CpuKernels, StreamSumWrapsLikeUnsignedAdds) {
  constexpr size_t kWords = 4096;  // 32 KiB: a multiple of every set's 256-byte step
  struct Free {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint64_t, Free> buf(static_cast<uint64_t*>(std::aligned_alloc(64, kWords * 8)));
  ASSERT_NE(buf, nullptr);
  uint64_t want = 0;
  for (size_t i = 0; i < kWords; ++i) {
    buf.get()[i] = (uint64_t{1} << 63) + i * 0x9E3779B97F4A7C15ull;
    want += buf.get()[i];
  }
  for (const CpuKernels* k : runnable_cpu_kernels())
    EXPECT_EQ(cpu_stream_sum(*k, reinterpret_cast<const uint8_t*>(buf.get()), kWords * 8), want) << k->isa;
}

}  // namespace
}  // namespace sluice::kernels
