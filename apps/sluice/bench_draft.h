// `sluice bench --draft FILE`: the cost of one draft step of Gemma 4's assistant (centroid and
// full head) against one target decode step, at the same KV depth, on the same threads.
#pragma once

#include <string>

#include "apps/sluice/engine_session.h"

namespace sluice::app {

struct DraftStepCost {
  int depth = 0;
  double target_ms = 0, centroid_ms = 0, full_ms = 0;  // medians
  double centroid_1t_ms = 0;                           // the assistant on a 1-thread pool
};

DraftStepCost measure_draft_step(EngineSession& sess, const std::string& draft_path, int depth, int n_steps);
void print_draft_step(const DraftStepCost& c);

}  // namespace sluice::app
