// GET /props: what the chat page needs to know about the served model before the first
// request: its name, the context size, the per-request token cap, the file's sampling
// defaults (general.sampling.*) and what its chat template can do.
#pragma once

#include "server/model_context.h"
#include "server/openai_service.h"

namespace sluice::server {

Reply props_reply(const ModelContext& model);

}  // namespace sluice::server
