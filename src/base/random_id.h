// Random ids for responses and tool calls ("chatcmpl-…", "call_…"): the prefix and 24 hex
// digits from one process-wide generator seeded by std::random_device. Thread-safe.
#pragma once

#include <string>

namespace sluice {

std::string random_id(const char* prefix);

}  // namespace sluice
