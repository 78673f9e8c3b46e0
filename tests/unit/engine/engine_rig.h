// What the engine tests share: the fake model's vocabulary and KV layout, and greedy requests,
// whose every token the fake model's oracle predicts.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "fake_model.h"

namespace sluice::engine {

using test::FakeModel;
using test::make_prompt;

inline constexpr int32_t kVocab = 97;

// Global group + sliding group (window 8).
inline std::vector<KvGroupSpec> rig_groups() { return {{1, 1, 2, 0}, {1, 1, 2, 8}}; }

// Temperature 0: the output is the oracle's greedy continuation.
inline EngineRequest greedy_request(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens) {
  EngineRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

}  // namespace sluice::engine
