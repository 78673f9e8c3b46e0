// Bad input never crashes: empty, unknown, truncated and corrupted files, zero and huge
// dimensions (refused before decoding), unsupported formats and budgets — each a sluice::Error
// whose message names the input and the problem.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "media/decode.h"
#include "media/preprocess.h"
#include "media_util.h"

namespace sluice::media {
namespace {

using testing::kVisionDir;
using testing::read_file;

const char* const kFiles[] = {"png_rgb.png",        "png_rgba.png",       "png_palette_trns.png",  "png_grey16.png",
                              "png_interlaced.png", "jpeg_420.jpg",       "jpeg_progressive.jpg",  "jpeg_grey.jpg",
                              "webp_lossy.webp",    "webp_lossless.webp", "webp_alpha_lossy.webp", "gif_palette.gif",
                              "gif_interlaced.gif"};

std::vector<uint8_t> golden(const std::string& file) { return read_file(kVisionDir + "decode/" + file); }

// The message of the sluice::Error decode_image throws ("" when it does not throw).
std::string decode_error(const std::vector<uint8_t>& b, const DecodeLimits& lim = {}) {
  try {
    decode_image(b, "img", lim);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::vector<uint8_t>& b, const std::string& part, const DecodeLimits& lim = {}) {
  const std::string msg = decode_error(b, lim);
  EXPECT_NE(msg.find(part), std::string::npos) << "message: '" << msg << "', expected it to contain '" << part << "'";
  EXPECT_EQ(msg.rfind("img: ", 0), 0u) << msg;  // names the input
}

TEST(MediaErrors, EmptyAndUnknownData) {
  expect_error({}, "empty image data");
  expect_error({'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}, "not a PNG, JPEG, WebP or GIF");
  expect_error({'B', 'M', 0, 0, 0, 0, 0, 0}, "BMP images are not supported");
  expect_error({'I', 'I', '*', 0, 8, 0, 0, 0}, "TIFF images are not supported");
  expect_error({0, 0, 0, 24, 'f', 't', 'y', 'p', 'a', 'v', 'i', 'f'}, "HEIF/AVIF images are not supported");
}

TEST(MediaErrors, TruncatedFilesAreRefused) {
  for (const char* f : kFiles) {
    const std::vector<uint8_t> b = golden(f);
    for (double frac : {0.05, 0.3, 0.6, 0.85}) {
      SCOPED_TRACE(std::string(f) + " cut at " + std::to_string(frac));
      const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(b.size() * frac));
      const std::string msg = decode_error(cut);
      EXPECT_FALSE(msg.empty()) << "a truncated file decoded";
    }
  }
}

// Corruption anywhere either decodes (entropy-coded data has no redundancy to catch it) or
// throws sluice::Error — never crashes or hangs (the fuzzer explores this further).
TEST(MediaErrors, CorruptedBytesNeverCrash) {
  for (const char* f : kFiles) {
    const std::vector<uint8_t> b = golden(f);
    for (size_t pos = 0; pos < b.size(); pos += 1 + b.size() / 40) {
      std::vector<uint8_t> bad = b;
      bad[pos] ^= 0x5a;
      try {
        const RgbImage img = decode_image(bad, f);
        EXPECT_EQ(img.pixels.size(), static_cast<size_t>(img.width) * img.height * 3);
      } catch (const Error&) {
      }
    }
  }
}

uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return ~c;
}

void put_be32(uint8_t* p, uint32_t v) { p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = static_cast<uint8_t>(v); }

// The golden PNG with its IHDR size replaced (and the chunk's CRC fixed, so only the size is wrong).
std::vector<uint8_t> png_with_size(uint32_t w, uint32_t h) {
  std::vector<uint8_t> b = golden("png_rgb.png");
  put_be32(&b[16], w);
  put_be32(&b[20], h);
  put_be32(&b[29], crc32(&b[12], 17));  // over "IHDR" + 13 data bytes
  return b;
}

TEST(MediaErrors, ZeroAndHugeDimensions) {
  EXPECT_FALSE(decode_error(png_with_size(0, 17)).empty());
  expect_error(png_with_size(20000, 20000), "over the limit");
  expect_error(png_with_size(1u << 30, 2), "PNG");
  // GIF: the logical screen (bytes 6-9, little-endian) 0x0, then 65535x65535.
  std::vector<uint8_t> gif = golden("gif_palette.gif");
  gif[6] = gif[7] = gif[8] = gif[9] = 0;
  expect_error(gif, "zero size");
  gif[6] = gif[7] = gif[8] = gif[9] = 0xff;
  expect_error(gif, "over the limit");
  // JPEG: the SOF0 frame size (after FFC0, length, precision: height then width, big-endian).
  std::vector<uint8_t> jpg = golden("jpeg_420.jpg");
  for (size_t i = 2; i + 9 < jpg.size(); ++i) {
    if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) {
      jpg[i + 5] = jpg[i + 6] = jpg[i + 7] = jpg[i + 8] = 0xfe;  // 65278 x 65278
      break;
    }
  }
  expect_error(jpg, "over the limit");
  // WebP lossless: the 14-bit width-1 / height-1 fields after the VP8L signature byte 0x2f.
  std::vector<uint8_t> webp = golden("webp_lossless.webp");
  ASSERT_EQ(webp[20], 0x2f);
  webp[21] = webp[22] = webp[23] = 0xff;
  webp[24] = (webp[24] & 0xf0) | 0x0f;  // 16384 x 16384
  expect_error(webp, "over the limit");
}

TEST(MediaErrors, PixelLimitRefusesBeforeDecoding) {
  DecodeLimits lim;
  lim.max_pixels = 100;  // the golden images are 23x17 and 64x48
  for (const char* f : kFiles) expect_error(golden(f), "refused before decoding", lim);
  lim = {};
  lim.max_side = 20;
  expect_error(golden("png_rgb.png"), "over the limit", lim);
}

TEST(MediaErrors, MissingFileAndBadBudget) {
  try {
    decode_image_file("/nonexistent/cat.png");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cat.png"), std::string::npos);
  }
  EXPECT_THROW(fit_to_budget(480, 640, 100), Error);
  EXPECT_THROW(fit_to_budget(0, 640, 280), Error);
  EXPECT_THROW(preprocess_image(RgbImage{}, 280), Error);
  EXPECT_TRUE(is_supported_budget(1120));
  EXPECT_FALSE(is_supported_budget(256));
}

}  // namespace
}  // namespace sluice::media
