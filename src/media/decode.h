// Image decoding: PNG, JPEG, WebP and GIF (first frame) from bytes in memory, to 8-bit RGB the
// way transformers' image processor converts a PIL image (convert_to_rgb, docs/spec/gemma4.md
// §6.1): grey is replicated to three channels, palettes are looked up, 16-bit samples keep their
// high byte, and an image with alpha (an alpha channel, or a transparent colour or palette
// index) is composited onto white as PIL's alpha_composite computes it. Every failure throws
// sluice::Error naming the input; the dimensions are checked against the limits before any
// pixel is decoded.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "media/image.h"

namespace sluice::media {

enum class ImageFormat { kUnknown, kPng, kJpeg, kWebp, kGif };
const char* format_name(ImageFormat f);  // "png", "jpeg", "webp", "gif", "unknown"

// The format from the first bytes (magic numbers), kUnknown when none matches.
ImageFormat sniff_format(std::span<const uint8_t> bytes);

struct DecodeLimits {
  // Images above this many pixels are refused before decoding (decompression bombs): 64 Mpx,
  // ~192 MB of RGB — well above what a 1120-token budget can use (2.6 Mpx).
  int64_t max_pixels = int64_t{64} << 20;
  int32_t max_side = 1 << 15;  // either side, pixels
};

// Decodes `bytes` (`name` is for messages: a path, "image 2", ...). Throws sluice::Error.
RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits = {});
// Reads and decodes a file (refusing files over 256 MiB before reading them).
RgbImage decode_image_file(const std::string& path, const DecodeLimits& limits = {});

// Per-format entry points (decode_image dispatches to them); the same contract.
RgbImage decode_png(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits);
RgbImage decode_jpeg(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits);
RgbImage decode_webp(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits);
RgbImage decode_gif(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits);

// Composites `img` with per-pixel `alpha` ([height][width]) onto an opaque white background,
// in PIL's integer arithmetic (Image.alpha_composite(white, rgba).convert("RGB")).
void composite_onto_white(RgbImage& img, const uint8_t* alpha);

// Throws unless 0 < width, height <= limits.max_side and width·height <= limits.max_pixels.
void check_dimensions(int64_t width, int64_t height, const std::string& name, const char* format,
                      const DecodeLimits& limits);

}  // namespace sluice::media
