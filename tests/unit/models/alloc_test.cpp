// The steady-state decode loop allocates nothing: this binary replaces the global operator
// new / delete with counting versions, warms a model up (prefill + a few decode steps, so
// every step buffer has grown to size), then counts allocations over many more decode steps
// of forward + sampling, with window blocks released as the sequence moves on. Block tables
// are reserved for the whole sequence up front, as an engine with a known context does.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

#include "gguf/reader.h"
#include "kv/sequence_kv.h"
#include "models/model.h"
#include "sampling/sampler.h"
#include "threading/thread_pool.h"
#include "tiny_model.h"

namespace {
std::atomic<long> g_allocs{0};
std::atomic<bool> g_counting{false};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
  const size_t al = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace sluice {
namespace {

struct Case {
  const char* arch;
  DType type;
  SamplingParams sampling;
  bool moe = false;  // 26B-A4B-shaped: routed experts, run whole per thread (gemma_moe.cpp)
};

long decode_allocations(const Case& cs) {
  test::TinyConfig c;
  c.arch = cs.arch;
  c.matrix_type = cs.type;
  if (cs.moe) c = test::tiny_moe_config(c);
  const auto bytes = test::make_tiny_gguf(c);
  auto file = gguf::GgufFile::parse(bytes, "tiny");
  ThreadPool pool(2);
  models::LoadOptions lo;
  lo.pool = &pool;
  auto model = models::load_model(*file, lo);
  const auto& groups = model->spec().kv_groups;
  const int32_t ctx = 96;
  KvCache kv(groups, 4, std::vector<int32_t>(groups.size(), ctx / 4 + 1), KvType::F16);
  SequenceKv seq(kv);
  EXPECT_TRUE(seq.reserve(ctx));
  Sampler sampler(cs.sampling, model->spec().n_vocab);
  std::mt19937 rng(3);
  std::vector<int32_t> history;
  history.reserve(ctx);
  for (int i = 0; i < 12; ++i) history.push_back(static_cast<int32_t>(rng() % c.n_vocab));
  std::vector<float> logits(static_cast<size_t>(model->spec().n_vocab));
  models::ForwardBatch b;
  b.seqs.resize(1);
  auto step = [&](std::span<const int32_t> toks, int32_t pos) {
    seq.release_outside_window(pos);
    models::SeqSlice& s = b.seqs[0];
    s.tokens = toks;
    s.pos0 = pos;
    for (int g = 0; g < kv.n_groups(); ++g) s.block_tables[g] = seq.table(g);
    s.logits = models::LogitsWanted::kLast;
    model->forward(b, kv, logits.data());
    const int32_t next = sampler.sample(logits.data(), history);
    history.push_back(next);
  };
  step(history, 0);  // prefill
  int32_t pos = static_cast<int32_t>(history.size()) - 1;
  for (int i = 0; i < 8; ++i, ++pos) step({&history[pos], 1}, pos);  // warm-up decodes
  g_allocs = 0;
  g_counting = true;
  for (int i = 0; i < 60; ++i, ++pos) step({&history[pos], 1}, pos);
  g_counting = false;
  return g_allocs.load();
}

TEST(ZeroAllocation, SteadyStateDecodeAllocatesNothing) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.top_k = 20;
  sampled.top_p = 0.9f;
  sampled.min_p = 0.02f;
  sampled.repeat_penalty = 1.1f;
  sampled.seed = 7;
  for (const Case& cs : {Case{"gemma4", DType::Q4_0, greedy}, Case{"gemma4", DType::F32, sampled},
                         Case{"gemma3", DType::Q8_0, sampled}, Case{"gemma4", DType::Q4_0, greedy, true}}) {
    EXPECT_EQ(decode_allocations(cs), 0) << cs.arch << " " << dtype_name(cs.type) << (cs.moe ? " moe" : "");
  }
}

// The counter works: an allocation inside the window is seen.
TEST(ZeroAllocation, CounterSeesAllocations) {
  g_allocs = 0;
  g_counting = true;
  auto* p = new std::vector<int>(100);
  g_counting = false;
  delete p;
  EXPECT_GE(g_allocs.load(), 2);
}

}  // namespace
}  // namespace sluice
