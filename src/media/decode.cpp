#include "media/decode.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"

namespace sluice::media {

const char* format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::kPng: return "png";
    case ImageFormat::kJpeg: return "jpeg";
    case ImageFormat::kWebp: return "webp";
    case ImageFormat::kGif: return "gif";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

static bool starts_with(std::span<const uint8_t> b, size_t off, const char* magic, size_t n) {
  return b.size() >= off + n && std::memcmp(b.data() + off, magic, n) == 0;
}

ImageFormat sniff_format(std::span<const uint8_t> b) {
  if (starts_with(b, 0, "\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  if (starts_with(b, 0, "\xff\xd8\xff", 3)) return ImageFormat::kJpeg;
  if (starts_with(b, 0, "RIFF", 4) && starts_with(b, 8, "WEBP", 4)) return ImageFormat::kWebp;
  if (starts_with(b, 0, "GIF87a", 6) || starts_with(b, 0, "GIF89a", 6)) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

void check_dimensions(int64_t width, int64_t height, const std::string& name, const char* format,
                      const DecodeLimits& limits) {
  if (width <= 0 || height <= 0)
    fail("%s: %s image has zero size (%lldx%lld)", name.c_str(), format, (long long)width, (long long)height);
  if (width > limits.max_side || height > limits.max_side || width * height > limits.max_pixels)
    fail("%s: %s image is %lldx%lld, over the limit of %lld pixels (%d per side); refused before decoding",
         name.c_str(), format, (long long)width, (long long)height, (long long)limits.max_pixels, limits.max_side);
}

void composite_onto_white(RgbImage& img, const uint8_t* alpha) {
  // PIL's AlphaComposite.c with dst = (255, 255, 255, 255): outa255 = 255·255, so
  // coef1 = a·128 and coef2 = (255 − a)·128 exactly (7 fractional bits), and each channel is
  // (c·coef1 + 255·coef2 + 0x80·128) divided by 255 with PIL's shift trick, then by 128.
  const size_t n = static_cast<size_t>(img.width) * img.height;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = alpha[i];
    uint8_t* px = &img.pixels[i * 3];
    if (a == 0) {
      px[0] = px[1] = px[2] = 255;
      continue;
    }
    const uint32_t coef1 = a * 128, coef2 = (255 - a) * 128;
    for (int c = 0; c < 3; ++c) {
      const uint32_t t = px[c] * coef1 + 255 * coef2 + (0x80u << 7);
      px[c] = static_cast<uint8_t>(((((t >> 8) + t) >> 8)) >> 7);
    }
  }
}

// Common names and suffixes of formats we do not read, for a clearer message.
static const char* guess_other_format(std::span<const uint8_t> b) {
  if (starts_with(b, 0, "BM", 2)) return "BMP";
  if (starts_with(b, 0, "II*\0", 4) || starts_with(b, 0, "MM\0*", 4)) return "TIFF";
  if (starts_with(b, 4, "ftyp", 4)) return "HEIF/AVIF";
  if (starts_with(b, 0, "<svg", 4) || starts_with(b, 0, "<?xml", 5)) return "SVG";
  if (starts_with(b, 0, "\0\0\1\0", 4)) return "ICO";
  return nullptr;
}

RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits) {
  if (bytes.empty()) fail("%s: empty image data", name.c_str());
  switch (sniff_format(bytes)) {
    case ImageFormat::kPng: return decode_png(bytes, name, limits);
    case ImageFormat::kJpeg: return decode_jpeg(bytes, name, limits);
    case ImageFormat::kWebp: return decode_webp(bytes, name, limits);
    case ImageFormat::kGif: return decode_gif(bytes, name, limits);
    case ImageFormat::kUnknown: break;
  }
  if (const char* other = guess_other_format(bytes))
    fail("%s: %s images are not supported (PNG, JPEG, WebP and GIF are)", name.c_str(), other);
  fail("%s: not a PNG, JPEG, WebP or GIF image (unrecognised first bytes)", name.c_str());
}

RgbImage decode_image_file(const std::string& path, const DecodeLimits& limits) {
  constexpr long kMaxFileBytes = 256L << 20;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail("%s: cannot open image file: %s", path.c_str(), std::strerror(errno));
  if (std::fseek(f.get(), 0, SEEK_END) != 0) fail("%s: cannot seek image file", path.c_str());
  const long size = std::ftell(f.get());
  if (size < 0) fail("%s: cannot read image file size", path.c_str());
  if (size > kMaxFileBytes)
    fail("%s: image file is %ld bytes, over the limit of %ld", path.c_str(), size, kMaxFileBytes);
  std::rewind(f.get());
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0 && std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    fail("%s: short read of image file", path.c_str());
  return decode_image(bytes, path, limits);
}

}  // namespace sluice::media
