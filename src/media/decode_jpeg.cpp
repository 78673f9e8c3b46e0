// JPEG through libjpeg(-turbo) with its defaults (integer slow DCT, fancy upsampling), which
// are also PIL's. libjpeg reports fatal errors through error_exit, here a longjmp back into
// decode_jpeg, whose objects are all constructed before setjmp; the message is rethrown.
// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstddef>
#include <cstdio>

#include <jerror.h>
#include <jpeglib.h>
#include <vector>

#include "base/error.h"
#include "media/decode.h"

namespace sluice::media {
namespace {

// Progressive files can hold thousands of tiny scans, each a pass over the whole image: a
// file of a few KB could keep a core busy for minutes. Real encoders write at most ~10.
constexpr int kMaxScans = 256;

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_jpeg_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  e->mgr.format_message(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings are tolerated (PIL tolerates them: extraneous bytes, bad Huffman codes) except a
// premature end of data, where libjpeg would pad the rest of the image with grey and PIL
// refuses the file as truncated.
void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) cinfo->err->error_exit(cinfo);
}

void on_jpeg_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    cinfo->err->msg_code = JERR_UNKNOWN_MARKER;  // any code: the message below replaces it
    auto* e = reinterpret_cast<JpegError*>(cinfo->err);
    std::snprintf(e->message, sizeof e->message, "more than %d progressive scans", kMaxScans);
    std::longjmp(e->jump, 1);
  }
}

struct JpegHandle {
  jpeg_decompress_struct cinfo{};
  bool created = false;
  ~JpegHandle() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

}  // namespace

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const std::string& name, const DecodeLimits& limits) {
  JpegError err{};
  JpegHandle h;
  jpeg_progress_mgr progress{};
  RgbImage img;
  h.cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = on_jpeg_error;
  err.mgr.emit_message = on_jpeg_message;
  if (setjmp(err.jump)) fail("%s: corrupt JPEG: %s", name.c_str(), err.message);
  jpeg_create_decompress(&h.cinfo);
  h.created = true;
  progress.progress_monitor = on_jpeg_progress;
  h.cinfo.progress = &progress;
  jpeg_mem_src(&h.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&h.cinfo, TRUE);
  check_dimensions(h.cinfo.image_width, h.cinfo.image_height, name, "JPEG", limits);
  const J_COLOR_SPACE cs = h.cinfo.jpeg_color_space;
  if (cs == JCS_CMYK || cs == JCS_YCCK) fail("%s: CMYK JPEG images are not supported", name.c_str());
  h.cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&h.cinfo);
  if (h.cinfo.output_components != 3)
    fail("%s: JPEG: unexpected %d output components", name.c_str(), h.cinfo.output_components);
  img.width = static_cast<int32_t>(h.cinfo.output_width), img.height = static_cast<int32_t>(h.cinfo.output_height);
  img.pixels.resize(static_cast<size_t>(img.width) * img.height * 3);
  while (h.cinfo.output_scanline < h.cinfo.output_height) {
    JSAMPROW row = img.row(static_cast<int32_t>(h.cinfo.output_scanline));
    jpeg_read_scanlines(&h.cinfo, &row, 1);
  }
  jpeg_finish_decompress(&h.cinfo);
  return img;
}

}  // namespace sluice::media
