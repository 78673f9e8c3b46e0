#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "threading/thread_pool.h"
#include "threading/work_split.h"

namespace sluice {
namespace {

TEST(ThreadPool, RunsEveryWorkerOnceAndBarrierOrders) {
  for (int nth : {1, 2, 3, 4}) {
    ThreadPool pool(nth);
    std::vector<int> hits(nth, 0);
    std::atomic<int> before{0};
    bool ordered = true;
    pool.run([&](int ith, int n) {
      EXPECT_EQ(n, nth);
      ++hits[ith];
      before.fetch_add(1);
      pool.barrier();
      if (before.load() != nth) ordered = false;  // every worker passed the first phase
    });
    for (int h : hits) EXPECT_EQ(h, 1);
    EXPECT_TRUE(ordered) << nth;
  }
}

// Idle workers go to sleep; a job must wake them every time (no lost wake-up), and jobs
// back to back while they spin must not wait for a wake-up at all.
TEST(ThreadPool, WakesSleepingWorkers) {
  ThreadPool pool(3);
  std::atomic<int> calls{0};
  for (int i = 0; i < 30; ++i) {
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // long enough to sleep
    pool.run([&](int, int) { calls.fetch_add(1); });
  }
  EXPECT_EQ(calls.load(), 90);
  {
    ThreadPool::StepScope hot(pool);
    for (int i = 0; i < 10000; ++i) pool.run([&](int, int) { calls.fetch_add(1); });
  }
  EXPECT_EQ(calls.load(), 90 + 30000);
}

// Every unit is handed out exactly once, whatever the thread count and the speed of each
// thread; a slow thread's range is finished by the others (taken from its back).
TEST(WorkSplit, EveryUnitOnceAndSlowThreadsAreHelped) {
  for (int nth : {1, 2, 3, 4}) {
    ThreadPool pool(nth);
    WorkSplit split(nth);
    for (int64_t n : {0, 1, 2, 7, 64, 1001}) {
      std::vector<std::atomic<int>> taken(static_cast<size_t>(n));
      std::vector<int64_t> per_thread(nth, 0);
      split.reset(n, nth);
      pool.run([&](int ith, int) {
        int64_t u;
        while (split.next(ith, &u)) {
          ASSERT_GE(u, 0);
          ASSERT_LT(u, n);
          taken[static_cast<size_t>(u)].fetch_add(1);
          ++per_thread[ith];
          // Thread 0 is slow: the others must take part of its range.
          if (ith == 0 && nth > 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      });
      for (int64_t u = 0; u < n; ++u) ASSERT_EQ(taken[static_cast<size_t>(u)].load(), 1) << "unit " << u << " n " << n;
      if (nth > 1 && n >= 64) {
        int64_t base, end;
        split_range(n, 0, nth, &base, &end);
        EXPECT_LT(per_thread[0], end - base) << "nobody helped the slow thread (n " << n << ", " << nth << " threads)";
      }
    }
  }
}

TEST(WorkSplit, OwnRangeIsTakenFrontToBack) {
  WorkSplit split(2);
  split.reset(10, 2);
  int64_t u;
  std::vector<int64_t> got;
  while (split.next(0, &u)) got.push_back(u);
  // Thread 0 alone: its range 0..4 in order, then thread 1's range from the back.
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2, 3, 4, 9, 8, 7, 6, 5}));
}

// Ranges given by bounds: each thread starts at the front of its own, and a thread whose
// range is empty (or done) takes from the back of the largest one left.
TEST(WorkSplit, GivenRangesAreTakenAsGiven) {
  WorkSplit split(2);
  const int64_t bounds[3] = {0, 4, 9};
  split.reset(bounds, 2);
  int64_t u;
  std::vector<int64_t> got;
  while (split.next(1, &u)) got.push_back(u);
  EXPECT_EQ(got, (std::vector<int64_t>{4, 5, 6, 7, 8, 3, 2, 1, 0}));
  const int64_t empty_first[3] = {0, 0, 3};
  split.reset(empty_first, 2);
  got.clear();
  while (split.next(0, &u)) got.push_back(u);
  EXPECT_EQ(got, (std::vector<int64_t>{2, 1, 0}));
  const int64_t bad[3] = {0, 5, 4};
  EXPECT_THROW(split.reset(bad, 2), std::exception);
}

}  // namespace
}  // namespace sluice
