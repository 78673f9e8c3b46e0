// WebP (lossy and lossless, still images) through libwebp's simple decoding API with its
// default options (fancy upsampling), as PIL's decoder uses them; an image with alpha is
// decoded to RGBA and composited onto white.
#include <webp/decode.h>

#include <cstring>
#include <vector>

#include "base/error.h"
#include "media/decode.h"

namespace sluice::media {

static const char* webp_status_text(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated file";
    case VP8_STATUS_OK: break;
  }
  return "ok";
}

RgbImage decode_webp(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits) {
  WebPBitstreamFeatures feat;
  const VP8StatusCode st = WebPGetFeatures(bytes.data(), bytes.size(), &feat);
  if (st != VP8_STATUS_OK) fail("%s: corrupt WebP: %s", name.c_str(), webp_status_text(st));
  if (feat.has_animation) fail("%s: animated WebP images are not supported", name.c_str());
  check_dimensions(feat.width, feat.height, name, "WebP", limits);
  RgbImage img;
  img.width = feat.width, img.height = feat.height;
  const size_t n = static_cast<size_t>(feat.width) * feat.height;
  const int channels = feat.has_alpha ? 4 : 3;
  std::vector<uint8_t> buf(n * channels);
  WebPDecoderConfig cfg;
  WebPInitDecoderConfig(&cfg);
  cfg.output.colorspace = feat.has_alpha ? MODE_RGBA : MODE_RGB;
  cfg.output.is_external_memory = 1;
  cfg.output.u.RGBA.rgba = buf.data();
  cfg.output.u.RGBA.stride = feat.width * channels;
  cfg.output.u.RGBA.size = buf.size();
  const VP8StatusCode st2 = WebPDecode(bytes.data(), bytes.size(), &cfg);
  if (st2 != VP8_STATUS_OK) fail("%s: corrupt WebP: %s", name.c_str(), webp_status_text(st2));
  if (!feat.has_alpha) {
    img.pixels = std::move(buf);
    return img;
  }
  img.pixels.resize(n * 3);
  std::vector<uint8_t> alpha(n);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&img.pixels[i * 3], &buf[i * 4], 3);
    alpha[i] = buf[i * 4 + 3];
  }
  composite_onto_white(img, alpha.data());
  return img;
}

}  // namespace sluice::media
