// libFuzzer target for the image decoders' entry (src/media/decode.cpp: decode_image, which
// sniffs the format and calls libpng, libjpeg-turbo, libwebp or giflib).
//
// Each input is decoded under a 1 Mpx limit (so a mutated header cannot make one run slow);
// sluice::Error is the only accepted failure. A decoded image must have the promised size,
// and every byte of it is read (ASan/MSan-visible), and its token-budget size computed.
//
// Seeds: the golden decode cases (tests/data/golden/vision/decode/*.{png,jpg,webp,gif}).
//   tests/fuzz/run_media.sh image build-fuzz 60

#include <cstdint>
#include <cstdlib>
#include <span>

#include "base/error.h"
#include "media/decode.h"
#include "media/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sluice::media::DecodeLimits lim;
  lim.max_pixels = int64_t{1} << 20;
  try {
    const sluice::media::RgbImage img = sluice::media::decode_image(std::span<const uint8_t>(data, size), "fuzz", lim);
    if (img.width <= 0 || img.height <= 0 || img.pixels.size() != static_cast<size_t>(img.width) * img.height * 3)
      std::abort();
    volatile unsigned sum = 0;
    for (uint8_t v : img.pixels) sum = sum + v;
    const sluice::media::ImageSize s = sluice::media::fit_to_budget(img.height, img.width, 280);
    if (s.height <= 0 || s.width <= 0 || s.height % 48 || s.width % 48) std::abort();
  } catch (const sluice::Error&) {
  }
  return 0;
}
