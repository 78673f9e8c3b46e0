// `--spec assistant` in the engine (AssistantProposer, EngineCore's BatchProposer) on
// the tiny Gemma 4 fixture and its tiny assistant (tests/data/golden, `make fixtures`):
//  * plumbing: every round's proposal equals a reference computed from scratch — the target
//    prefilled alone on the sequence's computed tokens (its exported post-norm hidden state),
//    then the assistant's K steps at the constant position — so the hidden row taken from a
//    verification step, the position and the block tables are the right ones; the first
//    round's drafts are transformers' (the golden tokens);
//  * lossless: greedy output with speculation is the plain output, bit for bit, for K in
//    {1, 3, 8}, alone with a prompt longer than the sliding window and among 8 concurrent
//    sequences (shared prefixes: prefix-cache hits), full and centroid heads; pools end empty.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "engine/assistant_proposer.h"
#include "engine/engine_core.h"
#include "engine_drive.h"
#include "gguf/reader.h"
#include "kv/sequence_kv.h"
#include "threading/thread_pool.h"

namespace sluice::engine {
namespace {

const std::string kDir = std::string(SLUICE_SOURCE_DIR) + "/tests/data/golden/";

struct Models {
  ThreadPool pool{2};
  std::unique_ptr<gguf::GgufFile> tf, af;
  std::unique_ptr<models::Model> target;
  std::unique_ptr<models::Gemma4Assistant> asst;
  nlohmann::json man;
  Models() {
    std::ifstream in(kDir + "manifest.json");
    man = nlohmann::json::parse(in);
    tf = gguf::GgufFile::open(kDir + "tiny-gemma4.f32.gguf");
    af = models::open_gemma4_assistant_file(kDir + "tiny-gemma4-assistant.f32.gguf");
    models::LoadOptions lo;
    lo.pool = &pool;
    target = models::load_model(*tf, lo);
    asst = models::load_gemma4_assistant(*af, lo);
    asst->bind_target(*tf, target->spec());
  }
  std::vector<int32_t> ids() const { return man["models"]["tiny-gemma4"]["token_ids"].get<std::vector<int32_t>>(); }
};

Models& models_once() {
  static Models m;
  return m;
}

// The target's post-norm hidden state at position n − 1 of `tokens`, computing positions
// 0 .. n−1 into seq's blocks of kv.
std::vector<float> prefill_hidden(Models& m, KvCache& kv, SequenceKv& seq, std::span<const int32_t> tokens, int32_t n) {
  EXPECT_TRUE(seq.reserve(n));
  models::ForwardBatch b;
  models::SeqSlice s;
  s.tokens = tokens.first(static_cast<size_t>(n));
  for (int g = 0; g < kv.n_groups(); ++g) s.block_tables[g] = seq.table(g);
  b.seqs.push_back(s);
  std::vector<float> h(static_cast<size_t>(m.target->spec().n_embd)), logits(m.target->spec().n_vocab);
  b.hidden = h.data();
  m.target->forward(b, kv, logits.data());
  return h;
}

// The same from a fresh cache.
std::vector<float> target_hidden(Models& m, std::span<const int32_t> tokens, int32_t n) {
  const auto& groups = m.target->spec().kv_groups;
  KvCache kv(groups, 16, std::vector<int32_t>(groups.size(), 64), KvType::F32);
  SequenceKv seq(kv);
  return prefill_hidden(m, kv, seq, tokens, n);
}

// The drafts for a sequence whose first n tokens are computed and whose token n is sampled,
// from scratch: a fresh cache, the target's hidden state at n − 1, k assistant steps.
// The probability the head's distribution gives its draft, from the full-vocabulary logits
// (softmax of DraftStepOut::expand, in double), checked against argmax_probability.
double softmax_of_argmax(const models::DraftStepOut& o, int32_t n_vocab) {
  const std::vector<float> l = o.expand(0, n_vocab);
  const double best = *std::max_element(l.begin(), l.end());
  double sum = 0;
  for (float v : l) sum += std::exp(static_cast<double>(v) - best);
  const double p = std::exp(static_cast<double>(l[static_cast<size_t>(o.argmax[0])]) - best) / sum;
  EXPECT_NEAR(o.argmax_probability(0, n_vocab), p, 1e-9 * p);
  return p;
}

std::vector<int32_t> reference_drafts(Models& m, std::span<const int32_t> tokens, int32_t n, int32_t k,
                                      models::DraftHead head, std::vector<double>* probs = nullptr) {
  const auto& groups = m.target->spec().kv_groups;
  KvCache kv(groups, 16, std::vector<int32_t>(groups.size(), 64), KvType::F32);
  SequenceKv seq(kv);
  std::vector<float> h = prefill_hidden(m, kv, seq, tokens, n);
  models::DraftRow r;
  r.token = tokens[n];
  r.hidden = h.data();
  r.pos = n;
  for (int g = 0; g < kv.n_groups(); ++g) r.block_tables[g] = seq.table(g);
  std::vector<int32_t> out;
  models::DraftStepOut o;
  if (probs) probs->clear();
  for (int32_t i = 0; i < k; ++i) {
    m.asst->step({&r, 1}, kv, head, o);
    out.push_back(o.argmax[0]);
    if (probs) probs->push_back(softmax_of_argmax(o, m.asst->spec().n_vocab));
    h = o.next_hidden;
    r.token = o.argmax[0];
    r.hidden = h.data();
  }
  return out;
}

// Called with each proposal of a round: the sequence (its final tokens, the draft position
// n_computed) and the drafts.
using ProposalCheck = std::function<void(const Sequence&, std::span<const int32_t>)>;

struct Outcome {
  std::map<RequestId, std::vector<int32_t>> tokens;
  EngineStats stats;
  int64_t rounds_checked = 0;
};

// check_rounds: the first that many proposals are compared with reference_drafts.
Outcome run(const std::vector<EngineRequest>& reqs, int32_t k, models::DraftHead head, int check_rounds = 0,
            models::Gemma4Assistant* asst = nullptr, float p_min = 0.0f, const ProposalCheck& on_proposal = nullptr) {
  Models& m = models_once();
  const auto& groups = m.target->spec().kv_groups;
  KvCache kv(groups, 16, std::vector<int32_t>(groups.size(), 128), KvType::F32);
  AssistantProposer drafter(asst ? *asst : *m.asst, kv, head, p_min);
  Outcome r;
  const auto check = [&](const Sequence& s, std::span<const int32_t> drafts) {
    if (on_proposal) on_proposal(s, drafts);
    if (r.rounds_checked >= check_rounds) return;
    ++r.rounds_checked;
    EXPECT_EQ(std::vector<int32_t>(drafts.begin(), drafts.end()),
              reference_drafts(m, s.tokens, s.n_computed, static_cast<int32_t>(drafts.size()), head))
        << "request " << s.req.id << " at position " << s.n_computed;
  };
  EngineConfig cfg;
  cfg.sched = SchedulerConfig{8, 64, 512};
  cfg.sched.draft_max = k;
  if (k > 0) {
    cfg.spec = SpecMethod::kModel;
    cfg.model_proposer = &drafter;
  }
  {
    EngineCore core(*m.target, kv, cfg);
    // Each round's proposals, read from the sequences after the step that wrote them.
    std::set<std::pair<RequestId, int32_t>> seen;
    for (const EngineRequest& q : reqs) core.add(q);
    for (int i = 0; i < 20000 && core.has_work(); ++i) {
      for (const TokenOutput& o : core.step())
        if (o.token >= 0) r.tokens[o.id].push_back(o.token);
      for (const Sequence* s : core.scheduler().running())
        if (k > 0 && s->proposal.for_n_tokens == s->n_tokens() && seen.insert({s->req.id, s->n_tokens()}).second)
          check(*s, s->proposal.tokens);
    }
    EXPECT_FALSE(core.has_work());
    EXPECT_EQ(core.blocks().n_used_all(), 0) << "target blocks leaked";
    r.stats = core.stats();
  }
  return r;
}

TEST(AssistantEngine, ProposalsAreTheReferenceDrafts) {
  Models& m = models_once();
  const auto ids = m.ids();
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 40);
  const Outcome o = run({greedy_request(1, prompt, 24)}, 4, models::DraftHead::kCentroid, 1000);
  EXPECT_GT(o.rounds_checked, 3);
  // Round one from transformers: the golden "long" case drafts from the same prompt.
  for (const auto& c : m.man["assistants"]["tiny-gemma4-assistant"]["cases"])
    if (c["n_prompt"] == 40) {
      const auto want = c["tokens"].get<std::vector<int32_t>>();
      Models& mm = models_once();
      std::vector<int32_t> toks = prompt;
      toks.push_back(want[0]);
      EXPECT_EQ(reference_drafts(mm, toks, 40, 4, models::DraftHead::kCentroid),
                std::vector<int32_t>(want.begin() + 1, want.end()));
    }
}

std::vector<EngineRequest> eight(const std::vector<int32_t>& ids) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    // Shared prefixes of 16 (a block) for odd ids; prompts 9 .. 58 tokens.
    std::vector<int32_t> p(ids.begin() + (i % 2 ? 0 : 3 + i), ids.begin() + (i % 2 ? 16 : 3 + i) + 9 + 5 * i);
    reqs.push_back(greedy_request(static_cast<RequestId>(i + 1), p, 8 + i));
  }
  return reqs;
}

