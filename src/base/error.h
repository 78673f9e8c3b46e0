// Errors for everything that reads untrusted input (files, requests, flags).
// Load-time and request-time code throws sluice::Error with a message that names the
// input, the item and what was wrong; hot loops never throw.
#pragma once

#include <stdexcept>
#include <string>

namespace sluice {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// printf-style formatting into a std::string (GCC 12 has no std::format).
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace sluice
