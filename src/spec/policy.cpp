#include "spec/policy.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"

namespace sluice::spec {

double StepCostCurve::cost(int32_t tokens) const {
  const auto& p = points;
  if (p.empty()) return static_cast<double>(tokens);
  if (p.size() == 1 || tokens <= p.front().first) return p.front().second;
  size_t i = 1;
  while (i + 1 < p.size() && p[i].first < tokens) ++i;
  const auto [t0, c0] = p[i - 1];
  const auto [t1, c1] = p[i];
  return c0 + (c1 - c0) * static_cast<double>(tokens - t0) / static_cast<double>(t1 - t0);
}

void StepCostCurve::validate() const {
  if (points.empty()) fail("step-cost curve: no points");
  for (size_t i = 0; i < points.size(); ++i) {
    const auto [t, c] = points[i];
    if (t < 1) fail("step-cost curve: token count %d must be >= 1", t);
    if (!(c > 0) || !std::isfinite(c)) fail("step-cost curve: the cost at %d tokens must be > 0", t);
    if (i > 0 && t <= points[i - 1].first)
      fail("step-cost curve: token counts must ascend (%d after %d)", t, points[i - 1].first);
    if (i > 0 && c < points[i - 1].second)
      fail("step-cost curve: the cost at %d tokens is below the cost at %d", t, points[i - 1].first);
  }
}

StepCostCurve StepCostCurve::builtin() {
  // Relative to a 1-token step; see the header.
  return {{{1, 1.0}, {4, 1.05}, {8, 1.3}, {16, 2.0}, {24, 2.8}, {40, 4.4}, {72, 7.5}, {256, 25.0}}};
}

StepCostCurve StepCostCurve::parse(const std::string& text) {
  StepCostCurve c;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    size_t used_t = 0, used_c = 0;
    int32_t t = 0;
    double cost = 0;
    try {
      if (colon == std::string::npos) throw std::invalid_argument("no colon");
      t = std::stoi(item.substr(0, colon), &used_t);
      cost = std::stod(item.substr(colon + 1), &used_c);
    } catch (const std::exception&) {
      fail("step-cost curve: '%s' is not TOKENS:COST", item.c_str());
    }
    if (used_t != colon || used_c != item.size() - colon - 1)
      fail("step-cost curve: '%s' is not TOKENS:COST", item.c_str());
    c.points.emplace_back(t, cost);
  }
  c.validate();
  return c;
}

double expected_tokens(double a, int32_t k) {
  if (a >= 1) return k + 1;
  if (a <= 0) return 1;
  return (1 - std::pow(a, k + 1)) / (1 - a);
}

void AcceptanceEstimate::record(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  hits_ = kDecay * hits_ + accepted;
  trials_ = kDecay * trials_ + accepted + (accepted < drafted ? 1 : 0);
}

void AcceptanceEstimate::offered(bool any) {
  offers_ = kDecay * offers_ + (any ? 1 : 0);
  chances_ = kDecay * chances_ + 1;
}

void ShadowDraft::start(std::span<const int32_t> drafts) {
  drafts_.assign(drafts.begin(), drafts.end());
  matched_ = 0;
}

void ShadowDraft::next(int32_t token, AcceptanceEstimate& e) {
  if (drafts_.empty()) return;
  const int32_t k = static_cast<int32_t>(drafts_.size());
  if (token == drafts_[static_cast<size_t>(matched_)] && ++matched_ < k) return;
  e.record(k, matched_);
  drafts_.clear();
}

int32_t StepPlanner::choose(double a, int32_t cap, bool sets_pace) const {
  return best_length(sets_pace ? 1.0 : pace_, a, cap, tokens_, outputs_);
}

double StepPlanner::worth_of_a_row(const StepCostCurve& curve, int32_t tokens, double outputs) {
  if (!(outputs > 0)) return 1;
  const double c0 = curve.cost(tokens);
  const double row = c0 - curve.cost(std::max(1, tokens - 1));
  return std::clamp(row * outputs / c0, 0.0, 1.0);
}

double StepPlanner::gain(double pace, double a, int32_t k) const {
  const double own = expected_tokens(a, k) - 1;
  if (pace >= a) return own;
  // The tokens the batch keeps pace with count in full; those beyond it put this sequence
  // ahead, and with nothing waiting, ending early saves only its own row in the steps at the
  // batch's end.
  const double kept = expected_tokens(pace, k) - 1;
  return kept + (own - kept) * ahead_worth_;
}

int32_t StepPlanner::best_length(double pace, double a, int32_t cap, int32_t tokens, double outputs) const {
  int32_t best = 0;
  const double c0 = curve_.cost(tokens);
  double best_rate = outputs / c0;
  for (int32_t k = 1; k <= cap; ++k) {
    const double charged = c0 + (1 + margin_) * (curve_.cost(tokens + k) - c0);
    const double rate = (outputs + gain(pace, a, k)) / charged;
    if (rate > best_rate * (1 + 1e-9)) {
      best = k;
      best_rate = rate;
    }
  }
  return best;
}

void StepPlanner::add(double a, int32_t k, bool sets_pace) {
  tokens_ += k;
  outputs_ += gain(sets_pace ? 1.0 : pace_, a, k);
}

}  // namespace sluice::spec
