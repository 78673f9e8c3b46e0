// Grammar constraints inside the engine (EngineRequest::constraint, banned_ids): the fake model
// over a byte vocabulary (id 0 = end of generation, 1..256 = single bytes, then multi-byte
// pieces and one control token), whose greedy choice is a hash of the context — so without
// the mask it would almost never produce grammar text. Every run checks the pool is empty.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <regex>
#include <string>

#include "base/error.h"
#include "engine/engine_core.h"
#include "fake_model.h"
#include "grammar/compiled.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

namespace sluice::engine {
namespace {

using test::FakeModel;
using test::make_prompt;

constexpr int32_t kEos = 0;
constexpr int32_t kTrigger = 300;  // a control token (no bytes), like Gemma 4's <|tool_call>
constexpr int32_t kVocab = 301;

std::shared_ptr<const grammar::TokenVocab> vocab() {
  static const auto v = [] {
    std::vector<std::string> pieces{""};
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    const char* multi[] = {"ab", "cd", "xyz", ":1", "12", "3}", "{q", "zz:", "}", "ba", "abc"};
    for (const char* m : multi) pieces.push_back(m);
    pieces.resize(kVocab);  // the rest (the trigger included): no bytes
    return std::make_shared<const grammar::TokenVocab>(std::move(pieces), std::vector<int32_t>{kEos});
  }();
  return v;
}

std::shared_ptr<const grammar::CompiledGrammar> compile(const char* gbnf) {
  return std::make_shared<const grammar::CompiledGrammar>(grammar::gbnf_grammar(gbnf), vocab());
}

// A closed value: once "}" is generated only the end may follow.
const char* kRecord = R"(root ::= "{" [a-z]{2,6} ":" [0-9]{1,3} "}")";
const std::regex kRecordText(R"(\{[a-z]{2,6}:[0-9]{1,3}\})");

std::string text_of(const std::vector<int32_t>& toks) {
  std::string s;
  for (int32_t t : toks) s += vocab()->piece(t);
  return s;
}

EngineRequest request(RequestId id, int prompt_len, int32_t max_tokens, float temperature = 0) {
  EngineRequest r;
  r.id = id;
  r.prompt = make_prompt(prompt_len, kVocab, 50 + id);
  r.max_tokens = max_tokens;
  r.stop_ids = {kEos};
  r.sampling.temperature = temperature;
  r.sampling.seed = 1000 + id;
  return r;
}

EngineRequest constrained(EngineRequest r, const char* gbnf = kRecord) {
  r.constraint = GrammarConstraint{compile(gbnf), std::nullopt, true};
  return r;
}

struct Outcome {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, FinishReason> finish;
  std::map<RequestId, std::string> error;  // what an error finish says
  std::map<RequestId, bool> stop_token;
  EngineStats stats;
};

Outcome run(const std::vector<EngineRequest>& reqs, int32_t draft_max = 0, int32_t max_running = 8) {
  FakeModel model(kVocab, {{1, 1, 2, 0}, {1, 1, 2, 8}});
  KvCache kv(model.spec().kv_groups, 4, {256, 256}, KvType::F32);
  EngineConfig cfg;
  cfg.sched = SchedulerConfig{max_running, 32, 512};
  cfg.sched.draft_max = draft_max;
  cfg.spec = draft_max > 0 ? SpecMethod::kNgram : SpecMethod::kNone;
  Outcome r;
  {
    EngineCore core(model, kv, cfg);
    for (const EngineRequest& q : reqs) core.add(q);
    for (int i = 0; i < 20000 && core.has_work(); ++i)
      for (const TokenOutput& o : core.step()) {
        if (o.token >= 0 && !o.is_stop_token) r.tokens[o.id].push_back(o.token);
        if (o.finish) {
          r.finish[o.id] = *o.finish;
          if (!o.error.empty()) r.error[o.id] = o.error;
          r.stop_token[o.id] = o.is_stop_token;
        }
      }
    EXPECT_FALSE(core.has_work());
    EXPECT_EQ(core.blocks().n_used_all(), 0) << "blocks leaked";
    r.stats = core.stats();
  }
  EXPECT_EQ(model.errors, 0);
  return r;
}

std::vector<EngineRequest> mixed(float temperature) {
  std::vector<EngineRequest> reqs;
  for (RequestId id = 1; id <= 6; ++id) {
    EngineRequest r = request(id, 5 + 9 * static_cast<int>(id), 40, temperature);
    reqs.push_back(id % 2 ? constrained(std::move(r)) : std::move(r));
  }
  return reqs;
}

void expect_batched_equals_alone(float temperature) {
  const auto reqs = mixed(temperature);
  const Outcome together = run(reqs);
  for (const EngineRequest& q : reqs) {
    const Outcome alone = run({q});
    EXPECT_EQ(together.tokens.at(q.id), alone.tokens.at(q.id)) << "request " << q.id;
    if (!q.constraint) continue;
    const std::string text = text_of(together.tokens.at(q.id));
    EXPECT_TRUE(std::regex_match(text, kRecordText)) << text;
    // Closed by the grammar: kStop on the last text token, no end token sampled.
    EXPECT_EQ(together.finish.at(q.id), FinishReason::kStop);
    EXPECT_FALSE(together.stop_token.at(q.id));
  }
}

TEST(GrammarEngine, ConstrainedGreedyBatchedWithFreeSequencesEqualsAlone) { expect_batched_equals_alone(0); }

TEST(GrammarEngine, ConstrainedSampledBatchedWithFreeSequencesEqualsAlone) { expect_batched_equals_alone(1.0f); }

TEST(GrammarEngine, WithoutTheMaskTheModelWouldNotFollowTheGrammar) {
  // The fail-proof of the tests above: the same request unconstrained is not grammar text.
  const Outcome unc = run({request(1, 14, 40)});
  EXPECT_FALSE(std::regex_match(text_of(unc.tokens.at(1)), kRecordText));
}

TEST(GrammarEngine, AtACompleteStateARejectedDrawEndsTheValue) {
  // A number may always go on; the fake model wants other tokens, so every generation ends
  // with the end token after a few digits instead of digits up to max_tokens.
  const char* number = R"(root ::= [0-9]+)";
  for (RequestId id = 1; id <= 8; ++id) {
    const Outcome got = run({constrained(request(id, 5 + static_cast<int>(id), 60, id % 2 ? 0.0f : 1.0f), number)});
    const std::string text = text_of(got.tokens.at(id));
    EXPECT_TRUE(std::regex_match(text, std::regex("[0-9]+"))) << text;
    EXPECT_LT(text.size(), 10u) << text;
    EXPECT_EQ(got.finish.at(id), FinishReason::kStop);
    EXPECT_TRUE(got.stop_token.at(id));
  }
}

TEST(GrammarEngine, BannedIdsAreNeverSampled) {
  const Outcome unc = run({request(1, 20, 60), request(2, 20, 60, 1.0f)});
  for (RequestId id : {RequestId{1}, RequestId{2}}) {
    EngineRequest r = request(id, 20, 60, id == 2 ? 1.0f : 0.0f);
    r.banned_ids.assign(unc.tokens.at(id).begin(), unc.tokens.at(id).begin() + 5);
    const Outcome banned = run({r});
    ASSERT_FALSE(banned.tokens.at(id).empty());
    for (int32_t t : banned.tokens.at(id))
      EXPECT_EQ(std::count(r.banned_ids.begin(), r.banned_ids.end(), t), 0) << "banned token " << t << " sampled";
  }
}

TEST(GrammarEngine, TriggerStartsTheConstraintAfterItsToken) {
  // The free run's 4th token becomes the trigger: the constrained run equals the free one up
  // to and including it, then follows the grammar and stops when it closes.
  const Outcome unc = run({request(1, 14, 40)});
  const std::vector<int32_t>& ft = unc.tokens.at(1);
  EngineRequest r = request(1, 14, 40);
  r.constraint = GrammarConstraint{compile(kRecord), ft[3], true};
  const Outcome got = run({r});
  const std::vector<int32_t>& gt = got.tokens.at(1);
  const auto first = std::find(ft.begin(), ft.end(), ft[3]) - ft.begin();
  ASSERT_GT(gt.size(), static_cast<size_t>(first + 1));
  EXPECT_TRUE(std::equal(ft.begin(), ft.begin() + first + 1, gt.begin()));
  EXPECT_TRUE(std::regex_match(text_of({gt.begin() + first + 1, gt.end()}), kRecordText));
  EXPECT_EQ(got.finish.at(1), FinishReason::kStop);
}

// Lazy mode (tool calls under tool_choice auto): a control-token trigger, the constraint
// disarms when the grammar closes and re-arms at the next trigger. The grammar starts with no
// bytes of its own, so after each trigger the mask must force "{".
TEST(GrammarEngine, LazyConstraintDisarmsAndRearmsAtEachTrigger) {
  const auto g = compile(kRecord);
  int total_triggers = 0;
  for (RequestId id = 1; id <= 12; ++id) {
    EngineRequest r = request(id, 6 + static_cast<int>(id), 120, 1.0f);
    r.constraint = GrammarConstraint{g, kTrigger, false};
    // Temperature 1 over the fake model's wide peak reaches the trigger now and then.
    const Outcome got = run({r});
    const std::vector<int32_t>& t = got.tokens.at(id);
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] != kTrigger) continue;
      ++total_triggers;
      grammar::Matcher m(g);
      size_t j = i + 1;
      for (; j < t.size() && !m.only_end(); ++j) ASSERT_TRUE(m.advance(t[j])) << "token " << j << " after a trigger";
      if (j < t.size()) EXPECT_TRUE(m.only_end());
      i = j - 1;
    }
    EXPECT_NE(got.finish.at(id), FinishReason::kError);
  }
  EXPECT_GE(total_triggers, 2) << "the test needs triggers to mean anything";
}

