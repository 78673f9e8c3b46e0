// The mixture-of-experts FFN of a Gemma 4 layer (gemma4.md §2.9, 26B-A4B): a router picks k of
// E experts per token; each picked expert is a gated GELU MLP on the token's pre_ffw_norm_2
// input; their weighted sum, normed, joins the normed dense FFN output.
//
// The step groups its tokens by expert: every expert that any token picked runs once, over
// the rows of all tokens routed to it, through the same repacked matmuls as the dense FFN
// (kernels/linear.h), so each picked expert's weights stream once per step and the others
// not at all. A matmul's row depends only on its own input row, and each token adds its
// experts' outputs in expert-id order, so a token's result does not depend on which tokens
// share its step, on the thread count or on the ISA set.
#include <algorithm>
#include <cmath>

#include "kernels/rowops.h"
#include "models/gemma/gemma_forward.h"

namespace sluice::models {

// The router and the per-expert matrices of layer il, repacked like the dense ones (and their
// file pages released as they are: one copy of the weights, docs/architecture.md).
void GemmaModel::build_expert_ops(int il, LayerOps& ops) {
  const GemmaExpertWeights& mw = w_.layers[il].moe;
  const ReleasePages& rel = w_.release;
  const std::string p = "blk." + std::to_string(il) + ".";
  ops.router = Linear::build({&mw.router, 1}, pool_, p + "ffn_gate_inp", false, &arena_, rel);
  const size_t E = mw.gate.size();
  ops.exp_gate_up.reserve(E);
  ops.exp_down.reserve(E);
  for (size_t e = 0; e < E; ++e) {
    const std::string n = p + "ffn_exps[" + std::to_string(e) + "]";
    ops.exp_gate_up.push_back(Linear::build_glu(mw.gate[e], mw.up[e], pool_, n + ".gate_up", &arena_, rel));
    ops.exp_down.push_back(Linear::build({&mw.down[e], 1}, pool_, n + ".down", false, &arena_, rel));
  }
}

// att_ (the dense FFN's output) becomes RMSNorm(att_; post_ffw_norm_1) + RMSNorm(y; post_ffw_norm_2),
// y the routed experts' weighted sum for the residual x_ (the layer's post-attention stream).
void GemmaModel::moe(int il) {
  const GemmaExpertWeights& mw = w_.layers[il].moe;
  const int64_t d = spec_.n_embd;
  route(il);
  run_experts(il);
  tap("moe_out", il, moe_y_.data(), T_, d);
  for_rows(pool_, T_, d * 3 * kCostCopy, [&](int64_t t) {
    float* a = &att_[t * d];
    ops_.rms_norm(a, mw.post_norm_dense.data(), a, d, spec_.eps);
    ops_.add_rms_norm(a, &moe_y_[t * d], mw.post_norm_experts.data(), d, spec_.eps);
  });
  prof_.mark(OpClass::kOther);
}

// Router (gemma4.md §2.9): z = ffn_gate_inp · (RMSNorm(x) · scale · d^-½); the k most probable
// experts of softmax(z), their probabilities renormalised to sum 1, times each expert's scale.
// Fills routes_ [T × k] (in descending probability, ties to the lower id) and groups the routes
// by expert: expert_row0_/expert_rows_ and each route's row in the grouped buffers.
void GemmaModel::route(int il) {
  const LayerSpec& ls = spec_.layers[il];
  const GemmaExpertWeights& mw = w_.layers[il].moe;
  const LayerOps& lo = layer_ops_[il];
  const int64_t d = spec_.n_embd, E = ls.n_expert, k = ls.n_expert_used;
  const float root = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));  // d^-½, rounded once
  grow(moe_in_, static_cast<size_t>(T_ * d));
  for_rows(pool_, T_, d * 2 * kCostCopy, [&](int64_t t) {
    float* r = &moe_in_[t * d];
    ops_.rms_norm(&x_[t * d], nullptr, r, d, spec_.eps);
    for (int64_t i = 0; i < d; ++i) r[i] = r[i] * mw.router_scale[i] * root;
  });
  grow(moe_logits_, static_cast<size_t>(T_ * E));
  matmul(lo.router, moe_in_.data(), T_, moe_logits_.data(), OpClass::kFfnGateUp);
  grow(routes_, static_cast<size_t>(T_ * k));
  for_rows(pool_, T_, E * kCostTranscendental, [&](int64_t t) {
    float* p = &moe_logits_[t * E];
    float mx = p[0];
    for (int64_t e = 1; e < E; ++e) mx = std::max(mx, p[e]);
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = kernels::exp_ref(p[e] - mx));
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    ExpertRoute* r = &routes_[t * k];
    float picked = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e) {
        bool taken = false;
        for (int64_t i = 0; i < j; ++i) taken |= r[i].expert == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      r[j] = {static_cast<int32_t>(best), p[best], 0};
      picked += p[best];
    }
    for (int64_t j = 0; j < k; ++j) r[j].weight = r[j].weight / picked * mw.expert_scale[r[j].expert];
  });
  if (tap_) {
    grow(moe_tap_, static_cast<size_t>(T_ * k));
    for (int64_t i = 0; i < T_ * k; ++i) moe_tap_[i] = static_cast<float>(routes_[i].expert);
    tap("moe_experts", il, moe_tap_.data(), T_, k);
    for (int64_t i = 0; i < T_ * k; ++i) moe_tap_[i] = routes_[i].weight;
    tap("moe_weights", il, moe_tap_.data(), T_, k);
  }
  // Group: expert e's routes take grouped rows [row0[e], row0[e] + rows[e]), in token order.
  expert_rows_.assign(static_cast<size_t>(E), 0);
  for (int64_t i = 0; i < T_ * k; ++i) ++expert_rows_[routes_[i].expert];
  expert_row0_.assign(static_cast<size_t>(E), 0);
  for (int64_t e = 1; e < E; ++e) expert_row0_[e] = expert_row0_[e - 1] + expert_rows_[e - 1];
  expert_fill_ = expert_row0_;
  for (int64_t i = 0; i < T_ * k; ++i) routes_[i].row = expert_fill_[routes_[i].expert]++;
}

