// The threaded engine service: submit, stream, cancel, queue bound, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "api/engine.h"
#include "base/error.h"
#include "fake_model.h"

namespace sluice::api {
namespace {

using namespace std::chrono_literals;
using test::FakeModel;
using test::make_prompt;

constexpr int32_t kVocab = 97;

struct Service {
  // Steps take 1 ms, so a long request is still running when a test acts on it.
  explicit Service(int32_t parallel = 2, int32_t max_waiting = 4, int32_t blocks = 1100, int32_t ctx = 2048)
      : model(kVocab, {{1, 1, 2, 0}, {1, 1, 2, 8}}), kv(model.spec().kv_groups, 4, {blocks, blocks}, KvType::F32) {
    model.delay = std::chrono::microseconds(1000);
    EngineOptions o;
    o.core.sched = {parallel, 32, ctx};
    o.max_waiting = max_waiting;
    engine = std::make_unique<Engine>(model, kv, o);
  }
  ~Service() {
    engine.reset();
    EXPECT_EQ(kv.pool(0).n_used() + kv.pool(1).n_used(), 0) << "blocks leaked";
  }
  EngineRequest req(std::vector<int32_t> prompt, int32_t max_tokens) {
    EngineRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    return r;
  }
  // Reads a handle to the end (bounded by `limit`); returns the tokens and the last output.
  static std::pair<std::vector<int32_t>, TokenOutput> drain(RequestHandle& h, std::chrono::seconds limit = 30s) {
    std::vector<int32_t> toks;
    TokenOutput last;
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!h.finished() && std::chrono::steady_clock::now() < until)
      for (auto& o : h.wait(100ms)) {
        if (o.token >= 0 && !o.is_stop_token) toks.push_back(o.token);
        last = o;
      }
    return {toks, last};
  }
  FakeModel model;
  KvCache kv;
  std::unique_ptr<Engine> engine;
};

TEST(ApiEngine, StreamsTheSameTokensAsTheOracle) {
  Service s;
  const auto p = make_prompt(9, kVocab, 1);
  auto r = s.engine->submit(s.req(p, 7));
  ASSERT_EQ(r.status, SubmitStatus::kOk);
  auto [toks, last] = Service::drain(*r.handle);
  EXPECT_EQ(toks, s.model.reference_greedy(p, 7));
  ASSERT_TRUE(last.finish.has_value());
  EXPECT_EQ(*last.finish, FinishReason::kLength);
  EXPECT_EQ(last.n_prompt, 9);
  const auto snap = s.engine->snapshot();
  EXPECT_EQ(snap.ttft.count, 1u);
  EXPECT_EQ(snap.itl.count, 6u);
}

// A step that throws ends the requests of that step with kError and the cause, in words a
// client can be shown; the engine keeps serving.
TEST(ApiEngine, AFailedStepEndsItsRequestsWithTheCause) {
  Service s;
  s.model.throw_on_call = 3;  // set before any request: the engine thread has not called forward()
  auto r = s.engine->submit(s.req(make_prompt(9, kVocab, 2), 20));
  ASSERT_EQ(r.status, SubmitStatus::kOk);
  const auto [toks, last] = Service::drain(*r.handle);
  ASSERT_TRUE(last.finish);
  EXPECT_EQ(*last.finish, FinishReason::kError);
  EXPECT_EQ(last.error, "engine step failed: fake model: forward failed");
  EXPECT_LT(toks.size(), 20u);
  auto next = s.engine->submit(s.req(make_prompt(9, kVocab, 3), 5));
  ASSERT_EQ(next.status, SubmitStatus::kOk);
  const auto [toks2, last2] = Service::drain(*next.handle);
  ASSERT_TRUE(last2.finish);
  EXPECT_EQ(*last2.finish, FinishReason::kLength);
  EXPECT_TRUE(last2.error.empty());
  EXPECT_EQ(toks2.size(), 5u);
}

TEST(ApiEngine, InvalidRequestsAreRefusedOnTheCallersThread) {
  Service s;
  EXPECT_EQ(s.engine->submit(s.req({}, 5)).status, SubmitStatus::kInvalid);
  EXPECT_EQ(s.engine->submit(s.req(make_prompt(3000, kVocab, 2), 5)).status, SubmitStatus::kInvalid);
  auto bad = s.req(make_prompt(3, kVocab, 2), 5);
  bad.sampling.top_p = 0;
  const auto r = s.engine->submit(std::move(bad));
  EXPECT_EQ(r.status, SubmitStatus::kInvalid);
  EXPECT_NE(r.error.find("top_p"), std::string::npos);
}

TEST(ApiEngine, DroppingAHandleCancelsItsRequest) {
  Service s(1, 4);
  {
    auto r = s.engine->submit(s.req(make_prompt(5, kVocab, 3), 2000));
    ASSERT_EQ(r.status, SubmitStatus::kOk);
    r.handle->wait(2s);  // it runs (2000 steps would take 2 s)
    EXPECT_FALSE(r.handle->finished());
  }  // handle gone: aborted
  // The next request runs to completion (the slot was freed).
  auto r2 = s.engine->submit(s.req(make_prompt(5, kVocab, 4), 3));
  auto [toks, last] = Service::drain(*r2.handle);
  EXPECT_EQ(toks.size(), 3u);
  for (int i = 0; i < 100 && s.engine->snapshot().stats.kv_blocks_used > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(s.engine->snapshot().stats.kv_blocks_used, 0);
}

TEST(ApiEngine, TheWaitingQueueIsBounded) {
  Service s(1, 2);
  std::vector<std::unique_ptr<RequestHandle>> hs;
  int full = 0;
  for (int i = 0; i < 8; ++i) {
    auto r = s.engine->submit(s.req(make_prompt(5, kVocab, 10 + i), 1000));
    if (r.status == SubmitStatus::kQueueFull) ++full;
    else hs.push_back(std::move(r.handle));
  }
  // 1 running + 2 waiting fit; the rest were refused (exactly how many depends on whether
  // the engine thread picked the first one up already, so only bounds are checked).
  EXPECT_GE(full, 8 - 4);
  EXPECT_LE(static_cast<int>(hs.size()), 4);
  for (auto& h : hs) h->cancel();
  for (auto& h : hs) Service::drain(*h);
}

TEST(ApiEngine, ShutdownEndsOpenStreams) {
  Service s(2, 4);
  auto r = s.engine->submit(s.req(make_prompt(5, kVocab, 5), 2000));
  ASSERT_EQ(r.status, SubmitStatus::kOk);
  r.handle->wait(1s);
  s.engine->shutdown();
  auto [toks, last] = Service::drain(*r.handle, 5s);
  ASSERT_TRUE(last.finish.has_value());
  EXPECT_EQ(*last.finish, FinishReason::kAbort);
  EXPECT_EQ(s.engine->submit(s.req(make_prompt(5, kVocab, 6), 3)).status, SubmitStatus::kShuttingDown);
}

std::vector<EngineRequest> group(Service& s, int n, int32_t seed, int32_t max_tokens) {
  std::vector<EngineRequest> rs;
  for (int i = 0; i < n; ++i) rs.push_back(s.req(make_prompt(5, kVocab, seed + i), max_tokens));
  return rs;
}

TEST(ApiEngine, AGroupLargerThanTheEngineIsInvalidAndSaysWhatFits) {
  Service s(2, 4);
  EXPECT_EQ(s.engine->capacity(), 6);
  const auto r = s.engine->submit_group(group(s, 7, 1, 3));
  EXPECT_EQ(r.status, SubmitStatus::kInvalid);
  EXPECT_NE(r.error.find("at most 6 (2 running + 4 waiting)"), std::string::npos) << r.error;
  EXPECT_TRUE(r.handles.empty());
  EXPECT_EQ(s.engine->snapshot().n_queued, 0);
}

TEST(ApiEngine, AGroupIsQueuedWholeOrNotAtAll) {
  Service s(2, 4);
  auto first = s.engine->submit(s.req(make_prompt(5, kVocab, 1), 5000));
  ASSERT_EQ(first.status, SubmitStatus::kOk);
  // Running (the stats are published just after the first outputs): 1 of 2 slots taken,
  // room for 1 + 4 more.
  for (int i = 0; i < 200 && s.engine->snapshot().stats.n_running != 1; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(s.engine->snapshot().stats.n_running, 1);
  // One client keeps asking for 6: each is refused whole and leaves nothing behind...
  for (int i = 0; i < 20; ++i) {
    const auto r = s.engine->submit_group(group(s, 6, 100, 5000));
    EXPECT_EQ(r.status, SubmitStatus::kQueueFull);
    EXPECT_TRUE(r.handles.empty());
    EXPECT_EQ(s.engine->snapshot().n_queued, 0);
  }
  // ...so another client's requests still find the room that is there.
  auto fits = s.engine->submit_group(group(s, 5, 200, 5000));
  ASSERT_EQ(fits.status, SubmitStatus::kOk);
  EXPECT_EQ(fits.handles.size(), 5u);
  EXPECT_EQ(s.engine->submit(s.req(make_prompt(5, kVocab, 9), 3)).status, SubmitStatus::kQueueFull);
  first.handle->cancel();
  for (auto& h : fits.handles) h->cancel();
  Service::drain(*first.handle);
  for (auto& h : fits.handles) Service::drain(*h);
}

TEST(ApiEngine, AnInvalidMemberRefusesTheWholeGroup) {
  Service s(2, 4);
  auto rs = group(s, 3, 1, 3);
  rs[2].sampling.top_p = 0;
  const auto r = s.engine->submit_group(std::move(rs));
  EXPECT_EQ(r.status, SubmitStatus::kInvalid);
  EXPECT_NE(r.error.find("top_p"), std::string::npos);
  EXPECT_EQ(s.engine->snapshot().n_queued, 0);
}

// Work run between steps (an image encode in `sluice serve`): each turn of it comes after a step
// while a request runs — never two turns back to back —, gets about a step's budget, and the
// request's tokens are the oracle's. Every turn spends its whole budget, as a long encode does.
struct TurnLog : BetweenSteps {
  explicit TurnLog(const FakeModel& m, int turns) : model(m), left(turns) {}
  bool run_for(std::chrono::nanoseconds budget) override {
    calls.push_back(static_cast<int64_t>(model.tokens_per_call.size()));  // the engine thread's own record
    ++started;
    budgets.push_back(budget);
    const auto until = std::chrono::steady_clock::now() + budget;
    while (std::chrono::steady_clock::now() < until) {
    }
    if (fail_at == static_cast<int>(calls.size())) throw Error("the work failed");
    return --left == 0;
  }
  const FakeModel& model;
  int left;
  int fail_at = -1;
  std::atomic<int> started{0};  // turns begun, for another thread to watch
  std::vector<int64_t> calls;
  std::vector<std::chrono::nanoseconds> budgets;
};

TEST(ApiEngine, SharedWorkRunsBetweenStepsForAboutAStep) {
  Service s;
  const auto p = make_prompt(9, kVocab, 11);
  auto r = s.engine->submit(s.req(p, 400));
  ASSERT_EQ(r.status, SubmitStatus::kOk);
  ASSERT_FALSE(r.handle->wait(5s).empty());  // running
  TurnLog work(s.model, 30);
  s.engine->run_between_steps(work);
  ASSERT_EQ(work.calls.size(), 30u);
  // 30 turns take about 30 of the request's 400 steps: it runs throughout, and each turn spends
  // its budget, so exactly one step (one forward call) comes between two turns.
  for (size_t i = 1; i < work.calls.size(); ++i) {
    EXPECT_EQ(work.calls[i], work.calls[i - 1] + 1) << "turn " << i;
    EXPECT_LE(work.budgets[i], std::chrono::nanoseconds(250ms));  // a 1 ms step's average, room for a loaded host
  }
  EXPECT_EQ(s.engine->snapshot().shared.turns_between, 30u);
  EXPECT_EQ(s.engine->snapshot().shared.jobs, 1u);
  auto [toks, last] = Service::drain(*r.handle);
  toks.insert(toks.begin(), s.model.reference_greedy(p, 1).front());  // the token read above
  EXPECT_EQ(toks, s.model.reference_greedy(p, 400));
}

// A long prefill step is already the longest gap a decoding stream sees: the turn after it is
// skipped (so the gap does not grow by a turn), but never twice in a row (so prefills cannot
// starve the work), and the tokens are still the oracle's.
TEST(ApiEngine, SharedWorkSkipsTheTurnAfterALongPrefillStep) {
  Service s(4, 4);
  s.model.delay_per_token = std::chrono::microseconds(400);  // a 64-token chunk: ~26 ms, a decode step ~2 ms
  const auto p = make_prompt(9, kVocab, 11);
  auto r = s.engine->submit(s.req(p, 600));
  ASSERT_EQ(r.status, SubmitStatus::kOk);
  ASSERT_FALSE(r.handle->wait(5s).empty());  // decoding
  TurnLog work(s.model, 40);
  std::thread encode([&] { s.engine->run_between_steps(work); });
  while (work.started < 5) std::this_thread::sleep_for(1ms);
  std::vector<std::unique_ptr<RequestHandle>> prefills;  // long prompts while the work runs
  for (int i = 0; i < 3; ++i) {
    auto q = s.engine->submit(s.req(make_prompt(300, kVocab, 20 + i), 1));
    ASSERT_EQ(q.status, SubmitStatus::kOk);
    prefills.push_back(std::move(q.handle));
  }
  encode.join();
  for (auto& h : prefills) Service::drain(*h);
  auto [toks, end] = Service::drain(*r.handle);
  toks.insert(toks.begin(), s.model.reference_greedy(p, 1).front());
  EXPECT_EQ(toks, s.model.reference_greedy(p, 600));
  // The engine is idle now: its record of forward calls can be read.
  const auto& calls = s.model.tokens_per_call;
  const auto is_long = [&](int64_t c) { return c >= 0 && calls[static_cast<size_t>(c)] > 8; };
  int after_long = 0;
  for (size_t t = 0; t < work.calls.size(); ++t) {
    const int64_t last = work.calls[t] - 1;  // the forward call just before this turn
    if (!is_long(last)) continue;
    ++after_long;  // allowed only when the turn after the step before was skipped (a long one too)
    EXPECT_TRUE(is_long(last - 1)) << "turn " << t << " right after the first long step " << last;
  }
  EXPECT_GT(after_long, 0) << "the prefills came after the work ended: nothing was tested";
  EXPECT_GT(s.engine->snapshot().shared.turns_skipped, 0u);
}

// An idle engine gives the work long turns; what the work throws reaches the caller; work handed
// over at shutdown fails instead of hanging its caller.
TEST(ApiEngine, SharedWorkWhenIdleFailingAndAtShutdown) {
  Service s;
  TurnLog idle(s.model, 3);
  s.engine->run_between_steps(idle);
  for (auto b : idle.budgets) EXPECT_GT(b, Engine::kIdleTurn - 1ms);  // less what the loop took
  EXPECT_EQ(idle.calls, std::vector<int64_t>(3, 0));
  TurnLog failing(s.model, 5);
  failing.fail_at = 2;
  try {
    s.engine->run_between_steps(failing);
    FAIL() << "the work's exception was lost";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the work failed");
  }
  s.engine->shutdown();
  TurnLog late(s.model, 1);
  EXPECT_THROW(s.engine->run_between_steps(late), ShuttingDown);
  EXPECT_TRUE(late.calls.empty());
}

}  // namespace
}  // namespace sluice::api
