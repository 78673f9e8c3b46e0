// What the CPU we run on can execute; detected once (x86: cpuid; ARM64 Linux: the kernel's
// HWCAP words from getauxval). Kernels pick their ISA variant from this at run time (no
// -march=native anywhere).
#pragma once

#include <string>

namespace sluice {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false;
  bool avx_vnni = false;
  bool gfni = false;  // GF(2) affine byte transforms (EVEX forms need avx512f too)
  // ARM64: asimd = Advanced SIMD (NEON, baseline of Armv8.0-A); dotprod = SDOT/UDOT (Armv8.2
  // optional, 8.4 mandatory); i8mm = SMMLA/USMMLA (Armv8.6); fp16 = half-precision arithmetic.
  bool asimd = false, dotprod = false, i8mm = false, fp16 = false, bf16 = false, sve = false, sve2 = false;
};

const CpuFeatures& cpu_features();
std::string cpu_features_string();  // e.g. "avx2 fma f16c avx512f avx512bw ..."

}  // namespace sluice
