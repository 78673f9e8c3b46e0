#include "engine/kv_budget.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace sluice::engine {

uint64_t kv_block_bytes(const KvGroupSpec& g, int32_t block_tokens, KvType t) {
  return static_cast<uint64_t>(g.n_layers) * 2 * block_tokens * g.row_elems() * kv_type_size(t);
}

uint64_t kv_bytes_per_token(const std::vector<KvGroupSpec>& groups, KvType t) {
  uint64_t b = 0;
  for (const KvGroupSpec& g : groups) b += kv_block_bytes(g, 1, t);
  return b;
}

uint64_t draft_kv_share(uint64_t total, const std::vector<KvGroupSpec>& target, const std::vector<KvGroupSpec>& draft,
                        KvType t) {
  const uint64_t bt = kv_bytes_per_token(target, t), bd = kv_bytes_per_token(draft, t);
  if (bt + bd == 0) return 0;
  return static_cast<uint64_t>(static_cast<double>(total) * static_cast<double>(bd) / static_cast<double>(bt + bd));
}

static int32_t peak_blocks(const KvGroupSpec& g, int32_t n_positions, int32_t bt, int32_t chunk, int32_t margin) {
  const int32_t all = (n_positions + bt - 1) / bt;
  if (g.window <= 0) return all;
  return std::min(all, (g.window - 1 + margin + chunk + bt - 1) / bt + 1);  // as BlockManager::peak_blocks
}

std::vector<int32_t> kv_blocks_per_group(const std::vector<KvGroupSpec>& groups, const KvBudget& b) {
  if (b.ctx_size < 2) fail("--ctx-size must be at least 2");
  if (b.parallel < 1) fail("--parallel must be at least 1");
  if (b.block_tokens < 1) fail("block size must be positive");
  std::vector<int32_t> blocks, one_seq;
  uint64_t bytes = 0, one_bytes = 0;
  for (const KvGroupSpec& g : groups) {
    const int32_t peak = peak_blocks(g, b.ctx_size, b.block_tokens, b.chunk, b.window_margin);
    const int64_t n = g.window > 0 ? static_cast<int64_t>(peak) * (b.parallel + 1)
                                   : static_cast<int64_t>(peak) * b.parallel;
    if (n > (1 << 30)) fail("KV budget: %lld blocks in one group is too many", static_cast<long long>(n));
    blocks.push_back(static_cast<int32_t>(n));
    one_seq.push_back(peak);
    bytes += static_cast<uint64_t>(n) * kv_block_bytes(g, b.block_tokens, b.type);
    one_bytes += static_cast<uint64_t>(peak) * kv_block_bytes(g, b.block_tokens, b.type);
  }
  if (b.memory_bytes == 0 || bytes == 0) return blocks;
  if (b.memory_bytes < one_bytes)
    fail("--kv-memory %.1f MiB cannot hold one sequence of --ctx-size %d (needs %.1f MiB)", b.memory_bytes / 1048576.0,
         b.ctx_size, one_bytes / 1048576.0);
  const double scale = static_cast<double>(b.memory_bytes) / static_cast<double>(bytes);
  for (size_t i = 0; i < blocks.size(); ++i)
    blocks[i] = std::max(one_seq[i], static_cast<int32_t>(std::floor(blocks[i] * scale)));
  return blocks;
}

}  // namespace sluice::engine
