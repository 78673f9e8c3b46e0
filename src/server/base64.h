// RFC 4648 base64 (standard alphabet) for media parts of requests (image data URLs, input_audio
// data): a bad character or length is a 400 naming the part and the offset.
#pragma once

#include <string>
#include <string_view>

namespace sluice::server {

// The bytes of `s` ('=' padding optional). Throws ApiError 400 "where: the <noun>'s base64
// data ..." on a bad length or character.
std::string decode_base64(std::string_view s, const std::string& where, std::string_view noun);

// The number of bytes `s` decodes to (its '=' padding not counted), known before decoding: a
// size limit is checked against it first.
size_t base64_decoded_size(std::string_view s);

}  // namespace sluice::server
