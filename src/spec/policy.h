// How many tokens to draft: per sequence from its recent acceptance, per step from what the
// extra tokens cost. The engine step's cost depends on how many tokens it computes, T: while
// the weights' streaming dominates, a step of a few more tokens costs little more; once the
// step is compute-bound, every token costs its share. Drafts are worth adding only while the
// tokens they are expected to yield outweigh what they add to the step.
//
// The rule (docs/spec-policy.md "The rule"): a step that computes T tokens does N tokens of
// work (N = T without drafts: a decode's token and a prefill chunk's tokens are all work the
// requests need) and runs at N / cost(T). Sequence by sequence, drafting K more tokens at
// per-token acceptance a is expected to yield g(a, K) = E(a, K) − 1 = a(1 − a^K)/(1 − a) extra
// tokens for the extra cost Δ = cost(T + K) − cost(T). K is the value in [0, cap] that
// maximises (N + g(a, K)) / (cost(T) + (1 + m)·Δ): the drafts' extra cost is charged (1 + m)
// times, a margin for what the model leaves out (proposing, verifying and rolling back, the
// error of the acceptance estimate and of the curve), so drafts that would gain only a few
// percent by the model are not made. K = 0 unless some K strictly beats it. The chosen
// drafts then join T and N for the next sequence. Each choice keeps the step's expected
// tokens per unit cost at least what it was (the charged cost is never below the true one),
// so under the model speculation never lowers the aggregate throughput: when the step is
// compute-bound, K shrinks or drops to 0.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace sluice::spec {

// cost(T): the cost of one engine step computing T tokens, in any unit (ms, or relative to
// a 1-token step; only ratios matter). Points (T, cost) with T ascending from 1 and costs
// non-decreasing; between points linear, beyond the last one the last segment's slope.
// `sluice tune` measures one per host (tune/tune_cache.h keeps it, at tune::kCurveTokens);
// `sluice bench --spec-verify` prints the same (tokens_per_step, ms_per_step) pairs.
struct StepCostCurve {
  std::vector<std::pair<int32_t, double>> points;

  double cost(int32_t tokens) const;
  void validate() const;  // sluice::Error naming the problem
  // The built-in model (relative to a 1-token step), from `sluice bench --spec-verify` with
  // Gemma 3 270M on a 2-core Intel Xeon host (docs/spec-policy.md): nearly flat to a few
  // tokens, then close to linear. A small model turns compute-bound early, so for larger
  // ones it is conservative: it switches speculation off sooner than they need.
  static StepCostCurve builtin();
  // "T:cost,T:cost,..." (e.g. "1:1,8:1.2,64:4"); sluice::Error on a malformed list.
  static StepCostCurve parse(const std::string& text);
  bool operator==(const StepCostCurve&) const = default;
};

// Expected tokens one verification of k drafts yields at per-token acceptance a: the accepted
// run then the target's own token, Σ_{i=0..k} a^i = (1 − a^(k+1)) / (1 − a).
double expected_tokens(double a, int32_t k);

// A sequence's recent acceptance: an exponentially weighted count of drafts accepted over
// drafts "tried" (those accepted, plus the first rejected one when the run stopped early —
// the drafts after it were never tested). Starts from a prior worth `prior_weight` trials.
//
// It counts only the positions where the proposer offered drafts. How often it offers at all
// is kept beside it (`offered`, once a decoding step, weighted by kDecay, from a prior of
// always): a sequence of free text that rarely repeats an n-gram keeps the rate of its few
// proposals, yet moves one token a step. yield_rate() = offer rate × acceptance is what the
// batch's pace (StepPlanner) reads.
class AcceptanceEstimate {
 public:
  static constexpr double kDecay = 0.7;  // weight of the past at each verification
  static constexpr double kPrior = 0.6, kPriorWeight = 2;
  void record(int32_t drafted, int32_t accepted);
  double rate() const { return hits_ / trials_; }
  void offered(bool any);
  double yield_rate() const { return rate() * offers_ / chances_; }

 private:
  double hits_ = kPrior * kPriorWeight, trials_ = kPriorWeight;
  double offers_ = kPriorWeight, chances_ = kPriorWeight;
};

