// Gemma 4's assistant (src/models/gemma4/assistant.h) against transformers' draft steps
// (python/make_assistant_golden.py): the tiny Gemma 4 target runs a prompt in sluice's paged
// cache and exports its post-norm hidden state; the tiny assistant then drafts from it over
// the target's K/V, chaining its own h'. Checked per step: the target's hidden, the full head's
// logits and h' within 1e-4 of max|ref|, the centroid head's cluster set (a difference only at
// a near-tie of the k-th and (k+1)-th cluster), its candidate logits and mask, and the draft
// tokens; a batch of both cases equals the rows run alone, bit for bit. A perturbed weight
// (one row of one layer's q, ×1.01) must break the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <set>

#include "base/error.h"
#include "gguf/writer.h"
#include "golden_util.h"
#include "kv/sequence_kv.h"
#include "models/gemma4/assistant.h"
#include "threading/thread_pool.h"

namespace sluice {
namespace {

using nlohmann::json;
constexpr double kRelTol = 1e-4;

double rel_diff(const float* a, const float* ref, size_t n) {
  double mx = 0, d = 0;
  for (size_t i = 0; i < n; ++i) {
    mx = std::max(mx, std::fabs(double(ref[i])));
    d = std::max(d, std::fabs(double(a[i]) - ref[i]));
  }
  return d / mx;
}

struct Case {
  std::string name;
  std::vector<int32_t> prompt, tokens;  // tokens: t, d1 .. dK
};

// The target and its KV for every case, and the loaded assistant.
struct Rig {
  ThreadPool pool{2};
  std::unique_ptr<gguf::GgufFile> tf;
  std::unique_ptr<models::Model> target;
  std::unique_ptr<KvCache> kv;
  std::vector<std::unique_ptr<SequenceKv>> seqs;
  std::vector<std::vector<float>> hidden;  // per case: the target's exported hidden state

  Rig(const std::vector<Case>& cases) {
    tf = golden::open_fixture("tiny-gemma4.f32.gguf");
    models::LoadOptions lo;
    lo.pool = &pool;
    target = models::load_model(*tf, lo);
    const auto& groups = target->spec().kv_groups;
    kv = std::make_unique<KvCache>(groups, 16, std::vector<int32_t>(groups.size(), 32), KvType::F32);
    const int64_t d = target->spec().n_embd, V = target->spec().n_vocab;
    for (const Case& c : cases) {
      seqs.push_back(std::make_unique<SequenceKv>(*kv));
      EXPECT_TRUE(seqs.back()->reserve(static_cast<int32_t>(c.prompt.size())));
      models::ForwardBatch b;
      models::SeqSlice s;
      s.tokens = c.prompt;
      for (int g = 0; g < kv->n_groups(); ++g) s.block_tables[g] = seqs.back()->table(g);
      b.seqs.push_back(s);
      hidden.emplace_back(static_cast<size_t>(d));
      b.hidden = hidden.back().data();
      std::vector<float> logits(static_cast<size_t>(V));
      target->forward(b, *kv, logits.data());
      EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), c.tokens[0]) << c.name;
    }
  }
  models::DraftRow row(size_t ci, int32_t token, const float* h, const Case& c) const {
    models::DraftRow r;
    r.token = token;
    r.hidden = h;
    r.pos = static_cast<int32_t>(c.prompt.size());
    for (int g = 0; g < kv->n_groups(); ++g) r.block_tables[g] = seqs[ci]->table(g);
    return r;
  }
};

std::vector<Case> load_cases(const json& m, const json& target) {
  std::vector<Case> out;
  const auto ids = target["token_ids"].get<std::vector<int32_t>>();
  for (const json& c : m["cases"]) {
    const auto n = c["n_prompt"].get<size_t>();
    out.push_back(
        {c["name"].get<std::string>(), {ids.begin(), ids.begin() + n}, c["tokens"].get<std::vector<int32_t>>()});
  }
  return out;
}

std::unique_ptr<models::Gemma4Assistant> load_assistant(const gguf::GgufFile& f, Rig& rig) {
  models::LoadOptions lo;
  lo.pool = &rig.pool;
  auto a = models::load_gemma4_assistant(f, lo);
  a->bind_target(*rig.tf, rig.target->spec());
  return a;
}

