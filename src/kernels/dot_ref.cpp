// Scalar reference block dot products, after ggml's generic CPU code (ggml-cpu/quants.c,
// quants.md §9.5 and appendices). In every quantized type the products of codes are summed
// exactly in int32 over a block (a K-quant super-block: sub-block sums times their integer
// scales), then ONE f32 product per block, (d_w·d_a)·sumi, is added to a single f32
// accumulator in block order. Two deliberate, documented differences from ggml's generic C:
//  * the scale product is always (d_w·d_a)·sumi (one rounding; f16·f16 is exact in f32).
//    ggml's generic Q4_0 writes sumi·d_w·d_a, i.e. (sumi·d_w)·d_a; its SIMD kernels form
//    d_w·d_a first, as here.
//  * K-quants and IQ4_XS sum the whole super-block in int32 before scaling. ggml's generic
//    Q3_K..Q6_K spread it over 8 f32 lanes reduced at the end of the row (Q4_K/Q5_K also
//    keep the min term in a separate sum), and its generic IQ4_XS scales per 32-element
//    sub-block. Mathematically equal; only the f32 rounding differs.
// Built with -ffp-contract=off. No int32 sum here can overflow (worst case Q6_K:
// 16 groups · 128 · 16 · 32 · 127 < 2^28).
#include "kernels/dot_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace sluice::kernels {

namespace {

using namespace sluice::quant;  // block structs, load_block, kIQ4NLValues

using DotFn = float (*)(const void* w, const void* a, int64_t n);

// The 4-bit nibble of element e (0..31) in a 16-byte Q4_0-style qs array.
inline int nib32(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }

inline float h2f(uint16_t h) { return f16_to_f32(h); }

// Σ q[e]·a[e] for e < len, exact.
inline int32_t idot(const int8_t* q, const int8_t* a, int len) {
  int32_t s = 0;
  for (int e = 0; e < len; ++e) s += static_cast<int32_t>(q[e]) * a[e];
  return s;
}

// ---- float types: Σ w·a with `dot`'s order (ops_ref.cpp): 8 interleaved partial sums, then
// ((0+4)+(1+5))+((2+6)+(3+7)). f16·f16 and bf16·bf16 products are exact in f32. ----

template <class Load>
float lane_dot(const void* w, const void* a, int64_t n, Load load) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += load(w, i + l) * load(a, i + l);
  for (int l = 0; i < n; ++i, ++l) acc[l] += load(w, i) * load(a, i);
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

inline float load_f32(const void* p, int64_t i) {
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(p) + 4 * i, 4);
  return v;
}
inline float load_f16(const void* p, int64_t i) { return h2f(load_u16(static_cast<const uint8_t*>(p) + 2 * i)); }
inline float load_bf16(const void* p, int64_t i) {
  return bf16_to_f32(load_u16(static_cast<const uint8_t*>(p) + 2 * i));
}

// F32 · F32: Σ w·a, the same float ops as kernels::dot.
float dot_f32(const void* w, const void* a, int64_t n) { return lane_dot(w, a, n, load_f32); }
// F16 · F16 (activations rounded to f16): Σ f32(w)·f32(a).
float dot_f16(const void* w, const void* a, int64_t n) { return lane_dot(w, a, n, load_f16); }
// BF16 · BF16 (activations rounded to bf16): Σ f32(w)·f32(a).
float dot_bf16(const void* w, const void* a, int64_t n) { return lane_dot(w, a, n, load_bf16); }

// ---- legacy 32-element blocks ----

// Q4_0 · Q8_0: sumi = Σ_e (nib(e) − 8)·a[e];  acc += (d_w·d_a)·sumi.
float dot_q4_0(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const auto x = load_block<BlockQ4_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    int32_t sumi = 0;
    for (int e = 0; e < 32; ++e) sumi += (nib32(x.qs, e) - 8) * y.qs[e];
    acc += (h2f(x.d) * h2f(y.d)) * static_cast<float>(sumi);
  }
  return acc;
}