// moe_y_[T × d] = Σ over each token's routes, in expert-id order, of weight · expert(xe), with
// xe = RMSNorm(x; pre_ffw_norm_2); every picked expert runs once over its grouped rows.
void GemmaModel::run_experts(int il) {
  const LayerSpec& ls = spec_.layers[il];
  const GemmaExpertWeights& mw = w_.layers[il].moe;
  const LayerOps& lo = layer_ops_[il];
  const int64_t d = spec_.n_embd, E = ls.n_expert, k = ls.n_expert_used, n = T_ * k;
  grow(moe_xg_, static_cast<size_t>(n * d));
  grow(moe_yg_, static_cast<size_t>(n * d));
  // Each token's normed input, written to the grouped row of each of its routes.
  for_rows(pool_, T_, d * (1 + k) * kCostCopy, [&](int64_t t) {
    const ExpertRoute* r = &routes_[t * k];
    float* first = &moe_xg_[r[0].row * d];
    ops_.rms_norm(&x_[t * d], mw.pre_norm.data(), first, d, spec_.eps);
    for (int64_t j = 1; j < k; ++j) std::copy_n(first, d, &moe_xg_[r[j].row * d]);
  });
  prof_.mark(OpClass::kOther);
  picked_.clear();
  for (int64_t e = 0; e < E; ++e)
    if (expert_rows_[e] > 0) picked_.push_back(static_cast<int32_t>(e));
  if (!lanes_.empty() && picked_.size() >= lanes_.size()) {
    run_experts_by_lane(il);
  } else {
    // Fewer picked experts than threads: each runs on the whole pool in turn.
    for (int32_t e : picked_) {
      const int64_t r0 = expert_row0_[e];
      run_gated_mlp(pool_, &isa_, glu_, lo.exp_gate_up[e], lo.exp_down[e], &moe_xg_[r0 * d], expert_rows_[e],
                    &moe_yg_[r0 * d], &prof_, OpClass::kFfnExperts, OpClass::kFfnExperts);
    }
  }
  grow(moe_y_, static_cast<size_t>(T_ * d));
  for_rows(pool_, T_, d * k * kCostCopy, [&](int64_t t) {
    // HF adds the experts' contributions in expert-id order (gemma4.md §2.9): so do we.
    ExpertRoute* r = &routes_[t * k];
    std::sort(r, r + k, [](const ExpertRoute& a, const ExpertRoute& b) { return a.expert < b.expert; });
    float* y = &moe_y_[t * d];
    std::fill_n(y, d, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const float* ye = &moe_yg_[r[j].row * d];
      for (int64_t i = 0; i < d; ++i) y[i] += ye[i] * r[j].weight;
    }
  });
}

// The picked experts of layer il in one pool job: each thread runs whole experts by itself (its
// lane: a one-thread pool, its own buffers), assigned longest-first to the least-loaded lane, so
// the step pays one dispatch instead of two per expert and every thread streams its own
// experts' weights. The same kernels on the same rows: results as on the whole pool.
void GemmaModel::run_experts_by_lane(int il) {
  const LayerOps& lo = layer_ops_[il];
  const int64_t d = spec_.n_embd;
  const size_t nl = lanes_.size();
  // Cost of an expert ~ its weight stream plus its rows' work (a row costs ~1/8 of the stream
  // in these units, it does not matter much: only the balance between lanes does).
  // (std::sort, not stable_sort: that one allocates, and a decode step allocates nothing.)
  std::sort(picked_.begin(), picked_.end(), [&](int32_t a, int32_t b) {
    return expert_rows_[a] != expert_rows_[b] ? expert_rows_[a] > expert_rows_[b] : a < b;
  });
  int64_t load[kMaxExpertLanes] = {};
  picked_lane_.resize(picked_.size());
  for (size_t i = 0; i < picked_.size(); ++i) {
    size_t best = 0;
    for (size_t l = 1; l < nl; ++l)
      if (load[l] < load[best]) best = l;
    picked_lane_[i] = static_cast<int32_t>(best);
    load[best] += 8 + expert_rows_[picked_[i]];
  }
  pool_.run([&](int ith, int) {
    ExpertLane& lane = *lanes_[ith];
    for (size_t i = 0; i < picked_.size(); ++i) {
      if (picked_lane_[i] != ith) continue;
      const int32_t e = picked_[i];
      const int64_t r0 = expert_row0_[e];
      run_gated_mlp(lane.serial, &isa_, lane.buf, lo.exp_gate_up[e], lo.exp_down[e], &moe_xg_[r0 * d], expert_rows_[e],
                    &moe_yg_[r0 * d], nullptr, OpClass::kFfnExperts, OpClass::kFfnExperts);
    }
  });
  if (prof_.on()) {
    for (int32_t e : picked_)
      prof_.bytes(OpClass::kFfnExperts, lo.exp_gate_up[e].stream_bytes() + lo.exp_down[e].stream_bytes());
    prof_.mark(OpClass::kFfnExperts);
  }
}

}  // namespace sluice::models
