// ISA-neutral helpers shared by every ISA translation unit (cpu/x86_*/, cpu/arm64/). Internal
// linkage only, for the reason x86_common.h gives: an inline function with external linkage
// compiled with ISA flags in one file is one COMDAT symbol the linker may keep for all callers.
#pragma once

#include <cstdint>

#include "kernels/act.h"

namespace sluice::kernels {
namespace {

// ActRows accessors (act.h), written out here: ISA translation units call no shared inline code.
inline const int8_t* a_qs(const ActRows& a, int64_t m) {
  return reinterpret_cast<const int8_t*>(a.base + m * a.stride);
}
inline const float* a_d(const ActRows& a, int64_t m) {
  return reinterpret_cast<const float*>(a.base + m * a.stride + a.k);
}
// Block sums (block 32) or per-16 sums (block 256) of row m.
inline const int32_t* a_sums(const ActRows& a, int64_t m, int64_t block) {
  return reinterpret_cast<const int32_t*>(a.base + m * a.stride + a.k + 4 * (a.k / block));
}
inline const float* a_f32(const ActRows& a, int64_t m) { return reinterpret_cast<const float*>(a.base + m * a.stride); }

}  // namespace
}  // namespace sluice::kernels
