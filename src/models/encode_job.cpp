#include <algorithm>

#include "models/encoder.h"

namespace sluice::models {

bool EncodeJob::run_piece(int64_t rows) {
  if (done()) return true;
  const int64_t n = stage_rows(stage_), align = std::max<int64_t>(1, row_align(stage_));
  int64_t end = std::min(n, row_ + std::max<int64_t>(rows, 1));
  if (end < n) end = std::max(row_ + align, end / align * align);  // row_ is a multiple of align
  end = std::min(end, n);
  run_rows(stage_, row_, end);
  ++pieces_;
  row_ = end;
  if (row_ >= n) ++stage_, row_ = 0;
  return done();
}

bool EncodeJob::run_for(std::chrono::nanoseconds budget) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  while (!done()) {
    const int kind = stage_kind(stage_);
    const double left = static_cast<double>((budget - (Clock::now() - t0)).count());
    // Unmeasured: one aligned row group, to learn the rate cheaply.
    const double per_row = ns_per_row_[kind];
    const int64_t rows = per_row > 0 ? static_cast<int64_t>(std::max(0.0, left) / per_row) : 1;
    const int64_t r0 = row_;
    const auto p0 = Clock::now();
    const int stage = stage_;
    run_piece(rows);
    const int64_t did = (stage_ == stage ? row_ : stage_rows(stage)) - r0;
    const double ns = static_cast<double>((Clock::now() - p0).count()) / static_cast<double>(std::max<int64_t>(did, 1));
    ns_per_row_[kind] = per_row > 0 ? 0.5 * (per_row + ns) : ns;
    if (Clock::now() - t0 >= budget) break;
  }
  return done();
}

void EncodeJob::run_all() {
  while (!done()) run_piece(stage_rows(stage_));
}

}  // namespace sluice::models
