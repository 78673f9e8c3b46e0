// POST /v1/audio/transcriptions run against the engine: the multipart form read
// (transcription.h), the file decoded and cut into 30 s windows (media::AudioLayout::kChunk30s),
// and each window answered in turn by the model, the window's audio at the chat template's
// placeholder before the ASR instruction, greedy unless a temperature is given. The reply is
// whole in the response_format, or with stream=true OpenAI's SSE events
// {"type": "transcript.text.delta", "delta"} ... {"type": "transcript.text.done", "text", "usage"}.
#pragma once

#include <string>

#include "api/engine.h"
#include "server/metrics.h"
#include "server/model_context.h"
#include "server/openai_service.h"

namespace sluice::server {

// Throws ApiError for bad input (400 naming the field, "file: ..." for the audio); the stream,
// once started, ends with an error event instead.
Reply transcribe(api::Engine& engine, const ModelContext& m, Metrics& metrics, const std::string& body,
                 const std::string& content_type);

}  // namespace sluice::server