// While the policy drafts nothing for a sequence whose proposer is cheap (Drafter::cheap),
// the scheduler still takes a proposal and scores it against the tokens that follow, as a
// verification would have: the estimate keeps learning while speculation is off, so a
// sequence that turns to copying gets its drafts back, and one that never drafted starts
// from what its text does rather than from the prior alone.
class ShadowDraft {
 public:
  bool pending() const { return !drafts_.empty(); }
  void start(std::span<const int32_t> drafts);
  // The sequence's next final token. When it settles the proposal (a mismatch, or all of it
  // matched), the outcome goes into `e` as a verification's would and the shadow clears.
  void next(int32_t token, AcceptanceEstimate& e);
  void clear() { drafts_.clear(); }

 private:
  std::vector<int32_t> drafts_;
  int32_t matched_ = 0;
};

// One step's choices, sequence by sequence (see the file comment).
//
// The pace. The rule counts every expected token as work done, which holds while a sequence
// that ends sooner frees its slot for a request that waits. When nothing waits, the running
// sequences are the batch until they end, and the batch ends with its slowest member: a
// sequence that drafts well while the others do not only runs ahead, ends early and leaves
// the last steps to fewer sequences at nearly the same cost each (a memory-bound step), while
// every step it drafts in costs all of them more. Measured on the 270M, sampled free text
// (docs/spec-policy.md "The pace"): at 2 streams one sequence drafted 95 tokens a round at
// 75% accepted and the round took 7% longer than without drafts. So the scheduler passes the
// lowest yield rate of the batch (AcceptanceEstimate::yield_rate) as `pace`, and a drafted
// token counts in full only up to it: the tokens a sequence expects beyond the pace are worth
// what its early end saves, one row of the step before drafts — the curve's marginal cost of
// a row over the step's cost per output (0 where a second row is free, as on the 270M at 2
// sequences). The slowest sequence (`sets_pace`) sets the pace: all its tokens count.
class StepPlanner {
 public:
  // `tokens`: tokens the step computes without drafts; `outputs`: the work they do (the
  // engine counts every one of them); `margin`: m, the drafts' extra cost counts (1 + m) times;
  // `pace`: the yield at which the batch advances (above), 1 when the rule's full count holds.
  StepPlanner(const StepCostCurve& curve, int32_t tokens, double outputs, double margin = 0, double pace = 1)
      : curve_(curve),
        tokens_(tokens),
        outputs_(outputs),
        margin_(margin),
        pace_(pace),
        ahead_worth_(worth_of_a_row(curve, tokens, outputs)) {}
  // The draft length in [0, cap] for a sequence at acceptance a; `sets_pace`: it is the
  // batch's slowest (its yield rate is the pace), so all its tokens count.
  int32_t choose(double a, int32_t cap, bool sets_pace = false) const;
  // The sequence drafted k tokens (its proposer may give fewer than chosen).
  void add(double a, int32_t k, bool sets_pace = false);
  int32_t tokens() const { return tokens_; }
  double outputs() const { return outputs_; }
  double pace() const { return pace_; }

 private:
  const StepCostCurve& curve_;
  int32_t tokens_;
  double outputs_;
  double margin_;
  double pace_;
  double ahead_worth_;  // a token beyond the pace, in output tokens: one row of the step before drafts
  // The curve's marginal cost of a row at `tokens` over the step's cost per output, in [0, 1].
  static double worth_of_a_row(const StepCostCurve& curve, int32_t tokens, double outputs);
  // The work k drafts at acceptance a add, in output tokens: all of expected_tokens − 1 at
  // the pace, less for the part beyond it (the pace, above).
  double gain(double pace, double a, int32_t k) const;
  // The rule at acceptance a in a step of `tokens` computed, `outputs` done.
  int32_t best_length(double pace, double a, int32_t cap, int32_t tokens, double outputs) const;
};

// The engine's policy settings (--spec-policy, --spec-cost, --spec-margin).
struct DraftPolicy {
  // The default m (docs/spec-policy.md "Measuring the policy"): a hedge for the model's error.
  // On the 270M under load, 0.2 let drafts on sampled free text cost 2-6% at 4 streams that 0.5
  // does not, for 4% more at 8 grounded streams.
  static constexpr double kDefaultMargin = 0.5;
  bool adaptive = false;  // false: every sequence drafts up to the cap
  StepCostCurve curve = StepCostCurve::builtin();
  double margin = kDefaultMargin;  // >= 0
};

}  // namespace sluice::spec
