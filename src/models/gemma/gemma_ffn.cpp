// The FFN step of a Gemma layer (gemma4.md §2.4, gemma3.md §2): a dense gated GELU MLP.
#include "models/gemma/gemma_forward.h"

namespace sluice::models {

namespace {
// Steps of at most this many tokens have the FFN down's input quantized by gate|up (ffn()).
constexpr int64_t kPrequantizeMaxRows = 8;
}  // namespace

// x += RMSNorm(Wdown · (gelu_tanh(Wgate·m) ⊙ Wup·m)),  m = xn (ffn_norm applied by attention());
// MoE layers add their routed experts' branch first (moe(), gemma_moe.cpp).
void GemmaModel::ffn(int il) {
  const GemmaLayerWeights& lw = w_.layers[il];
  const LayerOps& lo = layer_ops_[il];
  const int64_t d = spec_.n_embd;
  run_gated_mlp(pool_, &isa_, glu_, lo.gate_up, lo.down, xn_.data(), T_, att_.data(), &prof_, OpClass::kFfnGateUp,
                OpClass::kFfnDown);
  tap("ffn_out", il, att_.data(), T_, d);
  if (spec_.layers[il].n_expert > 0) moe(il);
  if (spec_.ple_dim > 0) {
    for_rows(pool_, T_, d * 2 * kCostCopy,
             [&](int64_t t) { ops_.add_rms_norm(&x_[t * d], &att_[t * d], lw.post_ffw_norm.data(), d, spec_.eps); });
  } else {
    end_layer(il, lw.post_ffw_norm);
  }
  prof_.mark(OpClass::kOther);
}

void run_gated_mlp(ThreadPool& pool, const kernels::CpuKernels* isa, GluBuffers& buf, const Linear& gate_up,
                   const Linear& down, const float* x, int64_t m, float* y, ProfileMarks* prof, OpClass gu,
                   OpClass dn) {
  const int64_t ff = down.cols();
  // act = gelu_tanh(gate) ⊙ up, taken inside the fused gate|up matmul (kernels/linear.h).
  grow(buf.act, static_cast<size_t>(m * ff));
  // Decode steps (a few rows): when the down matrix reads 32-blocks, the gate|up call quantizes
  // act for it as it goes (Linear::run_glu), so the down call starts streaming at once instead
  // of each thread first quantizing the whole row. Not in prefill: there a run's act rows no
  // longer fit L1, and the extra pass costs more than it saves (docs/performance.md §2).
  const bool preq = m <= kPrequantizeMaxRows && down.quantized_input() == kernels::ActFormat::kA8_32 && ff % 32 == 0;
  kernels::ActRows q{kernels::ActFormat::kA8_32, nullptr, kernels::act_row_stride(kernels::ActFormat::kA8_32, ff), ff};
  if (preq) {
    grow(buf.act_q, static_cast<size_t>(m) * q.stride);
    q.base = buf.act_q.data();
  }
  gate_up.run_glu(pool, x, m, buf.act.data(), buf.scratch, isa, preq ? &q : nullptr);
  if (prof) prof->account(gate_up, gu);
  if (preq) {
    down.run_quantized(pool, q, m, y, buf.scratch, isa);
  } else {
    down.run(pool, buf.act.data(), m, y, buf.scratch, isa);
  }
  if (prof) prof->account(down, dn);
}

}  // namespace sluice::models
