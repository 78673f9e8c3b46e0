// What the engine tests share: the fake model's vocabulary and KV layout, and greedy requests
// (engine_drive.h), whose every token the fake model's oracle predicts.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "engine_drive.h"
#include "fake_model.h"

namespace sluice::engine {

using test::FakeModel;
using test::make_prompt;

inline constexpr int32_t kVocab = 97;

// Global group + sliding group (window 8).
inline std::vector<KvGroupSpec> rig_groups() { return {{1, 1, 2, 0}, {1, 1, 2, 8}}; }

}  // namespace sluice::engine
