// The matcher against brute force: the mask must equal "accepts(t)" for every token, at
// every step of every walk; rollback must restore the exact state.
#include <gtest/gtest.h>

#include <sched.h>

#include <random>
#include <thread>

#include "base/error.h"
#include "base/thread_priority.h"
#include "grammar/background.h"
#include "grammar/compiled.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "test_vocab.h"

namespace sluice::grammar {
namespace {

bool bit(const std::vector<uint64_t>& m, int32_t id) { return (m[id >> 6] >> (id & 63)) & 1; }

// Walks random allowed tokens; at each step compares the mask with accepts() per token.
void check_mask_walks(const std::shared_ptr<const CompiledGrammar>& g, int walks, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  const int32_t n = g->vocab().n_vocab();
  for (int w = 0; w < walks; ++w) {
    Matcher m(g);
    std::vector<uint64_t> mask(g->vocab().mask_words());
    for (int step = 0; step < steps && !m.is_terminated(); ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < n; ++t) {
        ASSERT_EQ(bit(mask, t), m.accepts(t)) << "token " << t << " at step " << step;
        if (bit(mask, t)) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty()) << "dead end at step " << step;
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.advance(t));
    }
  }
}

std::shared_ptr<const CompiledGrammar> compile_schema(const std::string& schema, std::shared_ptr<const TokenVocab> v,
                                                      Limits limits = {}) {
  return std::make_shared<const CompiledGrammar>(json_schema_grammar_text(schema), std::move(v), limits);
}

// Every position left to first use (eager_compile_ms = 0) or all analysed at compile.
class MatcherCompile : public ::testing::TestWithParam<bool> {
 protected:
  Limits limits() const {
    Limits l;
    l.eager_compile_ms = GetParam() ? 0 : 1e9;
    return l;
  }
};

INSTANTIATE_TEST_SUITE_P(EagerOrDeferred, MatcherCompile, ::testing::Values(false, true));

TEST_P(MatcherCompile, MaskEqualsBruteForceOnJsonSchemas) {
  auto v = test::byte_vocab();
  for (
      const char* schema :
      {R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":-5,"maximum":120},"tags":{"type":"array","items":{"enum":["a","b\"c"]},"maxItems":3}},"required":["name"],"additionalProperties":false})",
       R"({"type":"array","items":{"type":"number","exclusiveMinimum":-2,"maximum":3}})",
       R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"k":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"})",
       R"({})"}) {
    SCOPED_TRACE(schema);
    auto g = compile_schema(schema, v, limits());
    EXPECT_EQ(g->stats().deferred, GetParam() ? g->stats().positions : 0);
    EXPECT_EQ(g->analysed(), g->stats().positions - g->stats().deferred);
    check_mask_walks(g, 6, 40, 1);
    if (GetParam()) EXPECT_GT(g->analysed(), 0u);  // the walks analysed what they reached
  }
}

TEST(Matcher, RollbackRestoresTheExactState) {
  auto g = compile_schema(
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"integer"}}}})",
      test::byte_vocab());
  Matcher m(g);
  std::vector<uint32_t> states{m.state_id()};
  std::vector<std::vector<uint64_t>> masks;
  const std::string text = R"({"a":"x\"y","b":[1,-20,3]})";
  std::vector<uint64_t> mask(g->vocab().mask_words());
  m.fill_mask(mask);
  masks.push_back(mask);
  for (unsigned char c : text) {
    ASSERT_TRUE(m.advance(1 + c)) << c;
    states.push_back(m.state_id());
    m.fill_mask(mask);
    masks.push_back(mask);
  }
  EXPECT_TRUE(m.is_complete());
  for (size_t n : {3u, 1u, 7u, 0u, 5u}) {
    const size_t at = m.n_tokens() - n;
    m.rollback(n);
    EXPECT_EQ(m.state_id(), states[at]);
    m.fill_mask(mask);
    EXPECT_EQ(mask, masks[at]);
    for (size_t i = at; i < text.size(); ++i) ASSERT_TRUE(m.advance(1 + static_cast<unsigned char>(text[i])));
  }
  EXPECT_THROW(m.rollback(m.n_tokens() + 1), Error);
  EXPECT_TRUE(m.advance(test::kEos));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accepts(1 + '}'));
  m.rollback(1);
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.is_terminated());
}

TEST(Matcher, TokenTerminalsAreMatchedById) {
  auto v = test::byte_vocab();
  const int32_t quote = static_cast<int32_t>(v->n_vocab()) - 7;  // "<|\"|>" in the test vocab
  ASSERT_EQ(v->piece(quote), "<|\"|>");
  JsonSchemaOptions o;
  o.syntax = JsonSchemaOptions::Syntax::kGemmaNative;
  o.native_quote_token = quote;
  auto g = std::make_shared<const CompiledGrammar>(
      json_schema_grammar_text(
          R"({"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer"}},"required":["city"]})", o),
      v);
  Matcher m(g);
  for (unsigned char c : std::string("{city:")) ASSERT_TRUE(m.advance(1 + c));
  EXPECT_FALSE(m.accepts(1 + '"'));
  std::vector<uint64_t> mask(v->mask_words());
  m.fill_mask(mask);
  EXPECT_TRUE(bit(mask, quote));
  EXPECT_FALSE(bit(mask, 1 + '"'));
  ASSERT_TRUE(m.advance(quote));
  for (unsigned char c : std::string("Paris")) ASSERT_TRUE(m.advance(1 + c));
  ASSERT_TRUE(m.advance(quote));
  for (unsigned char c : std::string(",n:42}")) ASSERT_TRUE(m.advance(1 + c));
  EXPECT_TRUE(m.is_complete());
  check_mask_walks(g, 6, 30, 3);
}

