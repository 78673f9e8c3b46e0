#include "threading/work_split.h"

#include "base/error.h"
#include "threading/thread_pool.h"

namespace sluice {

void WorkSplit::reserve(int nth) {
  if (nth < 1) fail("WorkSplit: thread count must be >= 1 (got %d)", nth);
  if (nth <= max_threads_) return;
  ranges_.reset(new Range[nth]);
  max_threads_ = nth;
}

void WorkSplit::reset(int64_t n, int nth) {
  reserve(nth);
  if (n < 0 || n > UINT32_MAX) fail("WorkSplit: %lld units out of range", static_cast<long long>(n));
  nth_ = nth;
  for (int i = 0; i < nth; ++i) {
    int64_t b, e;
    split_range(n, i, nth, &b, &e);
    ranges_[i].v.store(pack(static_cast<uint32_t>(b), static_cast<uint32_t>(e)), std::memory_order_relaxed);
  }
}

void WorkSplit::reset(const int64_t* bounds, int nth) {
  reserve(nth);
  if (bounds[0] != 0 || bounds[nth] > UINT32_MAX) fail("WorkSplit: ranges must start at 0 and fit 32 bits");
  nth_ = nth;
  for (int i = 0; i < nth; ++i) {
    if (bounds[i + 1] < bounds[i]) fail("WorkSplit: range bounds must not decrease");
    ranges_[i].v.store(pack(static_cast<uint32_t>(bounds[i]), static_cast<uint32_t>(bounds[i + 1])),
                       std::memory_order_relaxed);
  }
}

namespace {
// Units one take claims from a range with `left` units.
inline uint32_t run_of(uint32_t left, int64_t max_run, int div) {
  uint32_t k = left / static_cast<uint32_t>(div) > 0 ? left / static_cast<uint32_t>(div) : 1;
  if (max_run > 0 && k > max_run) k = static_cast<uint32_t>(max_run);
  return k;
}
}  // namespace

bool WorkSplit::take_run(int r, bool front, int64_t max_run, int64_t* begin, int64_t* end) {
  std::atomic<uint64_t>& a = ranges_[r].v;
  uint64_t v = a.load(std::memory_order_relaxed);
  for (;;) {
    const uint32_t lo = static_cast<uint32_t>(v), hi = static_cast<uint32_t>(v >> 32);
    if (lo >= hi) return false;
    const uint32_t k = run_of(hi - lo, max_run, run_div_);
    const uint32_t b = front ? lo : hi - k;
    if (a.compare_exchange_weak(v, front ? pack(lo + k, hi) : pack(lo, hi - k), std::memory_order_relaxed)) {
      *begin = b;
      *end = b + k;
      return true;
    }
  }
}

bool WorkSplit::take(int ith, int64_t max_run, int64_t* begin, int64_t* end) {
  if (take_run(ith, /*front=*/true, max_run, begin, end)) return true;
  for (;;) {
    // The range with the most units left (a racy look; the take itself is atomic).
    int best = -1;
    uint32_t most = 0;
    for (int r = 0; r < nth_; ++r) {
      const uint64_t v = ranges_[r].v.load(std::memory_order_relaxed);
      const uint32_t lo = static_cast<uint32_t>(v), hi = static_cast<uint32_t>(v >> 32);
      if (hi > lo && hi - lo > most) {
        most = hi - lo;
        best = r;
      }
    }
    if (best < 0) return false;
    if (take_run(best, /*front=*/false, max_run, begin, end)) return true;
  }
}

void WorkSplit::set_run_div(int div) {
  if (div < 1) fail("WorkSplit: run divisor must be >= 1 (got %d)", div);
  run_div_ = div;
}

bool WorkSplit::next(int ith, int64_t* begin, int64_t* end) { return take(ith, 0, begin, end); }

bool WorkSplit::next(int ith, int64_t* unit) {
  int64_t e;
  return take(ith, 1, unit, &e);
}

}  // namespace sluice
