#include "spec/drafter.h"

namespace sluice::spec {

void Draft::clear() {
  tokens_.clear();
  q_.clear();
  q_begin_.clear();
  source = -1;
}

void Draft::push(int32_t token) { tokens_.push_back(token); }

void Draft::push(int32_t token, std::span<const TokenProb> q) {
  if (q_begin_.empty()) q_begin_.push_back(0);
  tokens_.push_back(token);
  q_.insert(q_.end(), q.begin(), q.end());
  q_begin_.push_back(static_cast<uint32_t>(q_.size()));
}

std::span<const TokenProb> Draft::q(int32_t i) const {
  if (!has_q() || i < 0 || i >= size()) return {};
  return std::span<const TokenProb>(q_).subspan(q_begin_[i], q_begin_[i + 1] - q_begin_[i]);
}

}  // namespace sluice::spec
