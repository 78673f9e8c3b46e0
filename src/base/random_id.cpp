#include "base/random_id.h"

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <random>

namespace sluice {

std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t a, b;
  {
    std::lock_guard<std::mutex> lk(mu);
    a = rng();
    b = rng();
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b & 0xffffffffull));
  return std::string(prefix) + buf;
}

}  // namespace sluice
