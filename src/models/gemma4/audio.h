// Gemma 4's audio tower (E2B/E4B: the "Universal Speech Model" conformer) and its projector
// (docs/spec/gemma4.md §10), read from an mmproj GGUF as llama.cpp writes it (§10.7). One clip
// at a time, all its frames at once; f32 reference arithmetic in transformers' order.
#pragma once

#include <memory>

#include "models/encoder.h"

namespace sluice::models::gemma4 {

// Throws sluice::Error for a file that is not a gemma4a mmproj or has inconsistent shapes.
std::unique_ptr<AudioEncoder> load_audio(const gguf::GgufFile& f, const LoadOptions& opt);

}  // namespace sluice::models::gemma4
