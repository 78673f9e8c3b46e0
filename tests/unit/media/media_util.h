// Shared helpers of the media tests: the golden files of tests/data/golden/{vision,audio} and
// the synthetic pattern python/make_vision_golden.py draws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "media/image.h"

namespace sluice::media::testing {

extern const std::string kVisionDir;  // tests/data/golden/vision/
extern const std::string kAudioDir;   // tests/data/golden/audio/
std::vector<uint8_t> read_file(const std::string& path);
// pattern(width, height) of make_vision_golden.py.
RgbImage pattern(int32_t width, int32_t height);

}  // namespace sluice::media::testing
