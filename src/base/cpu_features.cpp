// Built without ISA flags: this file must run on any x86-64 or ARM64 (and compile elsewhere).
#include "base/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace sluice {

namespace {
CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (!osxsave) return f;
  unsigned xlo, xhi;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool ymm_os = (xlo & 0x6) == 0x6;              // XMM and YMM state enabled by the OS
  const bool zmm_os = ymm_os && (xlo & 0xE0) == 0xE0;  // opmask + ZMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = ymm_os && ((b >> 5) & 1);
  f.avx512f = zmm_os && ((b >> 16) & 1);
  f.avx512bw = zmm_os && ((b >> 30) & 1);
  f.avx512vl = zmm_os && ((b >> 31) & 1);
  f.avx512vnni = zmm_os && ((c >> 11) & 1);
  f.gfni = (c >> 8) & 1;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx_vnni = ymm_os && ((a >> 4) & 1);
    f.avx512bf16 = zmm_os && ((a >> 5) & 1);
  }
  if (!ymm_os) f.fma = f.f16c = false;
#elif defined(__aarch64__) && defined(__linux__)
  // The kernel reports only what it enabled for user space (SVE also needs its state saved).
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.asimd = (hw & HWCAP_ASIMD) != 0;
  f.dotprod = f.asimd && (hw & HWCAP_ASIMDDP) != 0;
  f.fp16 = f.asimd && (hw & HWCAP_ASIMDHP) != 0;
  f.sve = (hw & HWCAP_SVE) != 0;
  f.i8mm = f.asimd && (hw2 & HWCAP2_I8MM) != 0;
  f.bf16 = f.asimd && (hw2 & HWCAP2_BF16) != 0;
  f.sve2 = f.sve && (hw2 & HWCAP2_SVE2) != 0;
#elif defined(__aarch64__)
  f.asimd = true;  // Advanced SIMD is part of every AArch64 CPU
#endif
  return f;
}
}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx_vnni, "avxvnni");
  add(f.gfni, "gfni");
  add(f.asimd, "asimd");
  add(f.dotprod, "dotprod");
  add(f.i8mm, "i8mm");
  add(f.fp16, "fp16");
  add(f.bf16, "bf16");
  add(f.sve, "sve");
  add(f.sve2, "sve2");
  return s.empty() ? "none" : s;
}

}  // namespace sluice
