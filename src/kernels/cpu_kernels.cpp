// The ISA selector. Built WITHOUT ISA flags (and must stay so): it only reads cpu_features()
// and returns pointers into the per-ISA tables; it never calls a SIMD kernel itself.
#include "kernels/cpu_kernels.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "base/cpu_features.h"
#include "base/error.h"
#include "kernels/dot_ref.h"

namespace sluice::kernels {

#if defined(SLUICE_X86_KERNELS)
// Constant-initialized tables defined in src/kernels/cpu/x86_avx2/ and x86_avx512/ (compiled with
// their ISA flags). Only their data is read here; no code of those files runs until a kernel
// of a set this CPU can run is called.
extern const CpuKernels kCpuKernelsAvx2;
extern const CpuKernels kCpuKernelsAvx512;
extern const CpuKernels kCpuKernelsAvx512Gfni;
#endif
#if defined(SLUICE_ARM64_KERNELS)
// Defined in src/kernels/cpu/arm64/ (one file per -march level), read the same way.
extern const CpuKernels kCpuKernelsNeon;
extern const CpuKernels kCpuKernelsDotprod;
extern const CpuKernels kCpuKernelsI8mm;
#endif

namespace {

constexpr CpuKernels make_scalar() {
  CpuKernels k{};
  k.isa = "scalar";
  return k;
}
const CpuKernels kScalar = make_scalar();

#if defined(SLUICE_X86_KERNELS)
bool can_run_avx2(const CpuFeatures& f) { return f.avx2 && f.fma && f.f16c; }
bool can_run_avx512(const CpuFeatures& f) {
  return can_run_avx2(f) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
}
bool can_run_avx512gfni(const CpuFeatures& f) { return can_run_avx512(f) && f.gfni; }
#endif
#if defined(SLUICE_ARM64_KERNELS)
bool can_run_neon(const CpuFeatures& f) { return f.asimd; }
bool can_run_dotprod(const CpuFeatures& f) { return can_run_neon(f) && f.dotprod; }
bool can_run_i8mm(const CpuFeatures& f) { return can_run_dotprod(f) && f.i8mm; }
#endif

// Every compiled set with whether this CPU can run it, worst first.
struct Entry {
  const CpuKernels* k;
  bool runnable;
};
std::vector<Entry> compiled() {
  std::vector<Entry> v{{&kScalar, true}};
#if defined(SLUICE_X86_KERNELS)
  const CpuFeatures& f = cpu_features();
  v.push_back({&kCpuKernelsAvx2, can_run_avx2(f)});
  v.push_back({&kCpuKernelsAvx512, can_run_avx512(f)});
  v.push_back({&kCpuKernelsAvx512Gfni, can_run_avx512gfni(f)});
#endif
#if defined(SLUICE_ARM64_KERNELS)
  const CpuFeatures& f = cpu_features();
  v.push_back({&kCpuKernelsNeon, can_run_neon(f)});
  v.push_back({&kCpuKernelsDotprod, can_run_dotprod(f)});
  v.push_back({&kCpuKernelsI8mm, can_run_i8mm(f)});
#endif
  return v;
}

const CpuKernels& choose() {
  const std::vector<Entry> all = compiled();
  const char* want = std::getenv("SLUICE_ISA");
  if (want == nullptr || *want == '\0') {
    const CpuKernels* best = &kScalar;
    for (const Entry& e : all)
      if (e.runnable) best = e.k;
    return *best;
  }
  for (const Entry& e : all) {
    if (std::strcmp(e.k->isa, want) != 0) continue;
    if (!e.runnable) fail("SLUICE_ISA=%s: this CPU cannot run it (features: %s)", want, cpu_features_string().c_str());
    return *e.k;
  }
  std::string names;
  for (const Entry& e : all) names += std::string(names.empty() ? "" : "|") + e.k->isa;
  fail("SLUICE_ISA=%s: unknown or not compiled in (compiled: %s)", want, names.c_str());
}

}  // namespace

const CpuKernels& cpu_kernels() {
  static const CpuKernels& k = choose();
  return k;
}

std::vector<const CpuKernels*> runnable_cpu_kernels() {
  std::vector<const CpuKernels*> out;
  for (const Entry& e : compiled())
    if (e.runnable) out.push_back(e.k);
  return out;
}

RowOps merged_ops(const CpuKernels& k) {
  const RowOps& r = rowops_ref();
  RowOps o = k.ops;
  if (!o.rms_norm) o.rms_norm = r.rms_norm;
  if (!o.add_rms_norm) o.add_rms_norm = r.add_rms_norm;
  if (!o.gelu_mul) o.gelu_mul = r.gelu_mul;
  if (!o.softcap) o.softcap = r.softcap;
  if (!o.scale) o.scale = r.scale;
  if (!o.rope) o.rope = r.rope;
  if (!o.argmax) o.argmax = r.argmax;
  if (!o.to_f16) o.to_f16 = r.to_f16;
  if (!o.to_bf16) o.to_bf16 = r.to_bf16;
  if (!o.sigmoid_mul) o.sigmoid_mul = r.sigmoid_mul;
  return o;
}

const RowOps& cpu_ops() {
  static const RowOps o = merged_ops(cpu_kernels());
  return o;
}

AttnKernel cpu_attention(const CpuKernels& k) { return k.attention ? k.attention : attention_ref; }
AttnChunksKernel cpu_attention_chunks(const CpuKernels& k) {
  return k.attention_chunks ? k.attention_chunks : attention_chunks_ref;
}
AttnMergeKernel cpu_attention_merge(const CpuKernels& k) {
  return k.attention_merge ? k.attention_merge : attention_merge_ref;
}

uint64_t cpu_stream_sum(const CpuKernels& k, const uint8_t* p, uint64_t bytes) {
  if (k.stream_sum) return k.stream_sum(p, bytes);
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (uint64_t i = 0; i + 32 <= bytes; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    s0 += w[0];
    s1 += w[1];
    s2 += w[2];
    s3 += w[3];
  }
  return s0 + s1 + s2 + s3;
}

GemmKernel cpu_gemm(const CpuKernels& k, PackedFormat f) {
  const GemmKernel g = k.gemm[static_cast<int>(f)];
  return g ? g : gemm_ref;
}

void cpu_quantize_act(const CpuKernels& k, ActFormat f, const float* x, int64_t n, uint8_t* out) {
  const auto q = k.quantize_act[static_cast<int>(f)];
  if (q && f != ActFormat::kF32) q(x, n, out);
  else quantize_act_ref(f, x, n, out);
}

float cpu_dot(const CpuKernels& k, DType weight_type, const void* w_row, const void* act_row, int64_t n) {
  const auto id = static_cast<uint32_t>(weight_type);
  if (id < kDTypeIdCount && k.dot[id] != nullptr) return k.dot[id](w_row, act_row, n);
  return dot_ref(weight_type, w_row, act_row, n);
}

}  // namespace sluice::kernels
