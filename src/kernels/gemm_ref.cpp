// Scalar reference of the packed matmul: reads the x16 layouts of packed.h and computes, for
// each output, exactly what dot_ref computes on the original row (integer block sums, then
// acc += (d_w·d_a)·sumi in block order), so the SIMD kernels can be checked bit for bit.
// Float formats: acc[c mod 2] = fma(w, x, acc[c mod 2]) along K, then acc[0] + acc[1]
// (std::fma: exactly rounded, as the SIMD fused multiply-add). Built with -ffp-contract=off.
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/gemm.h"

namespace sluice::kernels {

namespace {

inline float ld_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Unsigned code of row i, element e (0..31) of a Q4_0x16-style codes area (4 chunks of 64 B).
inline int nib_code(const uint8_t* chunks, int i, int e) {
  const int hi = e >= 16, c = (e % 16) / 4, t = e % 4;
  const uint8_t b = chunks[64 * c + 4 * i + t];
  return hi ? b >> 4 : b & 15;
}

float row_q4_0(const uint8_t* g, int i, const ActRows& a, int64_t m, int64_t nb) {
  const int8_t* qs = a.qs(m);
  const float* d = a.d(m);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * 288;
    int32_t sumi = 0;
    for (int e = 0; e < 32; ++e) sumi += (nib_code(blk + 32, i, e) - 8) * qs[32 * b + e];
    acc += (ld_f16(blk + 2 * i) * d[b]) * static_cast<float>(sumi);
  }
  return acc;
}

float row_q5_0(const uint8_t* g, int i, const ActRows& a, int64_t m, int64_t nb) {
  const int8_t* qs = a.qs(m);
  const float* d = a.d(m);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * 352;
    int32_t sumi = 0;
    for (int e = 0; e < 32; ++e) {
      const int j = e < 16 ? e / 4 : 4 + (e - 16) / 4;
      uint64_t mask;
      std::memcpy(&mask, blk + 288 + 8 * j, 8);
      const int hb = static_cast<int>((mask >> (4 * i + e % 4)) & 1);
      sumi += ((nib_code(blk + 32, i, e) | (hb << 4)) - 16) * qs[32 * b + e];
    }
    acc += (ld_f16(blk + 2 * i) * d[b]) * static_cast<float>(sumi);
  }
  return acc;
}

float row_q8_0(const uint8_t* g, int i, const ActRows& a, int64_t m, int64_t nb) {
  const int8_t* qs = a.qs(m);
  const float* d = a.d(m);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * 544;
    int32_t sumi = 0;
    for (int e = 0; e < 32; ++e) sumi += (blk[32 + 64 * (e / 4) + 4 * i + e % 4] - 128) * qs[32 * b + e];
    acc += (ld_f16(blk + 2 * i) * d[b]) * static_cast<float>(sumi);
  }
  return acc;
}

float row_q4_k(const uint8_t* g, int i, const ActRows& a, int64_t m, int64_t nb) {
  const int8_t* qs = a.qs(m);
  const float* d = a.d(m);
  const int32_t* bs = a.sums(m);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * 2368;
    int32_t sumi = 0, summ = 0;
    for (int s = 0; s < 8; ++s) {
      int32_t si = 0;
      for (int e = 0; e < 32; ++e) si += nib_code(blk + 320 + 256 * s, i, e) * qs[256 * b + 32 * s + e];
      sumi += blk[64 + 16 * s + i] * si;
      summ += blk[192 + 16 * s + i] * (bs[16 * b + 2 * s] + bs[16 * b + 2 * s + 1]);
    }
    acc += (ld_f16(blk + 2 * i) * d[b]) * static_cast<float>(sumi) -
           (ld_f16(blk + 32 + 2 * i) * d[b]) * static_cast<float>(summ);
  }
  return acc;
}

