// AVX-512 (F, BW, VL, VNNI) dot kernels (compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni -mavx2 -mfma -mf16c; see x86_common.h for the linkage rules of these files).
// Legacy 32-element blocks, two per zmm: VPDPBUSD takes unsigned × signed bytes, so the weight
// codes are fed unsigned (q_u = q + off, off = 8 / 16 / 128) and the offset is removed
// exactly in int32: Σ q·a = Σ q_u·a − Σ off·a. Per block pair the 16 int32 lanes become f32
// and acc_lane += (d_w·d_a)·sum_lane; an odd last block goes through a 256-bit accumulator.
// The reduction order depends only on n: a pure function of the two rows.
// Q4_K / Q6_K: the 256-bit kernels of x86_common.h (same algorithm as AVX2, EVEX-encoded).
// GCC 12's avx512fintrin.h initializes its "undefined" results from themselves, which
// -Wuninitialized reports at every inlined use: a false positive, silenced for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "kernels/cpu/x86_avx512/avx512_sets.h"
#include "kernels/cpu/x86_common.h"
#include "kernels/cpu_kernels.h"

namespace sluice::kernels {
namespace {

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Exact Σ (q_u − off)·y per 4-byte group: q_u unsigned codes, y signed activations.
inline __m512i dot_off_512(__m512i qu, __m512i y, __m512i off) {
  const __m512i z = _mm512_setzero_si512();
  return _mm512_sub_epi32(_mm512_dpbusd_epi32(z, qu, y), _mm512_dpbusd_epi32(z, off, y));
}
inline __m256i dot_off_256(__m256i qu, __m256i y, __m256i off) {
  const __m256i z = _mm256_setzero_si256();
  return _mm256_sub_epi32(_mm256_dpbusd_epi32(z, qu, y), _mm256_dpbusd_epi32(z, off, y));
}

// Codes of ONE block as 32 unsigned bytes (element order).
struct Q4_0 {
  static constexpr int kBytes = kQ4_0Bytes, kOff = 8;
  static __m256i one(const uint8_t* b) {
    const __m128i raw = ld128(b + 2);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
  }
  static __m512i two(const uint8_t* b0, const uint8_t* b1) {
    // [b0.qs, b0.qs, b1.qs, b1.qs] -> shift the 2nd and 4th 128-bit lanes by 4 -> & 15.
    const __m512i v = join(_mm256_broadcastsi128_si256(ld128(b0 + 2)), _mm256_broadcastsi128_si256(ld128(b1 + 2)));
    return _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFF00FF00u, v, 4), _mm512_set1_epi8(0x0F));
  }
};

struct Q5_0 {
  static constexpr int kBytes = kQ5_0Bytes, kOff = 16;
  static __m256i one(const uint8_t* b) {
    const __m128i raw = ld128(b + 6);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
    return _mm256_mask_add_epi8(nib, ld_u32(b + 2), nib, _mm256_set1_epi8(16));
  }
  static __m512i two(const uint8_t* b0, const uint8_t* b1) {
    const __m512i v = join(_mm256_broadcastsi128_si256(ld128(b0 + 6)), _mm256_broadcastsi128_si256(ld128(b1 + 6)));
    const __m512i nib = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFF00FF00u, v, 4), _mm512_set1_epi8(0x0F));
    const __mmask64 hb = static_cast<uint64_t>(ld_u32(b0 + 2)) | (static_cast<uint64_t>(ld_u32(b1 + 2)) << 32);
    return _mm512_mask_add_epi8(nib, hb, nib, _mm512_set1_epi8(16));
  }
};

