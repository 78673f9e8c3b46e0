// A guard in front of libsndfile for Ogg Vorbis (media/audio_decode.cpp's use only).
//
// libsndfile 1.2.0 (Debian 12) leaks the vorbis_info it initialised (5784 bytes) whenever its
// Vorbis header reader refuses a stream (ogg_vorbis.c: vorbis_read_header returns without
// vorbis_info_clear, and no close runs after a failed open). A server fed corrupt Ogg Vorbis
// uploads would lose that much per request. So the checks that reader makes run here first, with
// the same libraries (libogg, libvorbis) and everything freed, and a stream that would fail them
// never reaches libsndfile.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace sluice::media {

// "" when `bytes` is not an Ogg Vorbis stream (another codec, or no complete first page: those
// fail in libsndfile before its Vorbis reader) or when its three Vorbis headers read as
// libsndfile reads them; otherwise what is wrong.
std::string vorbis_header_problem(std::span<const uint8_t> bytes);

}  // namespace sluice::media