TEST(Grammar, RejectsLeftRecursionAndUnproductiveRules) {
  GrammarBuilder b;
  const uint32_t r = b.declare("expr");
  b.define(r, alt({seq({ref(r), lit("+a")}), lit("a")}));
  EXPECT_THROW(b.finish(r), Error);
  GrammarBuilder b2;
  const uint32_t s = b2.declare("loop");
  b2.define(s, seq({lit("x"), ref(s)}));
  EXPECT_THROW(b2.finish(s), Error);
}

TEST(Grammar, LimitsNameTheLimit) {
  Limits l;
  l.max_positions = 50;
  JsonSchemaOptions o;
  o.limits = l;
  try {
    json_schema_grammar_text(R"({"type":"string","maxLength":100})", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_positions"), std::string::npos) << e.what();
  }
  Limits t;
  t.max_compile_ms = 0;
  try {
    CompiledGrammar(json_schema_grammar_text(R"({"type":"string"})"), test::byte_vocab(), t);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_compile_ms"), std::string::npos) << e.what();
  }
}

TEST(Grammar, CacheReturnsTheSameCompiledGrammar) {
  GrammarCache cache(test::byte_vocab(), 2);
  int builds = 0;
  auto build = [&] {
    ++builds;
    return json_schema_grammar_text(R"({"type":"boolean"})");
  };
  auto a = cache.get("k1", build);
  auto b = cache.get("k1", build);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(builds, 1);
  cache.get("k2", build);
  cache.get("k3", build);
  EXPECT_EQ(cache.size(), 2u);
  cache.get("k1", build);
  EXPECT_EQ(builds, 4);
}

// First-use grammar work runs on the cache's worker thread, lowered below the engine (SCHED_BATCH,
// nice 19) while the caller waits; the caller's own priority is untouched, exceptions reach it.
TEST(Grammar, CacheCompilesOnALowPriorityThread) {
  GrammarCache cache(test::byte_vocab(), 4);
  const ThreadPriority caller = this_thread_priority();
  std::thread::id build_thread;
  ThreadPriority during{};
  auto g = cache.get("k", [&] {
    build_thread = std::this_thread::get_id();
    during = this_thread_priority();
    return json_schema_grammar_text(R"({"type":"string","maxLength":30})");
  });
  ASSERT_TRUE(g);
  EXPECT_NE(build_thread, std::this_thread::get_id());
  EXPECT_EQ(during.policy, SCHED_BATCH);
  EXPECT_EQ(during.nice, 19);
  EXPECT_EQ(this_thread_priority().policy, caller.policy);
  EXPECT_EQ(this_thread_priority().nice, caller.nice);
  EXPECT_THROW(cache.get("bad", [] { return json_schema_grammar_text(R"({"type":"strin"})"); }), Error);
  // Warming a grammar with deferred positions also runs there, to the end within its budget.
  Limits lazy;
  lazy.eager_compile_ms = 0;
  GrammarCache deferring(test::byte_vocab(), 4, lazy);
  auto d = deferring.get("d", [] { return json_schema_grammar_text(R"({"type":"string","maxLength":30})"); });
  EXPECT_FALSE(d->fully_analysed());
  EXPECT_TRUE(deferring.warm(d, 10000));
  EXPECT_TRUE(d->fully_analysed());
}

// Matchers on several threads share one grammar whose positions are all deferred; each
// must see the masks of the fully compiled grammar.
TEST(Grammar, DeferredPositionsAreSafeToShareAcrossThreads) {
  auto v = test::byte_vocab();
  const std::string schema = R"({"type":"object","properties":{"s":{"type":"string","maxLength":12}}})";
  Limits lazy;
  lazy.eager_compile_ms = 0;
  auto eager = compile_schema(schema, v);
  auto deferred = compile_schema(schema, v, lazy);
  const std::string text = R"({"s":"ab\"c\u00e9 xyz"})";
  std::vector<std::vector<uint64_t>> want;
  {
    Matcher m(eager);
    std::vector<uint64_t> mask(v->mask_words());
    for (unsigned char c : text) {
      m.fill_mask(mask);
      want.push_back(mask);
      ASSERT_TRUE(m.advance(static_cast<int32_t>(c) + 1));  // byte b is token b + 1
    }
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Matcher m(deferred);
      std::vector<uint64_t> mask(v->mask_words());
      for (size_t i = 0; i < text.size(); ++i) {
        m.fill_mask(mask);
        mismatches[t] += mask != want[i];
        if (!m.advance(static_cast<unsigned char>(text[i]) + 1)) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  EXPECT_GT(deferred->analysed(), 0u);
}

// A grammar warmed on the request's thread has every position ready before any matcher runs,
// with the masks the eager compile makes; a zero budget leaves them deferred.
TEST(Grammar, WarmAnalysesDeferredPositionsWithinItsBudget) {
  auto v = test::byte_vocab();
  const std::string schema =
      R"({"type":"object","properties":{"s":{"type":"string","maxLength":12},"n":{"type":"integer"}}})";
  Limits lazy;
  lazy.eager_compile_ms = 0;
  auto deferred = compile_schema(schema, v, lazy);
  ASSERT_GT(deferred->stats().deferred, 0u);
  EXPECT_FALSE(deferred->warm(0));
  EXPECT_EQ(deferred->analysed(), 0u);
  EXPECT_TRUE(deferred->warm(1e9));
  EXPECT_EQ(deferred->analysed(), deferred->stats().positions);
  check_mask_walks(deferred, 6, 40, 1);  // the same masks as brute force
}

}  // namespace
}  // namespace sluice::grammar
