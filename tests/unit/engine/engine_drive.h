// Driving an EngineCore in the engine tests, for any model (fake or real GGUF): greedy
// requests, and stepping a core to the end while collecting each request's tokens.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/engine_core.h"
#include "engine/request.h"

namespace sluice::engine {

// Temperature 0: the output is the model's greedy continuation.
inline EngineRequest greedy_request(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens) {
  EngineRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

// Adds reqs, steps core until it has no work (at most max_steps steps) appending every
// generated token to tokens[request id], and checks that it finished and freed every
// target block.
inline void run_to_end(EngineCore& core, const std::vector<EngineRequest>& reqs,
                       std::map<RequestId, std::vector<int32_t>>& tokens, int max_steps = 20000) {
  for (const EngineRequest& q : reqs) core.add(q);
  for (int i = 0; i < max_steps && core.has_work(); ++i)
    for (const TokenOutput& o : core.step())
      if (o.token >= 0) tokens[o.id].push_back(o.token);
  EXPECT_FALSE(core.has_work());
  EXPECT_EQ(core.blocks().n_used_all(), 0) << "target blocks leaked";
}

}  // namespace sluice::engine
