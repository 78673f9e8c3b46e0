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
  int n_expert = 0;     // Gemma 4: writes expert_count when > 0 (MoE files)
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

}  // namespace sluice::test