// The worst relative difference over every checked array of every step (and, through
// EXPECTs when `strict`, the set and token checks).
double compare_all(models::Gemma4Assistant& a, Rig& rig, const std::vector<Case>& cases,
                   std::map<std::string, std::vector<float>>& ref, bool strict) {
  const auto& sp = a.spec();
  const int64_t V = sp.n_vocab, dt = sp.n_embd_target, C = sp.n_centroids, K = sp.centroid_top_k;
  double worst = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    worst = std::max(worst, rel_diff(rig.hidden[ci].data(), ref[c.name + ".target_hidden"].data(), dt));
    std::vector<float> h = rig.hidden[ci];
    for (size_t k = 0; k + 1 < c.tokens.size(); ++k) {
      const models::DraftRow row = rig.row(ci, c.tokens[k], h.data(), c);
      models::DraftStepOut full, cen;
      a.step({&row, 1}, *rig.kv, models::DraftHead::kFull, full);
      a.step({&row, 1}, *rig.kv, models::DraftHead::kCentroid, cen);
      const std::string at = c.name + " step " + std::to_string(k);
      worst = std::max(worst, rel_diff(full.logits.data(), &ref[c.name + ".full_logits"][k * V], V));
      worst = std::max(worst, rel_diff(full.next_hidden.data(), &ref[c.name + ".next_hidden"][k * dt], dt));
      EXPECT_EQ(full.next_hidden, cen.next_hidden) << at;
      const float* rs = &ref[c.name + ".centroid_scores"][k * C];
      worst = std::max(worst, rel_diff(cen.centroid_scores.data(), rs, C));
      // Cluster sets: equal, or differing only where the reference's k-th/(k+1)-th are a near-tie.
      std::vector<int32_t> order(C);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return rs[x] > rs[y]; });
      const float* rl = &ref[c.name + ".centroid_logits"][k * V];
      std::set<int32_t> got_ids(cen.cand_ids.begin(), cen.cand_ids.end());
      std::set<int32_t> want_ids;
      for (int64_t j = 0; j < V; ++j)
        if (rl[j] != *std::min_element(rl, rl + V)) want_ids.insert(static_cast<int32_t>(j));
      const bool near_tie = std::fabs(rs[order[K - 1]] - rs[order[K]]) <= 1e-4 * std::fabs(rs[order[0]]);
      if (strict && !near_tie) EXPECT_EQ(got_ids, want_ids) << at << ": candidate sets differ";
      if (got_ids == want_ids) {
        const std::vector<float> mine = cen.expand(0, static_cast<int32_t>(V));
        worst = std::max(worst, rel_diff(mine.data(), rl, V));
        if (strict) EXPECT_EQ(cen.argmax[0], c.tokens[k + 1]) << at;
      }
      h = full.next_hidden;
    }
  }
  return worst;
}

struct AssistantGolden : ::testing::Test {
  json man = golden::manifest();
  json m = man["assistants"]["tiny-gemma4-assistant"];
  std::vector<Case> cases = load_cases(m, man["models"][m["target"].get<std::string>()]);
  std::map<std::string, std::vector<float>> ref = golden::read_taps(golden::kDir +
                                                                    m["variants"]["f32"]["steps"].get<std::string>());
};

TEST_F(AssistantGolden, DraftStepsMatchTransformers) {
  Rig rig(cases);
  auto af = models::open_gemma4_assistant_file(golden::kDir + m["variants"]["f32"]["gguf"].get<std::string>());
  auto a = load_assistant(*af, rig);
  EXPECT_EQ(a->spec().n_centroids, 16);
  EXPECT_EQ(a->spec().centroid_top_k, 4);
  const double worst = compare_all(*a, rig, cases, ref, true);
  std::printf("assistant: worst max|Δ|/max|ref| %.3g over hidden, logits, h', centroid scores\n", worst);
  EXPECT_LE(worst, kRelTol);
}

TEST_F(AssistantGolden, BatchEqualsRowsAlone) {
  Rig rig(cases);
  auto af = models::open_gemma4_assistant_file(golden::kDir + m["variants"]["f32"]["gguf"].get<std::string>());
  auto a = load_assistant(*af, rig);
  for (models::DraftHead head : {models::DraftHead::kFull, models::DraftHead::kCentroid}) {
    std::vector<models::DraftRow> rows;
    std::vector<models::DraftStepOut> alone(cases.size());
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      rows.push_back(rig.row(ci, cases[ci].tokens[0], rig.hidden[ci].data(), cases[ci]));
      a->step({&rows.back(), 1}, *rig.kv, head, alone[ci]);
    }
    models::DraftStepOut both;
    a->step(rows, *rig.kv, head, both);
    const int64_t V = a->spec().n_vocab, dt = a->spec().n_embd_target;
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      EXPECT_EQ(both.argmax[ci], alone[ci].argmax[0]);
      EXPECT_EQ(both.expand(static_cast<int64_t>(ci), static_cast<int32_t>(V)),
                alone[ci].expand(0, static_cast<int32_t>(V)));
      EXPECT_TRUE(
          std::equal(alone[ci].next_hidden.begin(), alone[ci].next_hidden.end(), both.next_hidden.begin() + ci * dt));
    }
  }
}

