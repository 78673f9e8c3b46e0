// `--spec draft` on real (tiny) models: tiny Gemma 3 and tiny Gemma 4 targets drafted by a
// smaller random model of the same vocabulary (drafts mostly rejected), by their own Q4_0
// variant (mostly accepted, some rollbacks) and by themselves (all accepted). Eight concurrent
// sequences — greedy and seeded temperature-0.8 sampling, shared prefixes with prefix caching,
// prompts longer than the sliding window (16), prefill mixed with decodes — and one sequence
// alone, K in {1, 3, 8}: the tokens must be bitwise those without speculation, and both block
// pools empty at the end. The same for the tiny mixture-of-experts Gemma 4 (26B-A4B-shaped).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "base/error.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine_core.h"
#include "engine_drive.h"
#include "gguf/reader.h"
#include "models/model.h"
#include "threading/thread_pool.h"
#include "tokenizer/same_vocabulary.h"

namespace sluice::engine {
namespace {

const std::string kDir = std::string(SLUICE_SOURCE_DIR) + "/tests/data/golden/";

struct Loaded {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<models::Model> model;
};

ThreadPool& pool() {
  static ThreadPool p(1);  // tiny models: one thread is fastest on a loaded host
  return p;
}

const Loaded& load(const std::string& name) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  if (!std::filesystem::exists(kDir + name)) throw std::runtime_error(kDir + name + " is missing: run `make fixtures`");
  Loaded l;
  l.file = gguf::GgufFile::open(kDir + name);
  models::LoadOptions lo;
  lo.pool = &pool();
  l.model = models::load_model(*l.file, lo);
  return cache.emplace(name, std::move(l)).first->second;
}

struct Outcome {
  std::map<RequestId, std::vector<int32_t>> tokens;
  EngineStats stats;
};

Outcome run(const std::string& target, const std::string& draft, int32_t k, const std::vector<EngineRequest>& reqs) {
  models::Model& tm = *load(target).model;
  KvCache kv(tm.spec().kv_groups, 16, std::vector<int32_t>(tm.spec().kv_groups.size(), 96), KvType::F32);
  std::unique_ptr<KvCache> dkv;
  std::unique_ptr<DraftModelProposer> drafter;
  EngineConfig cfg;
  cfg.sched.max_running = 8;
  cfg.sched.token_budget = 64;
  cfg.sched.ctx_size = 512;
  if (!draft.empty()) {
    tok::check_same_vocabulary(*load(target).file, *load(draft).file);
    models::Model& dm = *load(draft).model;
    dkv = std::make_unique<KvCache>(dm.spec().kv_groups, 16, std::vector<int32_t>(dm.spec().kv_groups.size(), 96),
                                    KvType::F32);
    drafter = std::make_unique<DraftModelProposer>(dm, *dkv, tm.spec().n_vocab, DraftModelConfig{64, 0.0f});
    cfg.spec = SpecMethod::kModel;
    cfg.model_proposer = drafter.get();
    cfg.sched.draft_max = k;
  }
  Outcome r;
  {
    EngineCore core(tm, kv, cfg);
    run_to_end(core, reqs, r.tokens, 5000);
    if (drafter) {
      EXPECT_EQ(drafter->blocks().n_used_all(), 0) << "draft blocks leaked";
    }
    r.stats = core.stats();
  }
  return r;
}

std::vector<int32_t> prompt(int n, uint64_t seed) {
  std::vector<int32_t> p = {2};  // <bos>
  uint64_t h = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 1; i < n; ++i) {
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    p.push_back(static_cast<int32_t>(5 + h % 500));
  }
  return p;
}

std::vector<EngineRequest> eight_requests() {
  std::vector<EngineRequest> reqs;
  const std::vector<int32_t> shared = prompt(33, 7);  // two full blocks of 16: prefix-cache hits
  for (int i = 0; i < 8; ++i) {
    EngineRequest r;
    r.id = static_cast<RequestId>(i + 1);
    r.prompt = i % 2 ? shared : std::vector<int32_t>{2};
    for (int32_t t : prompt(4 + 9 * i, 100 + static_cast<uint64_t>(i))) r.prompt.push_back(t);  // up to 100
    r.max_tokens = 12 + 2 * i;
    r.sampling.temperature = 0;
    if (i % 3 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = 11 + static_cast<uint64_t>(i);
    }
    reqs.push_back(std::move(r));
  }
  return reqs;
}

