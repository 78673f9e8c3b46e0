// The forward pass's structural guarantees on small random models: the same logits whether
// a sequence is fed whole, in chunks or token by token; alone or batched with others at
// other stages; with 1 or 2 threads; while sliding-window blocks are released.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "base/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/cpu_kernels.h"
#include "kv/sequence_kv.h"
#include "models/model.h"
#include "quant/quant.h"
#include "threading/thread_pool.h"
#include "tiny_model.h"

namespace sluice {
namespace {

using models::ForwardBatch;
using models::LogitsWanted;
using models::SeqSlice;

struct Loaded {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<models::Model> model;
};

Loaded load(const test::TinyConfig& c, int threads = 2) {
  Loaded l;
  l.bytes = test::make_tiny_gguf(c);
  l.file = gguf::GgufFile::parse(l.bytes, "tiny-" + c.arch);
  l.pool = std::make_unique<ThreadPool>(threads);
  models::LoadOptions lo;
  lo.pool = l.pool.get();
  l.model = models::load_model(*l.file, lo);
  return l;
}

std::unique_ptr<KvCache> make_cache(const models::Model& m, int32_t blocks, KvType t = KvType::F32) {
  const auto& groups = m.spec().kv_groups;
  return std::make_unique<KvCache>(groups, 4, std::vector<int32_t>(groups.size(), blocks), t);
}

std::vector<int32_t> random_tokens(int n, int vocab, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int32_t> t(n);
  for (int& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// A sequence fed in steps of the given sizes; returns logits of every position [n × V].
// Sliding blocks that left the window are released before each step.
std::vector<float> run_chunked(models::Model& m, KvCache& kv, const std::vector<int32_t>& toks,
                               const std::vector<int>& steps) {
  const int64_t V = m.spec().n_vocab;
  SequenceKv seq(kv);
  std::vector<float> all;
  size_t pos = 0;
  for (size_t s = 0; pos < toks.size(); ++s) {
    const size_t n = std::min<size_t>(steps[s % steps.size()], toks.size() - pos);
    seq.release_outside_window(static_cast<int32_t>(pos));
    EXPECT_TRUE(seq.reserve(static_cast<int32_t>(pos + n)));
    ForwardBatch b;
    SeqSlice sl;
    sl.tokens = {toks.data() + pos, n};
    sl.pos0 = static_cast<int32_t>(pos);
    for (int g = 0; g < kv.n_groups(); ++g) sl.block_tables[g] = seq.table(g);
    sl.logits = LogitsWanted::kAll;
    b.seqs.push_back(sl);
    std::vector<float> out(n * V);
    m.forward(b, kv, out.data());
    all.insert(all.end(), out.begin(), out.end());
    pos += n;
  }
  return all;
}

// Architecture × weight type: f32 runs the f32 path, quantized types the int8-activation path.
struct Variant {
  std::string arch;
  DType type;
  bool k_eq_v = false;  // Gemma 4 31B-style global layers (V from the K projection)
  bool moe = false;     // Gemma 4 26B-A4B-style: mixture-of-experts FFN, per-layer KV heads
};

class Forward : public ::testing::TestWithParam<Variant> {
 protected:
  test::TinyConfig config() const {
    test::TinyConfig c;
    c.arch = GetParam().arch;
    c.matrix_type = GetParam().type;
    c.k_eq_v = GetParam().k_eq_v;
    return GetParam().moe ? test::tiny_moe_config(c) : c;
  }
};

TEST_P(Forward, WholeChunkedAndTokenByTokenAgreeBitwise) {
  test::TinyConfig c = config();
  Loaded l = load(c);
  auto kv = make_cache(*l.model, 64);
  const auto toks = random_tokens(3 * c.window + 5, c.n_vocab, 7);  // crosses the window 3×
  const auto whole = run_chunked(*l.model, *kv, toks, {1000});
  const auto chunks = run_chunked(*l.model, *kv, toks, {5, 3, 7});
  const auto single = run_chunked(*l.model, *kv, toks, {1});
  ASSERT_EQ(whole.size(), toks.size() * c.n_vocab);
  EXPECT_EQ(whole, chunks);
  EXPECT_EQ(whole, single);
  for (int g = 0; g < kv->n_groups(); ++g) EXPECT_EQ(kv->pool(g).n_used(), 0) << "blocks leaked";
  float mx = 0;
  for (float v : whole) mx = std::max(mx, std::fabs(v));
  EXPECT_GT(mx, 0.1f);  // not all zeros
  if (c.arch == "gemma4") {
    EXPECT_LE(mx, c.softcap);  // softcapped
  }
}

TEST_P(Forward, BatchOfSequencesAtDifferentStagesMatchesEachAlone) {
  test::TinyConfig c = config();
  Loaded l = load(c);
  const int64_t V = c.n_vocab;
  auto kv = make_cache(*l.model, 96);
  // Four sequences of different lengths; each has its own step schedule, and the batch at
  // step k holds every sequence's k-th step (prefill chunks mixed with decodes).
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(29, V, 1), random_tokens(5, V, 2),
                                                  random_tokens(17, V, 3), random_tokens(40, V, 4)};
  const std::vector<std::vector<int>> sched = {{12, 1, 1, 6, 1}, {2, 1}, {1, 9, 1}, {20, 1, 3}};
  std::vector<std::vector<float>> alone;
  for (const auto& s : seqs) alone.push_back(run_chunked(*l.model, *kv, s, {1000}));

  std::vector<std::unique_ptr<SequenceKv>> st;
  std::vector<size_t> pos(seqs.size(), 0);
  std::vector<std::vector<float>> batched(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) st.push_back(std::make_unique<SequenceKv>(*kv));
  for (int step = 0;; ++step) {
    ForwardBatch b;
    std::vector<size_t> who, len;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (pos[i] == seqs[i].size()) continue;
      const auto& sc = sched[i];
      const size_t n = std::min<size_t>(sc[std::min<size_t>(step, sc.size() - 1)], seqs[i].size() - pos[i]);
      st[i]->release_outside_window(static_cast<int32_t>(pos[i]));
      ASSERT_TRUE(st[i]->reserve(static_cast<int32_t>(pos[i] + n)));
      SeqSlice sl;
      sl.tokens = {seqs[i].data() + pos[i], n};
      sl.pos0 = static_cast<int32_t>(pos[i]);
      for (int g = 0; g < kv->n_groups(); ++g) sl.block_tables[g] = st[i]->table(g);
      sl.logits = LogitsWanted::kAll;
      b.seqs.push_back(sl);
      who.push_back(i);
      len.push_back(n);
    }
    if (b.seqs.empty()) break;
    std::vector<float> out(b.n_logit_rows() * V);
    l.model->forward(b, *kv, out.data());
    size_t off = 0;
    for (size_t k = 0; k < who.size(); ++k) {
      batched[who[k]].insert(batched[who[k]].end(), out.begin() + off, out.begin() + off + len[k] * V);
      off += len[k] * V;
      pos[who[k]] += len[k];
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(batched[i], alone[i]) << "sequence " << i;
  st.clear();
  for (int g = 0; g < kv->n_groups(); ++g) EXPECT_EQ(kv->pool(g).n_used(), 0);
}

TEST_P(Forward, ThreadCountDoesNotChangeResults) {
  test::TinyConfig c = config();
  const auto toks = random_tokens(20, c.n_vocab, 9);
  Loaded one = load(c, 1), two = load(c, 2);
  auto kv1 = make_cache(*one.model, 32), kv2 = make_cache(*two.model, 32);
  EXPECT_EQ(run_chunked(*one.model, *kv1, toks, {6}), run_chunked(*two.model, *kv2, toks, {6}));
}

// Decodes deep enough that the global layers' keys span several attention chunks, so two
// threads split each step's chunks between them (and merge their states): still bitwise the
// one-thread result.
TEST_P(Forward, ThreadCountDoesNotChangeDeepDecodes) {
  test::TinyConfig c = config();
  const auto toks = random_tokens(300, c.n_vocab, 10);
  Loaded one = load(c, 1), two = load(c, 2);
  auto kv1 = make_cache(*one.model, 320), kv2 = make_cache(*two.model, 320);
  std::vector<int> steps(21, 1);  // a prefill of 280, then 20 decodes
  steps[0] = 280;
  EXPECT_EQ(run_chunked(*one.model, *kv1, toks, steps), run_chunked(*two.model, *kv2, toks, steps));
}

// On the f32 path (with int8 activations a random tiny model amplifies any perturbation, as
// codes flip, so "close" would mean nothing there).
TEST(ForwardKv, LowPrecisionKvStaysClose) {
  for (const char* arch : {"gemma4", "gemma3"}) {
    test::TinyConfig c;
    c.arch = arch;
    Loaded l = load(c);
    const auto toks = random_tokens(20, c.n_vocab, 11);
    auto f32 = make_cache(*l.model, 32, KvType::F32);
    const auto ref = run_chunked(*l.model, *f32, toks, {4});
    for (KvType t : {KvType::BF16, KvType::F16}) {
      auto kv = make_cache(*l.model, 32, t);
      const auto got = run_chunked(*l.model, *kv, toks, {4});
      float mx = 0, diff = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        mx = std::max(mx, std::fabs(ref[i]));
        diff = std::max(diff, std::fabs(ref[i] - got[i]));
      }
      // Random tiny models have sharp attention (scale 1, random norms), so 16-bit K/V moves
      // logits by a few percent; the point is that the option works and stays in range.
      EXPECT_GT(diff, 0.0f) << arch << " " << kv_type_name(t) << " should round";
      EXPECT_LT(diff / mx, 0.25f) << arch << " " << kv_type_name(t);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Arch, Forward,
    ::testing::Values(Variant{"gemma4", DType::F32}, Variant{"gemma3", DType::F32}, Variant{"gemma4", DType::Q4_0},
                      Variant{"gemma3", DType::Q8_0}, Variant{"gemma4", DType::Q8_0, true},
                      Variant{"gemma4", DType::F32, false, true}, Variant{"gemma4", DType::Q4_0, false, true}),
    [](const auto& p) {
      const std::string t(dtype_name(p.param.type));
      return p.param.arch + "_" + t + (p.param.k_eq_v ? "_k_eq_v" : "") + (p.param.moe ? "_moe" : "");
    });

// The same file on every ISA set this CPU runs: bitwise identical logits (the optimized
// kernels compute exactly what the scalar references do), for every weight format.
TEST(ForwardIsa, EveryIsaSetGivesTheScalarReferenceLogits) {
  struct Case {
    std::string arch;
    DType type;
    int n_embd, n_ff;
    bool moe = false;
  };
  const Case cases[] = {{"gemma4", DType::F32, 64, 128},
                        {"gemma4", DType::Q4_0, 64, 128},
                        {"gemma4", DType::Q8_0, 64, 128},
                        {"gemma4", DType::BF16, 64, 128},
                        {"gemma3", DType::Q5_0, 64, 128},
                        {"gemma3", DType::F16, 64, 128},
                        {"gemma4", DType::Q6_K, 256, 256},
                        // MoE: the experts in every format the dense FFN takes.
                        {"gemma4", DType::F32, 64, 128, true},
                        {"gemma4", DType::Q4_0, 64, 128, true},
                        {"gemma4", DType::Q8_0, 64, 128, true},
                        {"gemma4", DType::BF16, 64, 128, true},
                        {"gemma4", DType::Q4_K, 256, 256, true},
                        {"gemma4", DType::Q6_K, 256, 256, true}};
  const auto sets = kernels::runnable_cpu_kernels();
  for (const Case& cs : cases) {
    test::TinyConfig c;
    c.arch = cs.arch;
    c.matrix_type = cs.type;
    c.n_embd = cs.n_embd;
    c.n_ff = cs.n_ff;
    if (cs.moe) {
      c = test::tiny_moe_config(c);
      c.n_ff_exp = cs.n_ff;  // K-quant experts need rows of 256 in their down matrix
      c.n_layer = 5;         // [S,S,S,S,F]: every layer kind once (the qemu ARM suite runs this)
    }
    const auto bytes = test::make_tiny_gguf(c);
    auto file = gguf::GgufFile::parse(bytes, "tiny");
    const auto toks = random_tokens(3 * c.window + 3, c.n_vocab, 21);
    std::vector<float> ref;
    for (const kernels::CpuKernels* k : sets) {
      ThreadPool pool(2);
      models::LoadOptions lo;
      lo.pool = &pool;
      lo.isa = k;
      auto m = models::load_model(*file, lo);
      auto kv = make_cache(*m, 64);
      const auto got = run_chunked(*m, *kv, toks, {7, 1, 1, 3});
      if (ref.empty()) {
        ref = got;
        continue;
      }
      EXPECT_EQ(got, ref) << cs.arch << " " << dtype_name(cs.type) << ": " << k->isa << " differs from "
                          << sets[0]->isa;
    }
  }
  EXPECT_GE(sets.size(), 1u);
}

// The same file with every expert stack (`*_exps.weight`) dequantized to F32, all else as is.
std::vector<uint8_t> experts_as_f32(const gguf::GgufFile& f) {
  gguf::GgufWriter w;
  for (const auto& kv : f.kvs()) w.add_kv(kv);
  for (const auto& t : f.tensors()) {
    std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (t.name.find("_exps.weight") == std::string::npos) {
      w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
      continue;
    }
    std::vector<uint8_t> out(t.n_elements() * 4);
    quant::dequantize_ref(t.type, t.data, reinterpret_cast<float*>(out.data()), static_cast<int64_t>(t.n_elements()));
    w.add_tensor(t.name, DType::F32, ne, std::move(out));
  }
  return w.to_bytes();
}

// Experts in each weight format compute what their dequantized values do: the file against
// itself with the expert stacks turned into F32 (the only difference left is the rounding of
// the experts' activations to the formats' int8 blocks; none for BF16). The ISA test above shows every format
// bit-identical to its scalar reference; this shows the reference itself is right for experts.
TEST(ForwardMoe, ExpertsInEveryFormatMatchTheirDequantizedValues) {
  for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::BF16}) {
    test::TinyConfig c = test::tiny_moe_config();
    c.matrix_type = type;
    c.n_layer = 5;
    // Every token takes all 4 experts: with a real top-k, activation rounding that flips one
    // close routing choice moves the logits by far more than the rounding itself.
    c.n_expert = c.n_expert_used = 4;
    c.n_embd = c.n_ff = c.n_ff_exp = 256;  // K-quant blocks
    const auto bytes = test::make_tiny_gguf(c);
    auto file = gguf::GgufFile::parse(bytes, "tiny-moe");
    const auto f32_bytes = experts_as_f32(*file);
    auto f32_file = gguf::GgufFile::parse(f32_bytes, "tiny-moe-f32-experts");
    const auto toks = random_tokens(12, c.n_vocab, 5);
    std::vector<float> got, ref;
    for (auto [f, out] : {std::pair{file.get(), &got}, std::pair{f32_file.get(), &ref}}) {
      ThreadPool pool(2);
      models::LoadOptions lo;
      lo.pool = &pool;
      auto m = models::load_model(*f, lo);
      auto kv = make_cache(*m, 64);
      *out = run_chunked(*m, *kv, toks, {12});
    }
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      d2 += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
      r2 += double(ref[i]) * ref[i];
    }
    std::printf("experts %-5s vs their f32 values: nmse %.3g\n", std::string(dtype_name(type)).c_str(), d2 / r2);
    // Measured: nmse 2-4e-4 (Q4_0, Q8_0), 1e-8 (Q4_K), 6-8e-4 (Q6_K). Both files go through the
    // same expert slicing, so this checks the formats, not the slicing (the golden fixtures check
    // that against transformers). BF16 experts read f32 activations as F32 ones do: the same bits.
    EXPECT_LT(d2 / r2, type == DType::BF16 ? 1e-30 : 2e-3) << dtype_name(type);
  }
}

// Layers after the last KV-owning one (Gemma 4's KV-shared layers) write no cache, so a
// prefill runs them only for the tokens whose logits are wanted — with the same result.
TEST(Forward, KvSharedLayersRunOnlyForTokensWithLogits) {
  test::TinyConfig c;  // 10 layers, the last 4 share K/V
  Loaded l = load(c);
  const auto toks = random_tokens(20, c.n_vocab, 5);
  const int64_t V = c.n_vocab;
  auto prefill = [&](LogitsWanted want, models::StepProfile* prof) {
    auto kv = make_cache(*l.model, 16);
    SequenceKv seq(*kv);
    EXPECT_TRUE(seq.reserve(20));
    ForwardBatch b;
    SeqSlice sl;
    sl.tokens = toks;
    for (int g = 0; g < kv->n_groups(); ++g) sl.block_tables[g] = seq.table(g);
    sl.logits = want;
    b.seqs.push_back(sl);
    std::vector<float> out(b.n_logit_rows() * V);
    l.model->set_profile(prof);
    l.model->forward(b, *kv, out.data());
    l.model->set_profile(nullptr);
    return out;
  };
  models::StepProfile last, all;
  const auto one = prefill(LogitsWanted::kLast, &last);
  const auto every = prefill(LogitsWanted::kAll, &all);
  EXPECT_EQ(last.layer_tokens, 6 * 20 + 4 * 1);
  EXPECT_EQ(all.layer_tokens, 10 * 20);
  ASSERT_EQ(one.size(), static_cast<size_t>(V));
  EXPECT_TRUE(std::equal(one.begin(), one.end(), every.end() - V)) << "skipping rows must not change the last row";
}

// The weights are held once (docs/architecture.md, "One copy of the weights"): a tied table's
// embedding rows come from the packed lm_head, an untied file's from the file's rows, and a
// file opened from disk has the pages of what it repacks released as it loads. None of it
// changes a bit of a logit: a tied file, the same values untied (output.weight a copy of
// token_embd), each parsed in memory or opened from disk, for a quantized and a float table.
TEST(Forward, OneCopyLoadingChangesNoLogit) {
  const auto dir = std::filesystem::temp_directory_path() / "sluice_one_copy_test";
  std::filesystem::create_directories(dir);
  const std::vector<int32_t> toks = random_tokens(24, 96, 11);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::F32}) {
    std::vector<float> want;
    for (bool untied : {false, true})
      for (bool from_disk : {false, true}) {
        test::TinyConfig c;
        c.matrix_type = t;
        c.output_copy = untied;
        const std::vector<uint8_t> bytes = test::make_tiny_gguf(c);
        const std::string path = (dir / "m.gguf").string();
        if (from_disk)
          std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        const auto f = from_disk ? gguf::GgufFile::open(path) : gguf::GgufFile::parse(bytes, "tiny");
        ASSERT_EQ(f->find_tensor("output.weight") != nullptr, untied);
        ThreadPool pool(2);
        models::LoadOptions lo;
        lo.pool = &pool;
        const auto m = models::load_model(*f, lo);
        auto kv = make_cache(*m, 16);
        const std::vector<float> got = run_chunked(*m, *kv, toks, {5});
        if (want.empty()) want = got;
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * got.size()), 0)
            << dtype_name(t) << (untied ? " untied" : " tied") << (from_disk ? " from disk" : " parsed");
      }
  }
  std::filesystem::remove_all(dir);
}

TEST(Forward, RejectsBadBatches) {
  test::TinyConfig c;
  Loaded l = load(c);
  auto kv = make_cache(*l.model, 8);
  SequenceKv seq(*kv);
  ASSERT_TRUE(seq.reserve(4));
  std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6};
  ForwardBatch b;
  SeqSlice sl;
  sl.tokens = toks;  // 6 tokens, only 4 positions backed
  for (int g = 0; g < kv->n_groups(); ++g) sl.block_tables[g] = seq.table(g);
  b.seqs.push_back(sl);
  std::vector<float> out(c.n_vocab);
  EXPECT_THROW(l.model->forward(b, *kv, out.data()), Error);
  toks = {1, 2, c.n_vocab};  // id outside the vocabulary
  b.seqs[0].tokens = toks;
  EXPECT_THROW(l.model->forward(b, *kv, out.data()), Error);
}

}  // namespace
}  // namespace sluice
