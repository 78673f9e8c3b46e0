// What the CPU we run on can execute; detected once with cpuid. Kernels pick their ISA
// variant from this at run time (no -march=native anywhere).
#pragma once

#include <string>

namespace sluice {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false;
  bool avx_vnni = false;
  bool gfni = false;   // GF(2) affine byte transforms (EVEX forms need avx512f too)
};

const CpuFeatures& cpu_features();
std::string cpu_features_string();  // e.g. "avx2 fma f16c avx512f avx512bw ..."

}  // namespace sluice
