// Overflow-checked unsigned arithmetic for sizes computed from untrusted counts.
#pragma once

#include <cstdint>

namespace sluice {

// Returns false (and leaves *out unspecified) when a*b or a+b does not fit in uint64_t.
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// Smallest multiple of `a` (a power of two) that is >= x; false on overflow.
inline bool checked_align_up(uint64_t x, uint64_t a, uint64_t* out) {
  uint64_t t;
  if (!checked_add(x, a - 1, &t)) return false;
  *out = t & ~(a - 1);
  return true;
}

}  // namespace sluice
