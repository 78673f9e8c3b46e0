// PNG through libpng's progressive-free read API. libpng reports errors by longjmp: the only
// frame between setjmp and libpng is decode_png itself, whose objects are all constructed
// before setjmp, so the jump skips no destructor; the error is rethrown as sluice::Error.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "media/decode.h"

namespace sluice::media {
namespace {

struct PngSource {
  const uint8_t* data;
  size_t size, off;
  char error[200];
};

void on_png_error(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->error, sizeof src->error, "%s", msg);
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}

void read_png_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->off) png_error(png, "truncated file");
  std::memcpy(out, src->data + src->off, n);
  src->off += n;
}

struct PngHandle {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandle() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

// Transforms to 8-bit samples: palettes expanded, low bit depths widened, a transparent
// colour or palette alpha (tRNS) turned into an alpha channel, 16-bit samples reduced to their
// high byte (PIL's "RGB;16B" unpacking). 16-bit grey is the exception, kept 16-bit: PIL opens
// it as mode "I;16" and converts it to RGB by clamping each value to 255.
void set_transforms(png_structp png, png_infop info, int color_type, int depth) {
  const bool grey16 = depth == 16 && color_type == PNG_COLOR_TYPE_GRAY;
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (!grey16 && png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  if (depth == 16 && !grey16) png_set_strip_16(png);
  if (grey16) png_set_swap(png);  // host order (little-endian)
  png_set_interlace_handling(png);
}

// One decoded row (`channels` samples of `bytes_per_sample` per pixel) to RGB, and its alpha
// samples (when channels is 2 or 4) to `alpha`.
void row_to_rgb(const uint8_t* in, int channels, int bytes_per_sample, int32_t width, uint8_t* out, uint8_t* alpha) {
  for (int32_t x = 0; x < width; ++x) {
    const uint8_t* p = in + static_cast<size_t>(x) * channels * bytes_per_sample;
    if (bytes_per_sample == 2) {  // 16-bit grey, clamped (see set_transforms)
      uint16_t v;
      std::memcpy(&v, p, 2);
      out[0] = out[1] = out[2] = static_cast<uint8_t>(v > 255 ? 255 : v);
    } else if (channels <= 2) {  // grey (+ alpha)
      out[0] = out[1] = out[2] = p[0];
    } else {  // RGB (+ alpha)
      out[0] = p[0], out[1] = p[1], out[2] = p[2];
    }
    if (channels == 2 || channels == 4) alpha[x] = p[channels - 1];
    out += 3;
  }
}

}  // namespace

RgbImage decode_png(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits) {
  PngSource src{bytes.data(), bytes.size(), 0, {}};
  PngHandle h;
  RgbImage img;
  std::vector<uint8_t> raw;
  std::vector<png_bytep> rows;
  std::vector<uint8_t> alpha;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_png_error, on_png_warning);
  if (!h.png) fail("%s: PNG: out of memory", name.c_str());
  h.info = png_create_info_struct(h.png);
  if (!h.info) fail("%s: PNG: out of memory", name.c_str());
  if (setjmp(png_jmpbuf(h.png))) fail("%s: corrupt PNG: %s", name.c_str(), src.error);
  png_set_read_fn(h.png, &src, read_png_bytes);
  png_set_user_limits(h.png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);  // ours, with a clearer message, below
  png_read_info(h.png, h.info);
  const png_uint_32 w = png_get_image_width(h.png, h.info), ht = png_get_image_height(h.png, h.info);
  check_dimensions(w, ht, name, "PNG", limits);
  set_transforms(h.png, h.info, png_get_color_type(h.png, h.info), png_get_bit_depth(h.png, h.info));
  png_read_update_info(h.png, h.info);
  const int channels = png_get_channels(h.png, h.info);
  const size_t rowbytes = png_get_rowbytes(h.png, h.info);
  const int bps = static_cast<int>(rowbytes / (static_cast<size_t>(w) * channels));
  if (bps != 1 && bps != 2) fail("%s: PNG: unexpected row layout", name.c_str());
  raw.resize(rowbytes * ht);
  rows.resize(ht);
  for (png_uint_32 y = 0; y < ht; ++y) rows[y] = raw.data() + rowbytes * y;
  png_read_image(h.png, rows.data());
  img.width = static_cast<int32_t>(w), img.height = static_cast<int32_t>(ht);
  img.pixels.resize(static_cast<size_t>(w) * ht * 3);
  const bool has_alpha = channels == 2 || channels == 4;
  alpha.resize(has_alpha ? static_cast<size_t>(w) * ht : w);
  for (png_uint_32 y = 0; y < ht; ++y)
    row_to_rgb(rows[y], channels, bps, img.width, img.row(static_cast<int32_t>(y)),
               alpha.data() + (has_alpha ? w * y : 0));
  if (has_alpha) composite_onto_white(img, alpha.data());
  return img;
}

}  // namespace sluice::media
