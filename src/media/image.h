// A decoded image: 8-bit RGB, rows top to bottom, pixels left to right, channels R, G, B.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::media {

struct RgbImage {
  int32_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // [height][width][3]

  const uint8_t* row(int32_t y) const { return pixels.data() + static_cast<size_t>(y) * width * 3; }
  uint8_t* row(int32_t y) { return pixels.data() + static_cast<size_t>(y) * width * 3; }
};

}  // namespace sluice::media
