// Scalar reference dequantizers. Each loop is ggml's dequantize_row_* (ggml-quants.c) in
// ggml's operation order, so with -ffp-contract=off the results equal ggml's and gguf-py's
// bit for bit (quants.md §1: "(q - 8) * d", "q*d + m", "(d*sc)*q - (dmin*m)").
#include <cstring>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/ref_rows.h"

namespace sluice::quant::ref {

namespace {

// The 4-bit nibble of element e (0..31) in a 16-byte Q4_0-style qs array.
inline int nib32(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }

}  // namespace

// ---- scalar types ----

void to_f32_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void to_f32_f16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(p + 2 * i));
}

void to_f32_bf16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(p + 2 * i));
}

// ---- legacy 32-element blocks ----

void to_f32_q4_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = f16_to_f32(b.d);
    float* y = dst + i * kQK4_0;
    for (int e = 0; e < kQK4_0; ++e) y[e] = static_cast<float>(nib32(b.qs, e) - 8) * d;
  }
}

void to_f32_q4_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_1; ++i) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = f16_to_f32(b.d);
    const float m = f16_to_f32(b.m);
    float* y = dst + i * kQK4_1;
    for (int e = 0; e < kQK4_1; ++e) y[e] = static_cast<float>(nib32(b.qs, e)) * d + m;
  }
}

void to_f32_q5_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK5_0; ++i) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = f16_to_f32(b.d);
    const uint32_t qh = load_u32(b.qh);
    float* y = dst + i * kQK5_0;
    for (int e = 0; e < kQK5_0; ++e) {
      const int q = nib32(b.qs, e) | static_cast<int>(((qh >> e) & 1) << 4);
      y[e] = static_cast<float>(q - 16) * d;
    }
  }
}

void to_f32_q5_1(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK5_1; ++i) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = f16_to_f32(b.d);
    const float m = f16_to_f32(b.m);
    const uint32_t qh = load_u32(b.qh);
    float* y = dst + i * kQK5_1;
    for (int e = 0; e < kQK5_1; ++e) {
      const int q = nib32(b.qs, e) | static_cast<int>(((qh >> e) & 1) << 4);
      y[e] = static_cast<float>(q) * d + m;
    }
  }
}

void to_f32_q8_0(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = f16_to_f32(b.d);
    float* y = dst + i * kQK8_0;
    for (int e = 0; e < kQK8_0; ++e) y[e] = static_cast<float>(b.qs[e]) * d;
  }
}

void to_f32_iq4_nl(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK4_NL; ++i) {
    const auto b = load_block<BlockIQ4_NL>(src, i);
    const float d = f16_to_f32(b.d);
    float* y = dst + i * kQK4_NL;
    for (int e = 0; e < kQK4_NL; ++e) y[e] = d * static_cast<float>(kIQ4NLValues[nib32(b.qs, e)]);
  }
}

// ---- K-quants ----

// Q2_K: 2 chunks of 128 elements; chunk c uses qs[32c..32c+31], each byte holds the codes of
// elements 128c + t + {0, 32, 64, 96} in bit pairs 0-1, 2-3, 4-5, 6-7. Group g = e/16 has
// scale nibble scales[g] & 15 and min nibble scales[g] >> 4.
void to_f32_q2_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ2_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int c = 0; c < 2; ++c) {
      const uint8_t* q = b.qs + 32 * c;
      for (int j = 0; j < 4; ++j) {             // bit pair j -> elements 128c + 32j + 0..31
        for (int half = 0; half < 2; ++half) {  // 16-element groups 8c + 2j + half
          const uint8_t sc = b.scales[8 * c + 2 * j + half];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            const int code = (q[16 * half + l] >> (2 * j)) & 3;
            *y++ = dl * static_cast<float>(code) - ml;
          }
        }
      }
    }
  }
}