struct Q8_0 {
  static constexpr int kBytes = kQ8_0Bytes, kOff = 128;
  static __m256i one(const uint8_t* b) {
    return _mm256_xor_si256(ld256(b + 2), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
  static __m512i two(const uint8_t* b0, const uint8_t* b1) {
    return _mm512_xor_si512(join(ld256(b0 + 2), ld256(b1 + 2)), _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

template <class T>
float dot_legacy(const void* wv, const void* av, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* a = static_cast<const uint8_t*>(av);
  const int64_t nb = n / 32;
  const __m512i off = _mm512_set1_epi8(static_cast<char>(T::kOff));
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const uint8_t* w0 = w + i * T::kBytes;
    const uint8_t* a0 = a + i * kQ8_0Bytes;
    const uint8_t* w1 = w0 + T::kBytes;
    const uint8_t* a1 = a0 + kQ8_0Bytes;
    const __m512i y = join(ld256(a0 + 2), ld256(a1 + 2));
    const __m512 s = _mm512_cvtepi32_ps(dot_off_512(T::two(w0, w1), y, off));
    const __m256 d0 = _mm256_set1_ps(ld_f16(w0) * ld_f16(a0)), d1 = _mm256_set1_ps(ld_f16(w1) * ld_f16(a1));
    const __m512 d = _mm512_castsi512_ps(join(_mm256_castps_si256(d0), _mm256_castps_si256(d1)));
    acc = _mm512_fmadd_ps(d, s, acc);
  }
  __m256 acc1 = _mm256_setzero_ps();
  if (i < nb) {
    const uint8_t* w0 = w + i * T::kBytes;
    const uint8_t* a0 = a + i * kQ8_0Bytes;
    const __m256 s = _mm256_cvtepi32_ps(dot_off_256(T::one(w0), ld256(a0 + 2), _mm512_castsi512_si256(off)));
    acc1 = _mm256_mul_ps(_mm256_set1_ps(ld_f16(w0) * ld_f16(a0)), s);
  }
  const __m256 r = _mm256_add_ps(_mm512_castps512_ps256(acc),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
  return hsum_ps(_mm256_add_ps(r, acc1));
}

float dot_q4_k(const void* w, const void* a, int64_t n) { return dot_q4_k_256(w, a, n); }
float dot_q6_k(const void* w, const void* a, int64_t n) { return dot_q6_k_256(w, a, n); }

// gfni: the "avx512gfni" set, the same kernels but a Q6_K matmul that unpacks with GFNI.
constexpr CpuKernels make(bool gfni) {
  CpuKernels k{};
  k.isa = gfni ? "avx512gfni" : "avx512";
  k.dot[static_cast<uint32_t>(DType::Q4_0)] = dot_legacy<Q4_0>;
  k.dot[static_cast<uint32_t>(DType::Q5_0)] = dot_legacy<Q5_0>;
  k.dot[static_cast<uint32_t>(DType::Q8_0)] = dot_legacy<Q8_0>;
  k.dot[static_cast<uint32_t>(DType::Q4_K)] = dot_q4_k;
  k.dot[static_cast<uint32_t>(DType::Q6_K)] = dot_q6_k;
  k.gemm[static_cast<int>(PackedFormat::kQ4_0)] = avx512::gemm_q4_0;
  k.gemm[static_cast<int>(PackedFormat::kQ5_0)] = avx512::gemm_q5_0;
  k.gemm[static_cast<int>(PackedFormat::kQ8_0)] = avx512::gemm_q8_0;
  k.gemm[static_cast<int>(PackedFormat::kQ4_K)] = avx512::gemm_q4_k;
  k.gemm[static_cast<int>(PackedFormat::kQ6_K)] = gfni ? avx512::gemm_q6_k_gfni : avx512::gemm_q6_k;
  k.gemm[static_cast<int>(PackedFormat::kQ6_K8)] = avx512::gemm_q6_k8;
  k.gemm[static_cast<int>(PackedFormat::kF32)] = avx512::gemm_f32;
  k.gemm[static_cast<int>(PackedFormat::kF16)] = avx512::gemm_f16;
  k.gemm[static_cast<int>(PackedFormat::kBF16)] = avx512::gemm_bf16;
  k.quantize_act[static_cast<int>(ActFormat::kA8_32)] = avx512::quantize_a8_32;
  k.quantize_act[static_cast<int>(ActFormat::kA8_256)] = avx512::quantize_a8_256;
  k.ops = RowOps{avx512::rms_norm, avx512::add_rms_norm, avx512::gelu_mul, avx512::softcap, avx512::scale,
                 avx512::rope,     avx512::argmax,       avx512::to_f16,   avx512::to_bf16, avx512::sigmoid_mul};
  k.attention = avx512::attention;
  k.attention_chunks = avx512::attention_chunks;
  k.attention_merge = avx512::attention_merge;
  k.stream_sum = avx512::stream_sum;
  return k;
}

}  // namespace

// Constant-initialized DATA (see x86_avx2/dot_avx2.cpp).
extern constinit const CpuKernels kCpuKernelsAvx512;
extern constinit const CpuKernels kCpuKernelsAvx512Gfni;
constinit const CpuKernels kCpuKernelsAvx512 = make(false);
constinit const CpuKernels kCpuKernelsAvx512Gfni = make(true);

}  // namespace sluice::kernels
