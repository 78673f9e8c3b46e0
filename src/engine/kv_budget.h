// How many KV blocks each layer group gets: from --ctx-size × --parallel, or from a memory
// budget --kv-memory split in the same proportions.
//
// For ctx × parallel, a global group gets parallel · ⌈ctx / bt⌉ blocks (every sequence at
// full length at once). A sliding group needs per sequence only its window plus one prefill
// chunk (BlockManager::peak_blocks); it gets that for parallel + 1 sequences, the extra
// share keeping recently released window blocks around for prefix-cache hits.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"

namespace sluice::engine {

struct KvBudget {
  int32_t ctx_size = 4096;
  int32_t parallel = 4;
  int32_t block_tokens = 16;
  int32_t chunk = 256;        // the scheduler's token budget (largest prefill chunk)
  uint64_t memory_bytes = 0;  // 0: sized by ctx × parallel
  KvType type = KvType::F32;
  int32_t window_margin = 0;  // BlockManager::set_window_margin of the engine (a drafter's)
};

uint64_t kv_block_bytes(const KvGroupSpec& g, int32_t block_tokens, KvType t);
// K/V bytes one position takes in every group of a model (sliding groups included).
uint64_t kv_bytes_per_token(const std::vector<KvGroupSpec>& groups, KvType t);
// A draft model's K/V shares one memory budget with its target's (--spec draft --kv-memory):
// each gets the budget in proportion to its bytes per token, so both hold about as many
// positions. Returns the draft's share; the target's is total − draft's.
uint64_t draft_kv_share(uint64_t total, const std::vector<KvGroupSpec>& target, const std::vector<KvGroupSpec>& draft,
                        KvType t);
// Throws sluice::Error when the budget cannot hold even one sequence of ctx_size.
std::vector<int32_t> kv_blocks_per_group(const std::vector<KvGroupSpec>& groups, const KvBudget& b);

}  // namespace sluice::engine