TEST(GrammarEngine, SpeculationGivesTheSameConstrainedTokens) {
  // Few allowed tokens, so n-gram drafts recur and are partly accepted, partly rejected.
  const char* loop = R"(root ::= "<" ("a" | "b" | "ab" | "ba"){6,30} ">")";
  std::vector<EngineRequest> reqs;
  for (RequestId id = 1; id <= 6; ++id) {
    EngineRequest r = request(id, 10 + 3 * static_cast<int>(id), 48, id % 2 ? 0.0f : 1.0f);
    reqs.push_back(id <= 4 ? constrained(std::move(r), loop) : std::move(r));
  }
  const Outcome plain = run(reqs);
  for (int32_t k : {1, 4}) {
    const Outcome spec = run(reqs, k);
    EXPECT_EQ(spec.tokens, plain.tokens) << "k=" << k;
    EXPECT_EQ(spec.finish, plain.finish) << "k=" << k;
    EXPECT_GT(spec.stats.accepted_tokens, 0) << "k=" << k;
    EXPECT_LT(spec.stats.accepted_tokens, spec.stats.drafted_tokens) << "k=" << k;
  }
  for (RequestId id = 1; id <= 4; ++id)
    EXPECT_TRUE(std::regex_match(text_of(plain.tokens.at(id)), std::regex("<(a|b)+>"))) << id;
}