struct Case {
  std::string draft;
  int32_t k;
  bool eight;  // the eight mixed sequences, else one greedy sequence alone
};

// Each case against the plain run; drafting for itself, a greedy sequence accepts every draft.
void check_cases(const std::string& target, const std::vector<Case>& cases) {
  const auto eight = eight_requests();
  EngineRequest one;
  one.id = 1;
  one.prompt = prompt(40, 3);  // longer than the window
  one.max_tokens = 24;
  one.sampling.temperature = 0;
  const Outcome plain8 = run(target, "", 0, eight), plain1 = run(target, "", 0, {one});
  for (const Case& c : cases) {
    const Outcome s = c.eight ? run(target, c.draft, c.k, eight) : run(target, c.draft, c.k, {one});
    EXPECT_EQ(s.tokens, (c.eight ? plain8 : plain1).tokens) << target << " drafted by " << c.draft << ", k=" << c.k;
    EXPECT_GT(s.stats.drafted_tokens, 0);
    if (c.draft == target && !c.eight) {
      EXPECT_EQ(s.stats.accepted_tokens, s.stats.drafted_tokens) << "drafting for itself";
    }
    std::printf("[ %s drafted by %s, k=%d, %s: %lld of %lld drafts accepted ]\n", target.c_str(), c.draft.c_str(), c.k,
                c.eight ? "8 sequences" : "alone", static_cast<long long>(s.stats.accepted_tokens),
                static_cast<long long>(s.stats.drafted_tokens));
  }
}

// A random smaller draft (drafts mostly rejected) at every K; the target's own Q4_0 variant
// (mostly accepted, with rollbacks); the target itself (all accepted alone).
std::vector<Case> cases_for(const std::string& tiny) {
  const std::string draft = tiny + "-draft.f32.gguf", q4 = tiny + ".q4_0.gguf", self = tiny + ".f32.gguf";
  return {{draft, 1, true}, {draft, 3, true}, {draft, 8, true}, {draft, 3, false},
          {q4, 3, true},    {q4, 8, false},   {self, 8, false}};
}

TEST(DraftModelGguf, TinyGemma3OutputIsBitwiseThePlainOutput) {
  check_cases("tiny-gemma3.f32.gguf", cases_for("tiny-gemma3"));
}

TEST(DraftModelGguf, TinyGemma4OutputIsBitwiseThePlainOutput) {
  check_cases("tiny-gemma4.f32.gguf", cases_for("tiny-gemma4"));
}

// The 26B-A4B-shaped tiny MoE: a step's tokens are grouped by expert, so a verification step
// (a sequence's drafts batched with the other sequences' tokens) must route and compute each
// token exactly as a plain decode does. Eight sequences with prefix-cache hits, and alone.
TEST(DraftModelGguf, TinyGemma4MoeOutputIsBitwiseThePlainOutput) {
  check_cases("tiny-gemma4-moe.f32.gguf", {{"tiny-gemma4-draft.f32.gguf", 3, true},
                                           {"tiny-gemma4-moe.q4_0.gguf", 3, true},
                                           {"tiny-gemma4-moe.q4_0.gguf", 8, false},
                                           {"tiny-gemma4-moe.f32.gguf", 8, false}});
}

TEST(DraftModelGguf, AVocabularyMismatchNamesTheFirstDifferentId) {
  // A copy of the draft with one token text changed in place (same length, so the file stays
  // valid): "<unused0>" becomes "<unusee0>".
  std::ifstream in(kDir + "tiny-gemma3-draft.f32.gguf", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find("<unused0>");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 6] = 'e';
  const std::string path = testing::TempDir() + "draft-vocab-mismatch.gguf";
  std::ofstream(path, std::ios::binary) << bytes;
  const auto bad = gguf::GgufFile::open(path);
  const gguf::GgufFile& target = *load("tiny-gemma3.f32.gguf").file;
  const gguf::KeyValue& toks = target.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING);
  uint64_t id = 0;
  while (toks.string_at(id) != "<unused0>") ++id;
  try {
    tok::check_same_vocabulary(target, *bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first difference at id " + std::to_string(id) + ","), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("'<unusee0>'"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(tok::check_same_vocabulary(target, *load("tiny-gemma3-draft.f32.gguf").file));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sluice::engine
