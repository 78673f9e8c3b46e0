// Gemma 4's vision tower and projector (docs/spec/gemma4.md §9.3), both shapes (E2B/E4B:
// clipped linears; 26B/31B: standardisation), read from an mmproj GGUF as llama.cpp writes it
// (§9.5). One image at a time, all its patches at once (attention is bidirectional).
#pragma once

#include <memory>

#include "models/encoder.h"

namespace sluice::models::gemma4 {

// Throws sluice::Error for a file that is not a gemma4v mmproj or has inconsistent shapes.
std::unique_ptr<ImageEncoder> load_vision(const gguf::GgufFile& f, const LoadOptions& opt);

}  // namespace sluice::models::gemma4