TEST(AssistantEngine, GreedyOutputIsThePlainOutput) {
  Models& m = models_once();
  const auto ids = m.ids();
  const std::vector<EngineRequest> alone = {greedy_request(1, std::vector<int32_t>(ids.begin(), ids.begin() + 40), 30)};
  const std::vector<EngineRequest> many = eight(ids);
  const Outcome plain_alone = run(alone, 0, models::DraftHead::kCentroid);
  const Outcome plain_many = run(many, 0, models::DraftHead::kCentroid);
  for (int32_t k : {1, 3, 8}) {
    const Outcome a = run(alone, k, models::DraftHead::kCentroid);
    EXPECT_EQ(a.tokens, plain_alone.tokens) << "alone, k=" << k;
    EXPECT_GT(a.stats.drafted_tokens, 0) << "k=" << k;
    const Outcome b = run(many, k, models::DraftHead::kCentroid);
    EXPECT_EQ(b.tokens, plain_many.tokens) << "8 sequences, k=" << k;
    EXPECT_GT(b.stats.drafted_tokens, 0) << "k=" << k;
    std::printf("k=%d: alone drafted %lld accepted %lld; eight drafted %lld accepted %lld\n", k,
                static_cast<long long>(a.stats.drafted_tokens), static_cast<long long>(a.stats.accepted_tokens),
                static_cast<long long>(b.stats.drafted_tokens), static_cast<long long>(b.stats.accepted_tokens));
  }
  EXPECT_EQ(run(many, 3, models::DraftHead::kFull).tokens, plain_many.tokens) << "full head";
}

