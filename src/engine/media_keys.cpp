#include "engine/media_keys.h"

#include "kv/block_manager.h"

namespace sluice::engine {

std::vector<int32_t> media_keyed_prompt(const std::vector<int32_t>& prompt, const SoftTokens& soft) {
  std::vector<int32_t> out = prompt;
  const size_t n = soft.at.size();
  const size_t row_bytes = static_cast<size_t>(soft.width) * sizeof(float);
  for (size_t p = 0; p < n;) {
    if (soft.at[p] == nullptr) {
      ++p;
      continue;
    }
    size_t end = p;
    uint64_t h = kRootHash;
    for (; end < n && soft.at[end] != nullptr; ++end) h = hash_bytes(h, soft.at[end], row_bytes);
    for (size_t q = p; q < end; ++q) {
      const uint64_t offset = q - p;
      const uint64_t k = hash_bytes(h, &offset, sizeof offset);
      out[q] = static_cast<int32_t>(0x80000000u | static_cast<uint32_t>(k & 0x7fffffffu));
    }
    p = end;
  }
  return out;
}

}  // namespace sluice::engine
