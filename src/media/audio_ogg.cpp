#include "media/audio_ogg.h"

#include <ogg/ogg.h>
#include <vorbis/codec.h>

#include <algorithm>
#include <cstring>

namespace sluice::media {

namespace {

// The libogg and libvorbis state of one check, cleared on every exit. The bytes are fed to libogg
// 64 KiB at a time, as the pages are needed (the headers are usually in the first few KiB).
struct OggVorbisState {
  std::span<const uint8_t> bytes;
  size_t fed = 0;
  ogg_sync_state sync{};
  ogg_stream_state stream{};
  vorbis_info info{};
  vorbis_comment comment{};
  bool stream_ready = false, vorbis_ready = false;

  explicit OggVorbisState(std::span<const uint8_t> b) : bytes(b) { ogg_sync_init(&sync); }
  ~OggVorbisState() {
    if (vorbis_ready) vorbis_comment_clear(&comment), vorbis_info_clear(&info);
    if (stream_ready) ogg_stream_clear(&stream);
    ogg_sync_clear(&sync);
  }
  OggVorbisState(const OggVorbisState&) = delete;
  OggVorbisState& operator=(const OggVorbisState&) = delete;

  // The next complete page (skipping junk); false at the end of the bytes.
  bool next_page(ogg_page* page) {
    for (;;) {
      const int r = ogg_sync_pageout(&sync, page);
      if (r == 1) return true;
      if (r < 0) continue;
      if (fed == bytes.size()) return false;
      const size_t n = std::min<size_t>(bytes.size() - fed, size_t{1} << 16);
      char* buf = ogg_sync_buffer(&sync, static_cast<long>(n));
      if (!buf) return false;
      std::memcpy(buf, bytes.data() + fed, n);
      ogg_sync_wrote(&sync, static_cast<long>(n));
      fed += n;
    }
  }
  // The next page of this stream's serial number, submitted to the stream; false at the end.
  bool next_stream_page() {
    ogg_page page;
    while (next_page(&page))
      if (ogg_page_serialno(&page) == stream.serialno) return ogg_stream_pagein(&stream, &page) == 0;
    return false;
  }
};

}  // namespace

std::string vorbis_header_problem(std::span<const uint8_t> bytes) {
  OggVorbisState s(bytes);
  ogg_page first;
  if (!s.next_page(&first)) return "";
  ogg_stream_init(&s.stream, ogg_page_serialno(&first));
  s.stream_ready = true;
  ogg_packet packet;
  if (ogg_stream_pagein(&s.stream, &first) != 0 || ogg_stream_packetout(&s.stream, &packet) != 1) return "";
  if (packet.bytes < 7 || std::memcmp(packet.packet, "\x01vorbis", 7) != 0) return "";  // not Vorbis

  // libsndfile's vorbis_read_header, check for check.
  vorbis_info_init(&s.info);
  vorbis_comment_init(&s.comment);
  s.vorbis_ready = true;
  if (!packet.b_o_s) return "the first packet lacks the beginning-of-stream flag";
  if (ogg_stream_packetpeek(&s.stream, nullptr)) return "the first page holds more than the identification header";
  if (vorbis_synthesis_headerin(&s.info, &s.comment, &packet) < 0) return "the identification header does not parse";
  for (int got = 0; got < 2;) {
    const int r = ogg_stream_packetout(&s.stream, &packet);
    if (r == 0) {
      if (!s.next_stream_page()) return "the stream ends before its comment and setup headers";
      continue;
    }
    if (r < 0) return "a page of the comment or setup header is missing";
    vorbis_synthesis_headerin(&s.info, &s.comment, &packet);  // libsndfile ignores these results
    ++got;
  }
  return "";
}

}  // namespace sluice::media