float row_q6_k(const uint8_t* g, int i, const ActRows& a, int64_t m, int64_t nb) {
  const int8_t* qs = a.qs(m);
  const float* d = a.d(m);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * 3360;
    int32_t sumi = 0;
    for (int sg = 0; sg < 16; ++sg) {
      const uint8_t* sub = blk + 288 + 192 * sg;
      int32_t si = 0;
      for (int e = 0; e < 16; ++e) {
        const int ch = (e % 8) / 4, t = e % 4;
        const uint8_t lb = sub[64 * ch + 4 * i + t];
        const int lo = e < 8 ? lb & 15 : lb >> 4;
        const int hi = (sub[128 + 4 * i + t] >> (2 * (e / 4))) & 3;
        si += ((lo | (hi << 4)) - 32) * qs[256 * b + 16 * sg + e];
      }
      sumi += static_cast<int8_t>(blk[32 + 16 * sg + i]) * si;
    }
    acc += (ld_f16(blk + 2 * i) * d[b]) * static_cast<float>(sumi);
  }
  return acc;
}

float row_q6_k8(const uint8_t* g, int i, const ActRows& a, int64_t m, int64_t nb) {
  const int8_t* qs = a.qs(m);
  const float* d = a.d(m);
  float acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = g + b * 4384;
    int32_t sumi = 0;
    for (int sg = 0; sg < 16; ++sg) {
      int32_t si = 0;
      for (int e = 0; e < 16; ++e)
        si += (blk[288 + 256 * sg + 64 * (e / 4) + 4 * i + e % 4] - 32) * qs[256 * b + 16 * sg + e];
      sumi += static_cast<int8_t>(blk[32 + 16 * sg + i]) * si;
    }
    acc += (ld_f16(blk + 2 * i) * d[b]) * static_cast<float>(sumi);
  }
  return acc;
}

// Two chains of fused multiply-adds, even and odd columns, added at the end: one chain was
// bound by the FMA latency in the decode kernel (4 cycles a column: under what a fast bus
// delivers).
float row_float(PackedFormat f, const uint8_t* g, int i, const ActRows& a, int64_t m, int64_t k) {
  const float* x = a.f32(m);
  float acc[2] = {0, 0};
  for (int64_t c = 0; c < k; ++c) {
    float w;
    if (f == PackedFormat::kF32) {
      std::memcpy(&w, g + 64 * c + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, g + 32 * c + 2 * i, 2);
      w = f == PackedFormat::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    acc[c & 1] = std::fma(w, x[c], acc[c & 1]);
  }
  return acc[0] + acc[1];
}

}  // namespace

void gemm_ref(const GemmArgs& p, int64_t g0, int64_t g1) {
  const int64_t nb = p.k / packed_block_elems(p.format);
  for (int64_t gi = g0; gi < g1; ++gi) {
    const uint8_t* g = p.w + static_cast<uint64_t>(gi) * p.group_bytes;
    for (int i = 0; i < kGroupRows; ++i) {
      const int64_t r = gi * kGroupRows + i;
      if (r >= p.rows) break;
      for (int64_t m = 0; m < p.m; ++m) {
        float v = 0;
        switch (p.format) {
          case PackedFormat::kQ4_0: v = row_q4_0(g, i, p.a, m, nb); break;
          case PackedFormat::kQ5_0: v = row_q5_0(g, i, p.a, m, nb); break;
          case PackedFormat::kQ8_0: v = row_q8_0(g, i, p.a, m, nb); break;
          case PackedFormat::kQ4_K: v = row_q4_k(g, i, p.a, m, nb); break;
          case PackedFormat::kQ6_K: v = row_q6_k(g, i, p.a, m, nb); break;
          case PackedFormat::kQ6_K8: v = row_q6_k8(g, i, p.a, m, nb); break;
          case PackedFormat::kF32:
          case PackedFormat::kF16:
          case PackedFormat::kBF16: v = row_float(p.format, g, i, p.a, m, p.k); break;
          case PackedFormat::kNone: break;
        }
        p.y[m * p.ldy + r] = v;
      }
    }
  }
}

}  // namespace sluice::kernels
