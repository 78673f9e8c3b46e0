// Verification rules the engine does not run, kept as references its tests check against the
// engine and against each other (moved out of src/: the engine verifies with
// spec::accept_matching in ModelRunner::verify and trims an accepted run at a stop in
// Scheduler::accept). Every function returns how many drafts were accepted, a, and leaves
// a + 1 tokens in `out`: the accepted drafts, then one token of the target's.
// - `verify_sampled`: deterministic drafts through the sampler, accept_matching over rows.
// - `verify_rejection`, Leviathan et al. / Chen et al., for sampled drafts with their
//   distributions q: accept d ~ q with probability min(1, p(d)/q(d)), else draw from the
//   residual max(0, p − q)/Σ. Each output token has exactly the target's distribution p.
// - `keep_until_stop`: where an accepted run ends against a request's limits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"
#include "spec/drafter.h"
#include "spec/verify.h"

namespace sluice::spec {

// Deterministic verification through the sampler (greedy or sampling, penalties included).
// seq: the sequence with the n_drafts drafts at its end; row i (rows + i * row_stride, modified
// in place) is for the token at position seq.size() - n_drafts + i, with the tokens before it
// as history. Rows after the first mismatch are not read.
int32_t verify_sampled(const Sampler& s, std::span<const int32_t> seq, int32_t n_drafts, float* rows, size_t row_stride,
                       SamplerWorkspace& ws, std::vector<int32_t>& out);

// Rejection sampling: the test for one draft token x ~ q. u is uniform in [0, 1).
inline bool accept_draft(float p_x, float q_x, double u) { return q_x > 0.0f ? u * q_x < p_x : false; }

// The residual weights max(0, p − q) over p's support, by token id (Sampler::draw normalizes).
// Empty when p <= q everywhere. out is reused memory.
void residual(std::span<const TokenProb> p, std::span<const TokenProb> q, std::vector<TokenProb>& out);

struct RejectionScratch {
  std::vector<TokenProb> residual;
};

// Stochastic verification of a draft that carries q (Draft::has_q; without q every draft is
// rejected and the residual is p itself, which is still exact, only wasteful). p_of(i) returns the
// target's processed distribution for row i (i = 0 .. K; valid until the next call), e.g.
// Sampler::distribution over that row. pos0 is the position of the first draft; the uniforms
// come from s's keyed streams (kAccept, kResidual at the draft's position; the bonus token is
// a plain kDraw draw at pos0 + K).
template <class PFn>
int32_t verify_rejection(const Sampler& s, const Draft& d, int64_t pos0, PFn&& p_of, RejectionScratch& scratch,
                         std::vector<int32_t>& out) {
  out.clear();
  const int32_t k = d.size();
  for (int32_t i = 0; i < k; ++i) {
    const std::span<const TokenProb> p = p_of(i);
    const std::span<const TokenProb> q = d.q(i);
    const int32_t x = d.tokens()[i];
    if (accept_draft(prob_of(p, x), prob_of(q, x), s.uniform(pos0 + i, RandomStream::kAccept))) {
      out.push_back(x);
      continue;
    }
    residual(p, q, scratch.residual);
    // An empty residual means p <= q everywhere, i.e. p == q up to rounding: rejection then has
    // probability ~0 and p itself is the right distribution to draw from.
    const std::span<const TokenProb> r = scratch.residual.empty() ? p : std::span<const TokenProb>(scratch.residual);
    out.push_back(Sampler::draw(r, s.uniform(pos0 + i, RandomStream::kResidual)));
    return i;
  }
  out.push_back(Sampler::draw(p_of(k), s.uniform(pos0 + k, RandomStream::kDraw)));
  return k;
}

// How an accepted run ends against the request's limits, mirroring the plain path's check
// after each token: a stop id ends it (the stop token kept), else reaching max_tokens
// generated tokens or ctx_size sequence tokens ends it (that token kept).
enum class RunEnd : uint8_t { kNone, kStopToken, kLength };
struct KeptRun {
  int32_t n_keep;  // tokens of the run to keep; the rest are discarded with their K/V
  RunEnd end;
};
KeptRun keep_until_stop(std::span<const int32_t> run, std::span<const int32_t> stop_ids, int64_t n_generated,
                        int64_t max_tokens, int64_t n_tokens, int64_t ctx_size);

}  // namespace sluice::spec
