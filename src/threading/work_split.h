// Dynamic division of a job's units among the threads of a ThreadPool job, for work whose
// units cost about the same but whose threads do not run at the same speed (a shared VM's
// cores, DRAM contention): a static split leaves the faster thread spinning at the end.
//
// [0, n) starts cut into nth contiguous ranges (sized by `split_range`). A thread takes runs
// of units from the FRONT of its own range, in order — so each thread streams one contiguous
// run of memory, as the hardware prefetchers want — and when its range is empty it takes
// runs from the BACK of the range with the most units left. A take is one compare-and-swap
// and claims 1/run_div of what is left in that range (at least one unit; run_div 4 unless
// set: kernels/tuning.h tunes it): few takes while
// much is left, single units at the end, so the threads finish within about one unit of
// each other.
//
// Results must not depend on which thread computes a unit (true of every kernel here: each
// output is a pure function of its inputs), so the split changes only the timing.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace sluice {

class WorkSplit {
 public:
  WorkSplit() = default;
  explicit WorkSplit(int max_threads) { reserve(max_threads); }

  // Room for nth threads (allocates only when nth exceeds what it has).
  void reserve(int nth);
  // Before the job (one thread): n units over nth threads (reserves room for them).
  void reset(int64_t n, int nth);
  // The same with the ranges given: thread i starts with [bounds[i], bounds[i + 1]) (nth + 1
  // non-decreasing entries from 0), for units of unequal cost cut where the costs balance.
  void reset(const int64_t* bounds, int nth);
  // Inside the job: the next run [*begin, *end) for thread ith; false when every unit has been
  // taken.
  bool next(int ith, int64_t* begin, int64_t* end);
  // One unit at a time (the same order).
  bool next(int ith, int64_t* unit);
  // Before the job: the share of a range's rest one take claims (1/div, div >= 1).
  void set_run_div(int div);

 private:
  struct alignas(64) Range {
    std::atomic<uint64_t> v{0};  // lo | hi << 32: units [lo, hi) not yet taken
  };
  static uint64_t pack(uint32_t lo, uint32_t hi) { return lo | static_cast<uint64_t>(hi) << 32; }
  bool take(int ith, int64_t max_run, int64_t* begin, int64_t* end);  // max_run 0: no limit
  // One compare-and-swap loop: a run from the front (own range) or the back (stealing) of r.
  bool take_run(int r, bool front, int64_t max_run, int64_t* begin, int64_t* end);

  int max_threads_ = 0;
  int nth_ = 0;
  int run_div_ = 4;
  std::unique_ptr<Range[]> ranges_;
};

}  // namespace sluice