// The real assistant's step with its drafts replaced by an oracle's: the plain greedy
// continuation of the sequence (found by its token at the row's position), wrong at every
// position divisible by 5, so rounds accept some drafts and reject the rest (KV rollback,
// the hidden row of an accepted draft starting the next round).
class OracleAssistant final : public models::Gemma4Assistant {
 public:
  OracleAssistant(models::Gemma4Assistant& inner, std::vector<std::vector<int32_t>> seqs)
      : inner_(inner), seqs_(std::move(seqs)) {}
  const models::AssistantSpec& spec() const override { return inner_.spec(); }
  void bind_target(const gguf::GgufFile& f, const models::ModelSpec& t) override { inner_.bind_target(f, t); }
  void step(std::span<const models::DraftRow> rows, KvCache& kv, models::DraftHead head,
            models::DraftStepOut& out) override {
    inner_.step(rows, kv, head, out);
    for (size_t r = 0; r < rows.size(); ++r) {
      auto& [pos, k] = round_[rows[r].block_tables[0].data()];
      k = pos == rows[r].pos ? k + 1 : 0;
      pos = rows[r].pos;
      const size_t at = static_cast<size_t>(pos + k);  // the input token's position
      for (const auto& s : seqs_)
        if (s.size() > at + 1 && s[at] == rows[r].token) {
          if (k == 0 && hidden_checks < 24) {
            // The round's h: the target's post-norm state at pos − 1, from whichever step
            // computed it (a plain decode, or the accepted row of a verification).
            const std::vector<float> want = target_hidden(models_once(), s, pos);
            EXPECT_TRUE(std::equal(want.begin(), want.end(), rows[r].hidden)) << "h at position " << pos;
            ++hidden_checks;
          }
          out.argmax[r] = (at + 1) % 5 == 0 ? (s[at + 1] + 1) % spec().n_vocab : s[at + 1];
          break;
        }
    }
  }

 private:
  models::Gemma4Assistant& inner_;
  std::vector<std::vector<int32_t>> seqs_;
  std::map<const BlockId*, std::pair<int32_t, int32_t>> round_;

