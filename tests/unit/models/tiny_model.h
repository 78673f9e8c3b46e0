// Builds small random Gemma 3 / Gemma 4 GGUF files in memory for C++ tests that need a
// model but no golden data (batch invariance, chunking, load errors). Correctness against
// transformers is tested with the Python-made fixtures in tests/data/golden.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace sluice::test {

struct TinyConfig {
  std::string arch = "gemma4";
  int n_layer = 10, n_embd = 64, n_head = 4, n_head_kv = 1, hd_swa = 32, hd_full = 64;
  int n_ff = 128, n_vocab = 96, window = 8, n_shared = 4, ple = 16;
  bool double_wide = true;
  bool k_eq_v = false;  // Gemma 4: global layers without attn_v (31B)
  // Gemma 4 mixture of experts (gemma4.md §2.9) when n_expert > 0: every layer gets a router
  // and n_expert experts of width n_ff_exp beside its dense FFN, n_expert_used per token.
  int n_expert = 0, n_expert_used = 2, n_ff_exp = 32;
  bool split_gate_up = false;  // ffn_gate_exps + ffn_up_exps instead of the fused ffn_gate_up_exps
  int n_head_kv_global = 0;    // Gemma 4: KV heads of global layers (0: n_head_kv), a per-layer array
  std::string wrong_experts;   // tensor name to write with one expert fewer (third dimension)
  std::string wrong_rows;      // tensor name to write with 32 rows more (second dimension)
  float softcap = 30.0f;
  bool output_copy = false;    // writes output.weight, a copy of token_embd: untied, the same values
  std::set<std::string> omit;  // tensor names to leave out
  std::string wrong_shape;     // tensor name to write with a wrong shape
  uint64_t seed = 1;
  // Type of the 2-D weight matrices (quantized from the random f32 values); matrices whose
  // rows are not a multiple of the type's block stay F32.
  DType matrix_type = DType::F32;
};

// Gemma 4: pattern [S,S,S,S,F] repeated; Gemma 3: layer l global iff (l+1) % 6 == 0.
std::vector<uint8_t> make_tiny_gguf(const TinyConfig& c);

// `c` made 26B-A4B-shaped: every layer a MoE FFN (8 experts, 2 per token) beside the dense one,
// K=V global layers with fewer KV heads (2 sliding, 1 global), no KV sharing, no PLE.
TinyConfig tiny_moe_config(TinyConfig c = {});

}  // namespace sluice::test
