#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "base/aligned_bytes.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/checked_math.h"
#include "base/cpu_features.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/mmap_file.h"
#include "base/process_memory.h"

namespace sluice {
namespace {

TEST(DType, TableMatchesTheSpecForEverySupportedType) {
  // gguf.md §8: (id, name, block elements, block bytes) for the types sluice decodes.
  struct Row {
    uint32_t id;
    const char* name;
    uint32_t be, bb;
  };
  const Row rows[] = {{0, "f32", 1, 4},       {1, "f16", 1, 2},         {2, "q4_0", 32, 18},    {3, "q4_1", 32, 20},
                      {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},      {8, "q8_0", 32, 34},    {10, "q2_K", 256, 84},
                      {11, "q3_K", 256, 110}, {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176}, {14, "q6_K", 256, 210},
                      {20, "iq4_nl", 32, 18}, {23, "iq4_xs", 256, 136}, {30, "bf16", 1, 2}};
  int supported = 0;
  for (uint32_t id = 0; id < 64; ++id)
    if (const DTypeInfo* i = dtype_info(id); i && i->supported) ++supported;
  EXPECT_EQ(supported, 15);
  for (const Row& r : rows) {
    const DTypeInfo* i = dtype_info(r.id);
    ASSERT_NE(i, nullptr) << r.name;
    EXPECT_EQ(i->name, r.name);
    EXPECT_EQ(i->block_elems, r.be) << r.name;
    EXPECT_EQ(i->block_bytes, r.bb) << r.name;
    EXPECT_TRUE(i->supported) << r.name;
  }
}

TEST(DType, RemovedAndUnknownIdsHaveNoInfo) {
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 99u, 0xFFFFFFFFu})
    EXPECT_EQ(dtype_info(id), nullptr) << id;
  ASSERT_NE(dtype_info(16), nullptr);  // iq2_xxs: valid in files, not decodable by us
  EXPECT_FALSE(dtype_info(16)->supported);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(dtype_row_bytes(DType::Q6_K, 512), 420u);
}

TEST(CheckedMath, DetectsOverflow) {
  uint64_t r;
  EXPECT_TRUE(checked_mul(1ull << 31, 1ull << 32, &r));
  EXPECT_EQ(r, 1ull << 63);
  EXPECT_FALSE(checked_mul(1ull << 32, 1ull << 32, &r));
  EXPECT_FALSE(checked_add(UINT64_MAX, 1, &r));
  EXPECT_TRUE(checked_align_up(33, 32, &r));
  EXPECT_EQ(r, 64u);
  EXPECT_TRUE(checked_align_up(64, 32, &r));
  EXPECT_EQ(r, 64u);
  EXPECT_FALSE(checked_align_up(UINT64_MAX - 3, 32, &r));
}

TEST(Error, FormatsAndThrows) {
  EXPECT_EQ(strfmt("%s=%d", "x", 42), "x=42");
  EXPECT_EQ(strfmt("%s", std::string(5000, 'a').c_str()).size(), 5000u);
  try {
    fail("bad %s at %d", "thing", 7);
    FAIL() << "fail() returned";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "bad thing at 7");
  }
}

