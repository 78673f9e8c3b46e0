// Prefix-cache keys for soft-token positions (docs/architecture.md, "media in prefix-cache
// keys"). Two different images expand to the same placeholder ids, so a block hash over the ids
// alone would hand one image's K/V to the other. The prefix cache therefore hashes a keyed copy
// of the prompt: each soft position's id replaced by a negative key (no token id is negative)
// from the content hash of its image's rows and its offset in the image. The same image (same
// rows) at the same place gets the same keys and reuses the K/V; any other image does not.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace sluice::engine {

// The keyed prompt for `prompt` with `soft` (soft.at as long as prompt). Each maximal run of
// positions with rows is one item; its key is the hash of those rows.
std::vector<int32_t> media_keyed_prompt(const std::vector<int32_t>& prompt, const SoftTokens& soft);

}  // namespace sluice::engine