namespace {

// The 16 6-bit Q3_K scales, minus 32 (quants.md appendix B).
void unpack_q3_k_scales(const uint8_t s[kKScaleSize], int out[16]) {
  for (int i = 0; i < 4; ++i) {
    out[i] = ((s[i] & 15) | ((s[8 + i] & 3) << 4)) - 32;
    out[4 + i] = ((s[4 + i] & 15) | (((s[8 + i] >> 2) & 3) << 4)) - 32;
    out[8 + i] = ((s[i] >> 4) | (((s[8 + i] >> 4) & 3) << 4)) - 32;
    out[12 + i] = ((s[4 + i] >> 4) | (((s[8 + i] >> 6) & 3) << 4)) - 32;
  }
}

}  // namespace

// Q3_K: like Q2_K's layout for the low 2 bits; the high bit of element 128c + 32j + t is bit
// 4c + j of hmask[t]; a clear high bit subtracts 4.
void to_f32_q3_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ3_K>(src, i);
    const float d_all = f16_to_f32(b.d);
    int scales[16];
    unpack_q3_k_scales(b.scales, scales);
    float* y = dst + i * kQK_K;
    for (int c = 0; c < 2; ++c) {
      const uint8_t* q = b.qs + 32 * c;
      for (int j = 0; j < 4; ++j) {
        const int hbit = 4 * c + j;
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * static_cast<float>(scales[8 * c + 2 * j + half]);
          for (int l = 0; l < 16; ++l) {
            const int t = 16 * half + l;
            const int lo = (q[t] >> (2 * j)) & 3;
            const int code = lo - (((b.hmask[t] >> hbit) & 1) ? 0 : 4);
            *y++ = dl * static_cast<float>(code);
          }
        }
      }
    }
  }
}

// Q4_K: 4 chunks of 64; chunk c's 32 bytes hold sub-block 2c in the low nibbles and 2c+1 in
// the high nibbles.
void to_f32_q4_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ4_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int c = 0; c < 4; ++c) {
      uint8_t sc, m;
      get_scale_min_k4(2 * c, b.scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      get_scale_min_k4(2 * c + 1, b.scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      const uint8_t* q = b.qs + 32 * c;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// Q5_K: Q4_K plus bit s = e/32 of qh[e % 32] worth 16.
void to_f32_q5_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ5_K>(src, i);
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int c = 0; c < 4; ++c) {
      uint8_t sc, m;
      get_scale_min_k4(2 * c, b.scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      get_scale_min_k4(2 * c + 1, b.scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      const uint8_t* ql = b.qs + 32 * c;
      const uint8_t u1 = static_cast<uint8_t>(1u << (2 * c)), u2 = static_cast<uint8_t>(2u << (2 * c));
      for (int l = 0; l < 32; ++l) {
        const int q = (ql[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0);
        *y++ = d1 * static_cast<float>(q) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const int q = (ql[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0);
        *y++ = d2 * static_cast<float>(q) - m2;
      }
    }
  }
}

// Q6_K: two halves of 128 (ql += 64, qh += 32, scales += 8 per half), §8.3.
void to_f32_q6_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = f16_to_f32(b.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      const int8_t* sc = b.scales + 8 * h;
      float* y = dst + i * kQK_K + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

// Q8_K (activation side): y = d * qs, d f32.
void to_f32_q8_k(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockQ8_K>(src, i);
    float* y = dst + i * kQK_K;
    for (int e = 0; e < kQK_K; ++e) y[e] = b.d * static_cast<float>(b.qs[e]);
  }
}

// IQ4_XS: 8 sub-blocks of 32, 6-bit scale ls = 4 low bits from scales_l, 2 high bits from
// the u16 scales_h; 16 qs bytes per sub-block, nibbles as Q4_0.
void to_f32_iq4_xs(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto b = load_block<BlockIQ4_XS>(src, i);
    const float d = f16_to_f32(b.d);
    const uint16_t scales_h = load_u16(b.scales_h);
    float* y = dst + i * kQK_K;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = b.qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j + 0] = dl * static_cast<float>(kIQ4NLValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIQ4NLValues[qs[j] >> 4]);
      }
      y += 32;
    }
  }
}

}  // namespace sluice::quant::ref