// Q4_1 · Q8_1: sumi = Σ_e nib(e)·a[e];  acc += (d_w·d_a)·sumi + m_w·s_a  (s_a = f16(d_a·Σa)).
float dot_q4_1(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK4_1; ++i) {
    const auto x = load_block<BlockQ4_1>(w, i);
    const auto y = load_block<BlockQ8_1>(a, i);
    int32_t sumi = 0;
    for (int e = 0; e < 32; ++e) sumi += nib32(x.qs, e) * y.qs[e];
    acc += (h2f(x.d) * h2f(y.d)) * static_cast<float>(sumi) + h2f(x.m) * h2f(y.s);
  }
  return acc;
}

// The 5-bit code of element e of a Q5_0 / Q5_1 block: nibble | bit e of qh << 4.
inline int q5(const uint8_t* qs, uint32_t qh, int e) { return nib32(qs, e) | static_cast<int>(((qh >> e) & 1) << 4); }

// Q5_0 · Q8_0: sumi = Σ_e (q5(e) − 16)·a[e];  acc += (d_w·d_a)·sumi.
float dot_q5_0(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK5_0; ++i) {
    const auto x = load_block<BlockQ5_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    const uint32_t qh = load_u32(x.qh);
    int32_t sumi = 0;
    for (int e = 0; e < 32; ++e) sumi += (q5(x.qs, qh, e) - 16) * y.qs[e];
    acc += (h2f(x.d) * h2f(y.d)) * static_cast<float>(sumi);
  }
  return acc;
}

// Q5_1 · Q8_1: sumi = Σ_e q5(e)·a[e];  acc += (d_w·d_a)·sumi + m_w·s_a.
float dot_q5_1(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK5_1; ++i) {
    const auto x = load_block<BlockQ5_1>(w, i);
    const auto y = load_block<BlockQ8_1>(a, i);
    const uint32_t qh = load_u32(x.qh);
    int32_t sumi = 0;
    for (int e = 0; e < 32; ++e) sumi += q5(x.qs, qh, e) * y.qs[e];
    acc += (h2f(x.d) * h2f(y.d)) * static_cast<float>(sumi) + h2f(x.m) * h2f(y.s);
  }
  return acc;
}

// Q8_0 · Q8_0: sumi = Σ_e q[e]·a[e];  acc += (d_w·d_a)·sumi.
float dot_q8_0(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const auto x = load_block<BlockQ8_0>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    acc += (h2f(x.d) * h2f(y.d)) * static_cast<float>(idot(x.qs, y.qs, 32));
  }
  return acc;
}

// IQ4_NL · Q8_0: sumi = Σ_e K[nib(e)]·a[e];  acc += (d_w·d_a)·sumi.
float dot_iq4_nl(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK4_NL; ++i) {
    const auto x = load_block<BlockIQ4_NL>(w, i);
    const auto y = load_block<BlockQ8_0>(a, i);
    int32_t sumi = 0;
    for (int e = 0; e < 32; ++e) sumi += kIQ4NLValues[nib32(x.qs, e)] * y.qs[e];
    acc += (h2f(x.d) * h2f(y.d)) * static_cast<float>(sumi);
  }
  return acc;
}

// ---- K-quants and IQ4_XS against Q8_K (d_a is f32) ----
// Each first expands the super-block's codes to q[256] (element order, as the dequantizers
// in quant/dequant_ref.cpp read them), then sums per group.