TEST(GrammarEngine, NoAllowedTokenEndsThatRequestWithAnErrorOnly) {
  EngineRequest bad = constrained(request(1, 12, 40));
  for (int c = 'a'; c <= 'z'; ++c) bad.banned_ids.push_back(c + 1);  // byte b is id b + 1
  for (int32_t id = 257; id < kVocab; ++id) bad.banned_ids.push_back(id);
  const Outcome got = run({bad, request(2, 12, 20), constrained(request(3, 9, 40))});
  EXPECT_EQ(got.finish.at(1), FinishReason::kError);
  EXPECT_EQ(got.error.at(1).rfind("grammar: no token is allowed after 1 constrained tokens", 0), 0u) << got.error.at(1);
  EXPECT_EQ(got.error.count(2) + got.error.count(3), 0u);  // the others end without one
  EXPECT_EQ(text_of(got.tokens.at(1)), "{");
  EXPECT_EQ(got.finish.at(2), FinishReason::kLength);
  EXPECT_EQ(got.tokens.at(2).size(), 20u);
  EXPECT_EQ(got.finish.at(3), FinishReason::kStop);
}

TEST(GrammarEngine, GrammarForAnotherVocabularyIsRejectedAtAdd) {
  FakeModel model(64, {{1, 1, 2, 0}});
  KvCache kv(model.spec().kv_groups, 4, {16}, KvType::F32);
  EngineConfig cfg;
  cfg.sched = SchedulerConfig{2, 32, 64};
  EngineCore core(model, kv, cfg);
  EngineRequest r = constrained(request(1, 4, 4));
  for (int32_t& t : r.prompt) t %= 64;
  EXPECT_THROW(core.add(r), Error);
}

}  // namespace
}  // namespace sluice::engine

