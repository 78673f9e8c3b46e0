#include "server/base64.h"

#include <array>
#include <cstdint>

#include "server/api_error.h"

namespace sluice::server {

namespace {

[[noreturn]] void bad_data(const std::string& where, std::string_view noun, const std::string& what) {
  bad_part(where, "the " + std::string(noun) + "'s base64 data " + what);
}

// The length of `s` without its '=' padding (at most two).
size_t unpadded(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && s[n - 1] == '=' && s.size() - n < 2) --n;
  return n;
}

}  // namespace

size_t base64_decoded_size(std::string_view s) {
  const size_t n = unpadded(s);
  return n / 4 * 3 + (n % 4 == 0 ? 0 : n % 4 - 1);
}

std::string decode_base64(std::string_view s, const std::string& where, std::string_view noun) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> v{};
    v.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) v[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
    return v;
  }();
  const size_t n = unpadded(s);
  if (n % 4 == 1) bad_data(where, noun, "has a bad length (" + std::to_string(s.size()) + ")");
  std::string out;
  out.reserve(base64_decoded_size(s));
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const int8_t v = kValue[static_cast<uint8_t>(s[i])];
    if (v < 0) bad_data(where, noun, "has an invalid character at offset " + std::to_string(i));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace sluice::server