// Q2_K · Q8_K, 16 groups g of 16: sumi = Σ_g (sc_g & 15)·Σ_{e∈g} q[e]·a[e] (q ∈ 0..3),
// summ = Σ_g (sc_g >> 4)·bsums[g];  acc += (d_w·d_a)·sumi − (dmin_w·d_a)·summ.
float dot_q2_k(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto x = load_block<BlockQ2_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int8_t q[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {  // element 128c + 32j + t: bits 2j of qs[32c + t]
      const int c = e / 128, j = (e % 128) / 32, t = e % 32;
      q[e] = static_cast<int8_t>((x.qs[32 * c + t] >> (2 * j)) & 3);
    }
    int32_t sumi = 0, summ = 0;
    for (int g = 0; g < 16; ++g) {
      sumi += (x.scales[g] & 15) * idot(q + 16 * g, y.qs + 16 * g, 16);
      summ += (x.scales[g] >> 4) * y.bsums[g];
    }
    acc += (h2f(x.d) * y.d) * static_cast<float>(sumi) - (h2f(x.dmin) * y.d) * static_cast<float>(summ);
  }
  return acc;
}

// The 16 6-bit Q3_K scales S_g minus 32 (quants.md appendix B).
void q3_k_scales(const uint8_t s[kKScaleSize], int out[16]) {
  for (int i = 0; i < 4; ++i) {
    out[i] = ((s[i] & 15) | ((s[8 + i] & 3) << 4)) - 32;
    out[4 + i] = ((s[4 + i] & 15) | (((s[8 + i] >> 2) & 3) << 4)) - 32;
    out[8 + i] = ((s[i] >> 4) | (((s[8 + i] >> 4) & 3) << 4)) - 32;
    out[12 + i] = ((s[4 + i] >> 4) | (((s[8 + i] >> 6) & 3) << 4)) - 32;
  }
}

// Q3_K · Q8_K: sumi = Σ_g (S_g − 32)·Σ_{e∈g} q[e]·a[e] (q ∈ −4..3);  acc += (d_w·d_a)·sumi.
float dot_q3_k(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto x = load_block<BlockQ3_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int8_t q[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {  // low bits as Q2_K; high bit 4c + j of hmask[t], clear = −4
      const int c = e / 128, j = (e % 128) / 32, t = e % 32;
      const int lo = (x.qs[32 * c + t] >> (2 * j)) & 3;
      q[e] = static_cast<int8_t>(lo - (((x.hmask[t] >> (4 * c + j)) & 1) ? 0 : 4));
    }
    int sc[16];
    q3_k_scales(x.scales, sc);
    int32_t sumi = 0;
    for (int g = 0; g < 16; ++g) sumi += sc[g] * idot(q + 16 * g, y.qs + 16 * g, 16);
    acc += (h2f(x.d) * y.d) * static_cast<float>(sumi);
  }
  return acc;
}

// Q4_K / Q5_K share the sums: 8 sub-blocks s of 32 with 6-bit (sc_s, m_s):
// sumi = Σ_s sc_s·Σ_{e∈s} q[e]·a[e], summ = Σ_s m_s·(bsums[2s] + bsums[2s+1]);
// acc += (d_w·d_a)·sumi − (dmin_w·d_a)·summ.
float k4_block(const int8_t q[kQK_K], const uint8_t scales[kKScaleSize], uint16_t d, uint16_t dmin,
               const BlockQ8_K& y) {
  int32_t sumi = 0, summ = 0;
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    get_scale_min_k4(s, scales, &sc, &m);
    sumi += sc * idot(q + 32 * s, y.qs + 32 * s, 32);
    summ += m * (y.bsums[2 * s] + y.bsums[2 * s + 1]);
  }
  return (h2f(d) * y.d) * static_cast<float>(sumi) - (h2f(dmin) * y.d) * static_cast<float>(summ);
}

// Q4_K · Q8_K (q ∈ 0..15; chunk c's 32 bytes: low nibbles sub-block 2c, high 2c+1).
float dot_q4_k(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto x = load_block<BlockQ4_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int8_t q[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {
      const uint8_t b = x.qs[32 * (e / 64) + e % 32];
      q[e] = static_cast<int8_t>((e % 64) < 32 ? b & 15 : b >> 4);
    }
    acc += k4_block(q, x.scales, x.d, x.dmin, y);
  }
  return acc;
}

