#include "media_util.h"

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace sluice::media::testing {

const std::string kVisionDir = std::string(SLUICE_SOURCE_DIR) + "/tests/data/golden/vision/";
const std::string kAudioDir = std::string(SLUICE_SOURCE_DIR) + "/tests/data/golden/audio/";

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

RgbImage pattern(int32_t width, int32_t height) {
  RgbImage img{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (uint64_t y = 0; y < static_cast<uint64_t>(height); ++y) {
    for (uint64_t x = 0; x < static_cast<uint64_t>(width); ++x) {
      for (uint64_t c = 0; c < 3; ++c) {
        const uint64_t v = x * 13 + y * 29 + c * 71 + ((x * y) >> 3) + (((x >> 2) ^ (y >> 2)) * 37);
        img.pixels[(y * width + x) * 3 + c] = static_cast<uint8_t>(v & 255);
      }
    }
  }
  return img;
}

}  // namespace sluice::media::testing
