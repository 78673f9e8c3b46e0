// AVX2 + FMA + F16C dot kernels (compiled with -mavx2 -mfma -mf16c; see x86_common.h for the
// linkage rules of these files). Legacy 32-element blocks: per block an exact int32 sum in 8
// lanes (sign trick + maddubs + madd), converted to f32 and accumulated as
// acc_lane += (d_w·d_a)·sum_lane, two interleaved accumulators (even / odd blocks), reduced
// in a fixed order at the end: a pure function of the two rows. The set's packed matmul kernels
// and activation quantizers are in gemm_avx2.cpp, its row ops in ops_avx2.cpp (avx2_sets.h).
#include "kernels/cpu/x86_avx2/avx2_sets.h"
#include "kernels/cpu/x86_common.h"
#include "kernels/cpu_kernels.h"

namespace sluice::kernels {
namespace {

// Σ_e q[e]·y[e] for 32 signed bytes (|q| ≤ 128, |y| ≤ 127), as 8 int32 lanes.
inline __m256i dot_i8(__m256i q, __m256i y) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// Generic loop over 32-element blocks: codes(w_block) gives the 32 signed codes.
template <int kWBytes, class Codes>
inline float dot_legacy(const void* wv, const void* av, int64_t n, Codes codes) {
  const auto* w = static_cast<const uint8_t*>(wv);
  const auto* a = static_cast<const uint8_t*>(av);
  const int64_t nb = n / 32;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const uint8_t* w0 = w + i * kWBytes;
    const uint8_t* a0 = a + i * kQ8_0Bytes;
    const uint8_t* w1 = w0 + kWBytes;
    const uint8_t* a1 = a0 + kQ8_0Bytes;
    const __m256 s0 = _mm256_cvtepi32_ps(dot_i8(codes(w0), ld256(a0 + 2)));
    const __m256 s1 = _mm256_cvtepi32_ps(dot_i8(codes(w1), ld256(a1 + 2)));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(ld_f16(w0) * ld_f16(a0)), s0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(ld_f16(w1) * ld_f16(a1)), s1, acc1);
  }
  if (i < nb) {
    const uint8_t* w0 = w + i * kWBytes;
    const uint8_t* a0 = a + i * kQ8_0Bytes;
    const __m256 s0 = _mm256_cvtepi32_ps(dot_i8(codes(w0), ld256(a0 + 2)));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(ld_f16(w0) * ld_f16(a0)), s0, acc0);
  }
  return hsum_ps(_mm256_add_ps(acc0, acc1));
}

// Q4_0: byte e of the result = nib(e) − 8 (low nibbles are elements 0..15, high 16..31).
inline __m256i codes_q4_0(const uint8_t* b) {
  const __m128i raw = ld128(b + 2);
  const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
  return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
}

// Q5_0: nib(e) | (bit e of qh) << 4, minus 16.
inline __m256i codes_q5_0(const uint8_t* b) {
  const __m128i raw = ld128(b + 6);
  const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
  // Byte e <- byte e/8 of qh, then test bit e%8.
  const __m256i qh = _mm256_set1_epi32(static_cast<int32_t>(ld_u32(b + 2)));
  const __m256i spread = _mm256_shuffle_epi8(
      qh, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  const __m256i q = _mm256_or_si256(nib, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
  return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
}

inline __m256i codes_q8_0(const uint8_t* b) { return ld256(b + 2); }

float dot_q4_0(const void* w, const void* a, int64_t n) { return dot_legacy<kQ4_0Bytes>(w, a, n, codes_q4_0); }
float dot_q5_0(const void* w, const void* a, int64_t n) { return dot_legacy<kQ5_0Bytes>(w, a, n, codes_q5_0); }
float dot_q8_0(const void* w, const void* a, int64_t n) { return dot_legacy<kQ8_0Bytes>(w, a, n, codes_q8_0); }
float dot_q4_k(const void* w, const void* a, int64_t n) { return dot_q4_k_256(w, a, n); }
float dot_q6_k(const void* w, const void* a, int64_t n) { return dot_q6_k_256(w, a, n); }

constexpr CpuKernels make() {
  CpuKernels k{};
  k.isa = "avx2";
  k.dot[static_cast<uint32_t>(DType::Q4_0)] = dot_q4_0;
  k.dot[static_cast<uint32_t>(DType::Q5_0)] = dot_q5_0;
  k.dot[static_cast<uint32_t>(DType::Q8_0)] = dot_q8_0;
  k.dot[static_cast<uint32_t>(DType::Q4_K)] = dot_q4_k;
  k.dot[static_cast<uint32_t>(DType::Q6_K)] = dot_q6_k;
  k.gemm[static_cast<int>(PackedFormat::kQ4_0)] = avx2::gemm_q4_0;
  k.gemm[static_cast<int>(PackedFormat::kQ5_0)] = avx2::gemm_q5_0;
  k.gemm[static_cast<int>(PackedFormat::kQ8_0)] = avx2::gemm_q8_0;
  k.gemm[static_cast<int>(PackedFormat::kQ4_K)] = avx2::gemm_q4_k;
  k.gemm[static_cast<int>(PackedFormat::kQ6_K)] = avx2::gemm_q6_k;
  k.gemm[static_cast<int>(PackedFormat::kQ6_K8)] = avx2::gemm_q6_k8;
  k.gemm[static_cast<int>(PackedFormat::kF32)] = avx2::gemm_f32;
  k.gemm[static_cast<int>(PackedFormat::kF16)] = avx2::gemm_f16;
  k.gemm[static_cast<int>(PackedFormat::kBF16)] = avx2::gemm_bf16;
  k.quantize_act[static_cast<int>(ActFormat::kA8_32)] = avx2::quantize_a8_32;
  k.quantize_act[static_cast<int>(ActFormat::kA8_256)] = avx2::quantize_a8_256;
  k.ops = RowOps{avx2::rms_norm, avx2::add_rms_norm, avx2::gelu_mul, avx2::softcap, avx2::scale, avx2::rope,
                 avx2::argmax,   avx2::to_f16,       avx2::to_bf16,  nullptr};  // sigmoid_mul: the reference
  k.attention = avx2::attention;
  k.attention_chunks = avx2::attention_chunks;
  k.attention_merge = avx2::attention_merge;
  k.stream_sum = avx2::stream_sum;
  return k;
}

}  // namespace

// Constant-initialized DATA, not a function: the selector (built without ISA flags) reads it on
// any CPU without executing a single instruction compiled with -mavx2.
extern constinit const CpuKernels kCpuKernelsAvx2;
constinit const CpuKernels kCpuKernelsAvx2 = make();

}  // namespace sluice::kernels