 public:
  int hidden_checks = 0;  // per block table: (position, step)
};

TEST(AssistantEngine, AcceptedDraftsKeepTheOutputPlain) {
  Models& m = models_once();
  const auto ids = m.ids();
  const std::vector<EngineRequest> alone = {greedy_request(1, std::vector<int32_t>(ids.begin(), ids.begin() + 40), 30)};
  for (const auto& reqs : {alone, eight(ids)}) {
    const Outcome plain = run(reqs, 0, models::DraftHead::kCentroid);
    std::vector<std::vector<int32_t>> seqs;
    for (const EngineRequest& q : reqs) {
      seqs.push_back(q.prompt);
      const auto& out = plain.tokens.at(q.id);
      seqs.back().insert(seqs.back().end(), out.begin(), out.end());
    }
    for (int32_t k : {1, 3, 8}) {
      OracleAssistant oracle(*m.asst, seqs);
      const Outcome o = run(reqs, k, models::DraftHead::kCentroid, 0, &oracle);
      EXPECT_GT(oracle.hidden_checks, 3);
      EXPECT_EQ(o.tokens, plain.tokens) << reqs.size() << " sequences, k=" << k;
      EXPECT_GT(o.stats.accepted_tokens, 0) << "k=" << k;
      if (k > 1) EXPECT_LT(o.stats.accepted_tokens, o.stats.drafted_tokens) << "k=" << k;
      std::printf("oracle k=%d, %zu sequences: drafted %lld accepted %lld\n", k, reqs.size(),
                  static_cast<long long>(o.stats.drafted_tokens), static_cast<long long>(o.stats.accepted_tokens));
    }
  }
}

TEST(AssistantEngine, PMinEndsARoundAtTheFirstUnlikelyDraft) {
  // p_min = the median probability the head gave its drafts in a run without it: every round
  // then proposes the reference drafts up to (not including) the first one below p_min, the
  // output stays plain, and fewer tokens are drafted, but some.
  Models& m = models_once();
  const auto ids = m.ids();
  const std::vector<EngineRequest> alone = {greedy_request(1, std::vector<int32_t>(ids.begin(), ids.begin() + 40), 30)};
  const Outcome plain = run(alone, 0, models::DraftHead::kCentroid);
  for (models::DraftHead head : {models::DraftHead::kCentroid, models::DraftHead::kFull}) {
    std::vector<double> seen;
    const auto record = [&](const Sequence& s, std::span<const int32_t>) {
      std::vector<double> p;
      reference_drafts(m, s.tokens, s.n_computed, 4, head, &p);
      seen.insert(seen.end(), p.begin(), p.end());
    };
    const Outcome free_run = run(alone, 4, head, 0, nullptr, 0.0f, record);
    ASSERT_GT(seen.size(), 8u);
    std::nth_element(seen.begin(), seen.begin() + static_cast<ptrdiff_t>(seen.size() / 2), seen.end());
    const float p_min = static_cast<float>(seen[seen.size() / 2]);
    int64_t rounds = 0, cut = 0;
    const auto check = [&](const Sequence& s, std::span<const int32_t> drafts) {
      std::vector<double> p;
      std::vector<int32_t> want = reference_drafts(m, s.tokens, s.n_computed, 4, head, &p);
      size_t keep = 0;
      while (keep < want.size() && p[keep] >= p_min) ++keep;
      want.resize(keep);
      EXPECT_EQ(std::vector<int32_t>(drafts.begin(), drafts.end()), want) << "at position " << s.n_computed;
      ++rounds;
      cut += keep < 4;
    };
    const Outcome gated = run(alone, 4, head, 0, nullptr, p_min, check);
    EXPECT_EQ(gated.tokens, plain.tokens);
    EXPECT_GT(rounds, 3);
    EXPECT_GT(cut, 0);
    EXPECT_LT(gated.stats.drafted_tokens, free_run.stats.drafted_tokens);
    EXPECT_GT(gated.stats.drafted_tokens, 0);
    EXPECT_EQ(gated.tokens, plain.tokens);
  }
  Models& mm = models_once();
  const auto& groups = mm.target->spec().kv_groups;
  KvCache kv(groups, 16, std::vector<int32_t>(groups.size(), 8), KvType::F32);
  EXPECT_THROW(AssistantProposer(*mm.asst, kv, models::DraftHead::kCentroid, 1.5f), Error);
}

}  // namespace
}  // namespace sluice::engine