TEST(MmapFile, MapsAndReportsErrors) {
  const auto dir = std::filesystem::temp_directory_path() / "sluice_base_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "f.bin").string();
  { std::ofstream(path, std::ios::binary) << "hello"; }
  {
    MmapFile m(path);
    ASSERT_EQ(m.size(), 5u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.bytes().data()), 5), "hello");
  }
  const std::string empty = (dir / "empty.bin").string();
  { std::ofstream(empty, std::ios::binary); }
  EXPECT_EQ(MmapFile(empty).size(), 0u);
  try {
    MmapFile m((dir / "missing.bin").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.bin: cannot open"), std::string::npos) << e.what();
  }
  try {
    MmapFile m(dir.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// release() takes the pages of a range out of the resident set and they read back the same;
// a pointer outside the map is left alone (MADV_DONTNEED would zero anonymous memory).
TEST(MmapFile, ReleaseDropsPagesAndKeepsBytes) {
  const ProcessMemory m0 = process_memory();
  if (!m0.known) GTEST_SKIP() << "no /proc/self/status";
  const auto dir = std::filesystem::temp_directory_path() / "sluice_base_release_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "f.bin").string();
  constexpr size_t kBytes = size_t{16} << 20;
  std::vector<uint8_t> want(kBytes);
  for (size_t i = 0; i < kBytes; ++i) want[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  { std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(want.data()), kBytes); }
  {
    MmapFile m(path);
    const uint8_t* p = m.bytes().data();
    ASSERT_EQ(std::memcmp(p, want.data(), kBytes), 0);  // every page of the map touched
    const uint64_t touched = process_memory().rss;
    m.release(p + 1, kBytes - 1);  // widened to whole pages: the first one too
    const uint64_t released = process_memory().rss;
    EXPECT_GE(touched, released + (kBytes * 3 / 4)) << touched << " -> " << released;
    EXPECT_EQ(std::memcmp(p, want.data(), kBytes), 0);
    // Outside the map: heap bytes stay as they are.
    std::vector<uint8_t> heap(size_t{1} << 20, 0x5A);
    m.release(heap.data(), heap.size());
    EXPECT_EQ(std::count(heap.begin(), heap.end(), 0x5A), static_cast<std::ptrdiff_t>(heap.size()));
  }
  std::filesystem::remove_all(dir);
}

TEST(ProcessMemory, ReadsRssAndPeak) {
  const ProcessMemory m = process_memory();
  if (!m.known) GTEST_SKIP() << "no /proc/self/status";
  EXPECT_GT(m.rss, 0u);
  EXPECT_GE(m.peak_rss, m.rss);
}

TEST(CpuFeatures, AreConsistent) {
  const CpuFeatures& f = cpu_features();
  // The AVX-512 subsets require the foundation; AVX-512 machines always have AVX2.
  if (f.avx512bw || f.avx512vl || f.avx512vnni || f.avx512bf16) {
    EXPECT_TRUE(f.avx512f);
  }
  if (f.avx512f) {
    EXPECT_TRUE(f.avx2);
  }
  // ARM: the dot-product and matrix-multiply extensions are Advanced SIMD instructions.
  if (f.dotprod || f.i8mm || f.fp16 || f.bf16) {
    EXPECT_TRUE(f.asimd);
  }
#if defined(__aarch64__)
  EXPECT_TRUE(f.asimd);
  EXPECT_FALSE(f.avx2);
#else
  EXPECT_FALSE(f.asimd);
#endif
  EXPECT_FALSE(cpu_features_string().empty());
  std::printf("cpu features: %s\n", cpu_features_string().c_str());
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST(AlignedBytes, ZeroedAlignedAndHugePageSized) {
  for (uint64_t n : {uint64_t{1}, uint64_t{100}, uint64_t{3} << 20}) {
    AlignedBytes a = AlignedBytes::alloc(n);
    ASSERT_NE(a.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
    if (n >= (uint64_t{2} << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % (uint64_t{2} << 20), 0u);
    }
    for (uint64_t i = 0; i < n; i += 4093) EXPECT_EQ(a.data()[i], 0);
    a.data()[n - 1] = 7;  // writable to the end
  }
}

TEST(ByteArena, CarvesAlignedDisjointZeroedBuffersAcrossChunks) {
  ByteArena arena(uint64_t{1} << 20);  // small chunks: force several
  std::vector<std::pair<uint8_t*, uint64_t>> got;
  for (uint64_t n : {uint64_t{10}, uint64_t{64}, uint64_t{700000}, uint64_t{500000}, uint64_t{3} << 20, uint64_t{65}}) {
    uint8_t* p = arena.take(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(p[i], 0) << n;
    std::memset(p, 0xAB, n);
    got.push_back({p, n});
  }
  for (size_t i = 0; i < got.size(); ++i)
    for (size_t j = i + 1; j < got.size(); ++j) {
      const bool apart = got[i].first + got[i].second <= got[j].first || got[j].first + got[j].second <= got[i].first;
      EXPECT_TRUE(apart) << i << " overlaps " << j;
    }
  EXPECT_GE(arena.used(), (uint64_t{3} << 20) + 1200000);
  // A borrowed view releases nothing: the arena still owns the bytes.
  { AlignedBytes v = AlignedBytes::borrowed(got[0].first, got[0].second); }
  EXPECT_EQ(got[0].first[0], 0xAB);
}

}  // namespace
}  // namespace sluice
