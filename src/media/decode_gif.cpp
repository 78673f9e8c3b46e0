// GIF, first frame only, through giflib's record-level API (DGifSlurp would decode every
// frame of an animation). What PIL makes of a first frame: a canvas of the logical screen's
// size filled with the frame's transparent index (index 0 when it has none), the frame's
// indices drawn at its offset, then every index looked up in the frame's palette (its local
// one, else the global one); indices past the palette's end, or all of them when there is no
// palette, read as grey (i, i, i), PIL's default palette. With a transparent index, the pixels
// holding it (the canvas around the frame included) are transparent: white after compositing.
#include <gif_lib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "media/decode.h"

namespace sluice::media {
namespace {

struct GifSource {
  const uint8_t* data;
  size_t size, off;
};

int read_gif_bytes(GifFileType* gif, GifByteType* out, int n) {
  auto* src = static_cast<GifSource*>(gif->UserData);
  const size_t take = std::min(static_cast<size_t>(n < 0 ? 0 : n), src->size - src->off);
  std::memcpy(out, src->data + src->off, take);
  src->off += take;
  return static_cast<int>(take);
}

struct GifHandle {
  GifFileType* gif = nullptr;
  ~GifHandle() {
    int err;
    if (gif) DGifCloseFile(gif, &err);
  }
};

[[noreturn]] void gif_fail(const std::string& name, int code) {
  fail("%s: corrupt GIF: %s", name.c_str(), GifErrorString(code) ? GifErrorString(code) : "unknown error");
}

// Reads records up to the first image descriptor; returns the transparent index (or -1) its
// Graphic Control Extension names.
int skip_to_first_image(GifFileType* gif, const std::string& name) {
  int transparent = -1;
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif, &type) == GIF_ERROR) gif_fail(name, gif->Error);
    if (type == IMAGE_DESC_RECORD_TYPE) return transparent;
    if (type == TERMINATE_RECORD_TYPE) fail("%s: GIF has no image", name.c_str());
    if (type != EXTENSION_RECORD_TYPE) continue;
    int code;
    GifByteType* ext;
    if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) gif_fail(name, gif->Error);
    if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1)) transparent = ext[4];
    while (ext) {
      if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) gif_fail(name, gif->Error);
    }
  }
}

// The frame's rows in file order, deinterlaced, into `canvas` at its offset (clipped).
void read_frame(GifFileType* gif, std::vector<uint8_t>& canvas, int32_t cw, int32_t ch, const std::string& name) {
  const GifImageDesc& d = gif->Image;
  std::vector<GifPixelType> line(static_cast<size_t>(d.Width));
  static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
  const int passes = d.Interlace ? 4 : 1;
  for (int p = 0; p < passes; ++p) {
    for (int y = d.Interlace ? kStart[p] : 0; y < d.Height; y += d.Interlace ? kStep[p] : 1) {
      if (DGifGetLine(gif, line.data(), d.Width) == GIF_ERROR) gif_fail(name, gif->Error);
      const int64_t cy = int64_t{d.Top} + y;
      if (cy >= ch) continue;
      for (int x = 0; x < d.Width && int64_t{d.Left} + x < cw; ++x) canvas[cy * cw + d.Left + x] = line[x];
    }
  }
}

}  // namespace

RgbImage decode_gif(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits) {
  GifSource src{bytes.data(), bytes.size(), 0};
  GifHandle h;
  int err = 0;
  h.gif = DGifOpen(&src, read_gif_bytes, &err);
  if (!h.gif) gif_fail(name, err);
  const int32_t cw = h.gif->SWidth, ch = h.gif->SHeight;
  check_dimensions(cw, ch, name, "GIF", limits);
  const int transparent = skip_to_first_image(h.gif, name);
  if (DGifGetImageDesc(h.gif) == GIF_ERROR) gif_fail(name, h.gif->Error);
  const GifImageDesc& d = h.gif->Image;
  check_dimensions(d.Width, d.Height, name, "GIF frame", limits);
  std::vector<uint8_t> canvas(static_cast<size_t>(cw) * ch, static_cast<uint8_t>(transparent < 0 ? 0 : transparent));
  read_frame(h.gif, canvas, cw, ch, name);
  std::array<uint8_t, 256 * 3> pal;
  for (int i = 0; i < 256; ++i) pal[i * 3] = pal[i * 3 + 1] = pal[i * 3 + 2] = static_cast<uint8_t>(i);
  const ColorMapObject* map = d.ColorMap ? d.ColorMap : h.gif->SColorMap;
  for (int i = 0; map && i < std::min(map->ColorCount, 256); ++i) {
    pal[i * 3] = map->Colors[i].Red, pal[i * 3 + 1] = map->Colors[i].Green, pal[i * 3 + 2] = map->Colors[i].Blue;
  }
  RgbImage img;
  img.width = cw, img.height = ch;
  img.pixels.resize(canvas.size() * 3);
  for (size_t i = 0; i < canvas.size(); ++i) std::memcpy(&img.pixels[i * 3], &pal[canvas[i] * 3], 3);
  if (transparent >= 0) {
    for (uint8_t& v : canvas) v = v == transparent ? 0 : 255;  // the index plane becomes the alpha plane
    composite_onto_white(img, canvas.data());
  }
  return img;
}

}  // namespace sluice::media