namespace sluice::engine {
namespace {

// The redraw's definition, written densely (a full copy of the row taken before the
// penalties, -inf outside the mask, Sampler::distribution): the engine, which saves only the
// penalised logits and walks the allowed ids, gives the same tokens. With penalties on, a
// redraw from the penalised row (penalties twice) would differ.
std::vector<int32_t> dense_reference(const EngineRequest& r) {
  FakeModel model(kVocab, {{1, 1, 2, 0}, {1, 1, 2, 8}});
  grammar::Matcher m(r.constraint->grammar);
  const Sampler s(r.sampling, kVocab);
  std::vector<int32_t> seq = r.prompt, out;
  std::vector<uint64_t> mask(vocab()->mask_words());
  while (static_cast<int32_t>(out.size()) < r.max_tokens) {
    std::vector<float> row = model.reference_logits(seq), copy = row;
    const std::span<const int32_t> h(seq);
    int32_t t = s.sample(row.data(), h);
    if (!m.accepts(t)) {
      if (m.is_complete()) return out;  // the engine ends the value with the stop id here
      m.fill_mask(mask);
      for (int32_t i = 0; i < kVocab; ++i)
        if (!((mask[static_cast<size_t>(i) >> 6] >> (i & 63)) & 1)) copy[i] = -std::numeric_limits<float>::infinity();
      t = Sampler::draw(s.distribution(copy.data(), h, SamplerWorkspace::for_this_thread()),
                        s.uniform(static_cast<int64_t>(seq.size()), RandomStream::kGrammar));
    }
    EXPECT_TRUE(m.advance(t));
    out.push_back(t);
    seq.push_back(t);
    if (m.is_terminated() || m.only_end()) return out;
  }
  return out;
}

TEST(GrammarEngine, RedrawWithPenaltiesEqualsTheDenseMaskedDefinition) {
  int compared = 0;
  for (RequestId id = 1; id <= 6; ++id) {
    // Digits repeat, so the penalties keep hitting allowed tokens.
    EngineRequest r = constrained(request(id, 6 + static_cast<int>(id), 40, id % 3 == 0 ? 0.0f : 1.0f),
                                  R"(root ::= [0-9]{24})");
    r.sampling.repeat_penalty = 1.5f;
    r.sampling.frequency_penalty = 0.7f;
    r.sampling.penalty_last_n = -1;
    const Outcome got = run({r});
    const std::vector<int32_t> want = dense_reference(r);
    EXPECT_EQ(got.tokens.at(id), want) << "request " << id;
    compared += static_cast<int>(want.size());
  }
  EXPECT_GT(compared, 30);
}

}  // namespace
}  // namespace sluice::engine