// Q5_K · Q8_K (q ∈ 0..31: the Q4_K nibble + 16 · bit e/32 of qh[e % 32]).
float dot_q5_k(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto x = load_block<BlockQ5_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int8_t q[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {
      const uint8_t b = x.qs[32 * (e / 64) + e % 32];
      const int lo = (e % 64) < 32 ? b & 15 : b >> 4;
      q[e] = static_cast<int8_t>(lo + 16 * ((x.qh[e % 32] >> (e / 32)) & 1));
    }
    acc += k4_block(q, x.scales, x.d, x.dmin, y);
  }
  return acc;
}

// Q6_K · Q8_K: sumi = Σ_g scales_g·Σ_{e∈g} q[e]·a[e] (q ∈ −32..31, scales int8);
// acc += (d_w·d_a)·sumi.
float dot_q6_k(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto x = load_block<BlockQ6_K>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    int8_t q[kQK_K];
    for (int e = 0; e < kQK_K; ++e) {  // quants.md §8.2 element form
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t b = x.ql[64 * h + 32 * (k & 1) + l];
      const int lo = k < 2 ? b & 15 : b >> 4;
      const int hi = (x.qh[32 * h + l] >> (2 * k)) & 3;
      q[e] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
    int32_t sumi = 0;
    for (int g = 0; g < 16; ++g) sumi += x.scales[g] * idot(q + 16 * g, y.qs + 16 * g, 16);
    acc += (h2f(x.d) * y.d) * static_cast<float>(sumi);
  }
  return acc;
}

// IQ4_XS · Q8_K: 8 sub-blocks ib of 32 with 6-bit ls_ib:
// sumi = Σ_ib (ls_ib − 32)·Σ_{e∈ib} K[nib(e)]·a[e];  acc += (d_w·d_a)·sumi.
float dot_iq4_xs(const void* w, const void* a, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto x = load_block<BlockIQ4_XS>(w, i);
    const auto y = load_block<BlockQ8_K>(a, i);
    const uint16_t scales_h = load_u16(x.scales_h);
    int32_t sumi = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((x.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4);
      int32_t s = 0;
      for (int e = 0; e < 32; ++e) s += kIQ4NLValues[nib32(x.qs + 16 * ib, e)] * y.qs[32 * ib + e];
      sumi += (ls - 32) * s;
    }
    acc += (h2f(x.d) * y.d) * static_cast<float>(sumi);
  }
  return acc;
}

// ---- activation quantizers ----

// Q8_1: Q8_0's codes and f16 d (quantize_ref(Q8_0), i.e. ggml's quantize_row_q8_0_ref), plus
// s = f16(Σqs · d) with ggml's UNROUNDED f32 d = amax/127 (quantize_row_q8_1_ref).
void quantize_q8_1(const float* x, void* out, int64_t n) {
  for (int64_t i = 0; i < n / kQK8_1; ++i) {
    const float* v = x + i * kQK8_1;
    BlockQ8_0 b0;
    quantize_ref(DType::Q8_0, v, &b0, kQK8_0);
    float amax = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) amax = std::max(amax, std::fabs(v[j]));  // as quantize_ref(Q8_0)
    const float d = amax / 127;
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) sum += b0.qs[j];
    BlockQ8_1 b;
    b.d = b0.d;
    b.s = f32_to_f16(static_cast<float>(sum) * d);
    std::memcpy(b.qs, b0.qs, sizeof b.qs);
    store_block(out, i, b);
  }
}

void quantize_q8_0(const float* x, void* out, int64_t n) { quantize_ref(DType::Q8_0, x, out, n); }
void quantize_q8_k(const float* x, void* out, int64_t n) { quantize_row_q8_k_ref(x, out, n); }
void quantize_f32(const float* x, void* out, int64_t n) { quantize_ref(DType::F32, x, out, n); }
void quantize_f16(const float* x, void* out, int64_t n) { quantize_ref(DType::F16, x, out, n); }
void quantize_bf16(const float* x, void* out, int64_t n) { quantize_ref(DType::BF16, x, out, n); }

