// Gemma 4 per-layer embeddings (gemma4.md §2.3): the per-layer inputs computed once per step,
// and the PLE block that ends each layer.
#include <cmath>

#include "kernels/ops.h"
#include "models/gemma/gemma_forward.h"

namespace sluice::models {

// ple[T × L·P] = (RMSNorm_P(Wpm·x0 / √d) + Tpl[t]·√P) / √2, with t the pad id (0) at
// soft-token positions (x0 there is the soft token: gemma4.md §9.4)
void GemmaModel::per_layer_inputs() {
  const int64_t d = spec_.n_embd, P = spec_.ple_dim, LP = static_cast<int64_t>(spec_.n_layer) * P;
  grow(ple_, static_cast<size_t>(T_ * LP));
  ple_model_proj_.run(pool_, x_.data(), T_, ple_.data(), scratch_, &isa_);
  prof_.bytes(OpClass::kOther, ple_model_proj_.stream_bytes());
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float tok_scale = std::sqrt(static_cast<float>(P));
  const float combine = 1.0f / std::sqrt(2.0f);
  grow(ple_row_, static_cast<size_t>(LP * pool_.size()));
  auto one = [&](int64_t t, float* tok_row) {
    kernels::dequant_row(w_.ple_tok, soft_[t] ? 0 : tok_[t], tok_row);
    float* row = ple_.data() + t * LP;
    for (int64_t l = 0; l < spec_.n_layer; ++l) {
      float* sl = row + l * P;
      for (int64_t i = 0; i < P; ++i) sl[i] *= proj_scale;
      ops_.rms_norm(sl, w_.ple_proj_norm.data(), sl, P, spec_.eps);
      for (int64_t i = 0; i < P; ++i) sl[i] = (sl[i] + tok_row[l * P + i] * tok_scale) * combine;
    }
  };
  if (T_ == 1 || pool_.size() == 1) {
    for (int64_t t = 0; t < T_; ++t) one(t, ple_row_.data());
    return;
  }
  pool_.run([&](int ith, int nth) {
    int64_t r0, r1;
    split_range(T_, ith, nth, &r0, &r1);
    for (int64_t t = r0; t < r1; ++t) one(t, ple_row_.data() + ith * LP);
  });
}

// x += RMSNorm(Wproj · (gelu_tanh(Winp_gate · x) ⊙ ple[:, l, :]); post_norm)
void GemmaModel::ple_block(int il) {
  const GemmaLayerWeights& lw = w_.layers[il];
  const LayerOps& lo = layer_ops_[il];
  const int64_t P = spec_.ple_dim, LP = static_cast<int64_t>(spec_.n_layer) * P;
  grow(pg_, static_cast<size_t>(T_ * P));
  lo.inp_gate.run(pool_, x_.data(), T_, pg_.data(), scratch_, &isa_);
  for_rows(pool_, T_, P * kCostTranscendental,
           [&](int64_t t) { ops_.gelu_mul(&pg_[t * P], &ple_[t * LP + il * P], &pg_[t * P], P); });
  lo.proj.run(pool_, pg_.data(), T_, att_.data(), scratch_, &isa_);
  prof_.bytes(OpClass::kOther, lo.inp_gate.stream_bytes() + lo.proj.stream_bytes());
  end_layer(il, lw.post_norm);
}

}  // namespace sluice::models