TEST_F(AssistantGolden, PerturbedWeightIsCaught) {
  Rig rig(cases);
  const std::string path = golden::kDir + m["variants"]["f32"]["gguf"].get<std::string>();
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gguf::ReadOptions ro;
  ro.allow_unsupported_types = true;
  auto f = gguf::GgufFile::parse(bytes, path, ro);
  const gguf::TensorInfo& t = f->tensor("blk.1.attn_q.weight");
  float* row = reinterpret_cast<float*>(const_cast<uint8_t*>(t.data)) + 3 * t.ne[0];
  for (uint64_t i = 0; i < t.ne[0]; ++i) row[i] *= 1.01f;
  auto a = load_assistant(*f, rig);
  const double worst = compare_all(*a, rig, cases, ref, false);
  std::printf("assistant with blk.1.attn_q row 3 ×1.01: worst %.3g\n", worst);
  EXPECT_GT(worst, kRelTol);
}

// The fixture rewritten with the names forks use (gemma4.md §5): arch gemma4_assistant (keys
// renamed with it), mtp.* / mtp_*_proj tensors. It must load and draft bit for bit the same.
TEST_F(AssistantGolden, AliasNamesLoadTheSameModel) {
  Rig rig(cases);
  const std::string path = golden::kDir + m["variants"]["f32"]["gguf"].get<std::string>();
  auto orig = models::open_gemma4_assistant_file(path);
  const std::map<std::string, std::string> alias = {{"nextn.pre_projection.weight", "mtp.pre_projection.weight"},
                                                    {"nextn.post_projection.weight", "mtp_post_proj.weight"},
                                                    {"masked_embd_centroids.weight", "mtp.centroids.weight"},
                                                    {"masked_embd_ordering", "mtp.token_ordering"}};
  gguf::GgufWriter w;
  std::vector<std::string> keys;  // the renamed keys outlive add_kv's view
  for (const gguf::KeyValue& kv : orig->kvs()) {
    std::string k(kv.key);
    if (k.rfind("gemma4-assistant.", 0) == 0) k = "gemma4_assistant." + k.substr(17);
    if (k == "general.architecture") {
      w.add_string(k, "gemma4_assistant");
      continue;
    }
    keys.push_back(k);
    gguf::KeyValue c = kv;
    c.key = keys.back();
    w.add_kv(c);
  }
  for (const gguf::TensorInfo& t : orig->tensors()) {
    const auto it = alias.find(t.name);
    w.add_tensor(it == alias.end() ? t.name : it->second, t.type, {t.ne.begin(), t.ne.begin() + t.n_dims},
                 std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  const std::vector<uint8_t> bytes = w.to_bytes();
  gguf::ReadOptions ro;
  ro.allow_unsupported_types = true;
  auto f = gguf::GgufFile::parse(bytes, "alias.gguf", ro);
  EXPECT_EQ(f->find_tensor("nextn.pre_projection.weight"), nullptr);
  auto a = load_assistant(*f, rig), b = load_assistant(*orig, rig);
  const models::DraftRow row = rig.row(1, cases[1].tokens[0], rig.hidden[1].data(), cases[1]);
  models::DraftStepOut oa, ob;
  a->step({&row, 1}, *rig.kv, models::DraftHead::kCentroid, oa);
  b->step({&row, 1}, *rig.kv, models::DraftHead::kCentroid, ob);
  EXPECT_EQ(oa.cand_ids, ob.cand_ids);
  EXPECT_EQ(oa.cand_logits, ob.cand_logits);
  EXPECT_EQ(oa.next_hidden, ob.next_hidden);
}

TEST_F(AssistantGolden, MismatchedTargetIsAnError) {
  ThreadPool pool(1);
  models::LoadOptions lo;
  lo.pool = &pool;
  auto af = models::open_gemma4_assistant_file(golden::kDir + m["variants"]["f32"]["gguf"].get<std::string>());
  auto a = models::load_gemma4_assistant(*af, lo);
  auto g3 = golden::open_fixture("tiny-gemma3.f32.gguf");
  auto t = models::load_model(*g3, lo);
  models::ModelSpec s = t->spec();
  s.n_embd = 48;
  try {
    a->bind_target(*g3, s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("48"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(models::load_gemma4_assistant(*g3, lo), Error);  // not an assistant
}

}  // namespace
}  // namespace sluice