// ---- the table: index = weight type id ----

struct DotTraits {
  DType act = DType::F32;
  void (*quantize)(const float* x, void* out, int64_t n) = nullptr;
  DotFn dot = nullptr;
};

struct Table {
  DotTraits t[kDTypeIdCount] = {};
  constexpr Table() {
    add(DType::F32, DType::F32, quantize_f32, dot_f32);
    add(DType::F16, DType::F16, quantize_f16, dot_f16);
    add(DType::BF16, DType::BF16, quantize_bf16, dot_bf16);
    add(DType::Q4_0, DType::Q8_0, quantize_q8_0, dot_q4_0);
    add(DType::Q4_1, DType::Q8_1, quantize_q8_1, dot_q4_1);
    add(DType::Q5_0, DType::Q8_0, quantize_q8_0, dot_q5_0);
    add(DType::Q5_1, DType::Q8_1, quantize_q8_1, dot_q5_1);
    add(DType::Q8_0, DType::Q8_0, quantize_q8_0, dot_q8_0);
    add(DType::Q2_K, DType::Q8_K, quantize_q8_k, dot_q2_k);
    add(DType::Q3_K, DType::Q8_K, quantize_q8_k, dot_q3_k);
    add(DType::Q4_K, DType::Q8_K, quantize_q8_k, dot_q4_k);
    add(DType::Q5_K, DType::Q8_K, quantize_q8_k, dot_q5_k);
    add(DType::Q6_K, DType::Q8_K, quantize_q8_k, dot_q6_k);
    add(DType::IQ4_NL, DType::Q8_0, quantize_q8_0, dot_iq4_nl);
    add(DType::IQ4_XS, DType::Q8_K, quantize_q8_k, dot_iq4_xs);
  }
  constexpr void add(DType w, DType act, void (*q)(const float*, void*, int64_t), DotFn dot) {
    t[static_cast<uint32_t>(w)] = DotTraits{act, q, dot};
  }
};

constexpr Table kTable;

const DotTraits& checked(DType w, const char* what) {
  const auto id = static_cast<uint32_t>(w);
  if (id >= kDTypeIdCount || kTable.t[id].dot == nullptr) {
    const DTypeInfo* info = dtype_info(id);
    fail("%s: no dot product for weight type %u (%s)", what, id, info ? std::string(info->name).c_str() : "unknown");
  }
  return kTable.t[id];
}

void check_count(DType w, int64_t n, const char* what) {
  const uint32_t be = dtype_info(w).block_elems;
  if (n < 0 || n % be != 0) {
    fail("%s: %lld elements of type %s is not a multiple of the block size %u", what, static_cast<long long>(n),
         std::string(dtype_name(w)).c_str(), be);
  }
}

}  // namespace

DType vec_dot_type(DType weight_type) { return checked(weight_type, "vec_dot_type").act; }

size_t act_row_bytes(DType weight_type, int64_t n) {
  const DotTraits& tr = checked(weight_type, "act_row_bytes");
  check_count(weight_type, n, "act_row_bytes");
  return static_cast<size_t>(dtype_row_bytes(tr.act, static_cast<uint64_t>(n)));
}

void quantize_act_row(DType weight_type, const float* x, void* out, int64_t n) {
  const DotTraits& tr = checked(weight_type, "quantize_act_row");
  check_count(weight_type, n, "quantize_act_row");
  tr.quantize(x, out, n);
}

float dot_ref(DType weight_type, const void* w_row, const void* act_row, int64_t n) {
  const DotTraits& tr = checked(weight_type, "dot_ref");
  check_count(weight_type, n, "dot_ref");
  return tr.dot(w_row, act_row, n);
}

}  // namespace sluice::kernels
