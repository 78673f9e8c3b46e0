// An independent decoder written from quants.md's "element form" formulas (one element at a
// time, fields read at their documented byte offsets, no block structs), compared bit for bit
// with the library's loop decoders on thousands of random blocks per type.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "quant/quant.h"
#include "unit/quant/quant_test_util.h"

namespace sluice::quant {
namespace {

using testing::bits;

float f16_at(const uint8_t* p) { return f16_to_f32(static_cast<uint16_t>(p[0] | p[1] << 8)); }

// Q4_0-style nibble: element e < 16 in the low nibble of qs[e], else the high nibble of qs[e-16].
int nib(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }

// §7.1 table: 6-bit scale and min of sub-block s from the 12 packed bytes.
void unpack_k4(const uint8_t* b, int s, int* sc, int* m) {
  if (s < 4) {
    *sc = b[s] & 63;
    *m = b[s + 4] & 63;
  } else {
    *sc = (b[s + 4] & 15) | ((b[s - 4] >> 6) << 4);
    *m = (b[s + 4] >> 4) | ((b[s] >> 6) << 4);
  }
}

constexpr int kNL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

float elem_q4_0(const uint8_t* b, int e) { return static_cast<float>(nib(b + 2, e) - 8) * f16_at(b); }
float elem_q4_1(const uint8_t* b, int e) { return static_cast<float>(nib(b + 4, e)) * f16_at(b) + f16_at(b + 2); }

int q5(const uint8_t* qh, const uint8_t* qs, int e) {
  const uint32_t h = qh[0] | qh[1] << 8 | qh[2] << 16 | static_cast<uint32_t>(qh[3]) << 24;
  return nib(qs, e) | static_cast<int>(((h >> e) & 1) << 4);
}
float elem_q5_0(const uint8_t* b, int e) { return static_cast<float>(q5(b + 2, b + 6, e) - 16) * f16_at(b); }
float elem_q5_1(const uint8_t* b, int e) { return static_cast<float>(q5(b + 4, b + 8, e)) * f16_at(b) + f16_at(b + 2); }
float elem_q8_0(const uint8_t* b, int e) { return static_cast<float>(static_cast<int8_t>(b[2 + e])) * f16_at(b); }
float elem_iq4_nl(const uint8_t* b, int e) { return f16_at(b) * static_cast<float>(kNL[nib(b + 2, e)]); }

float elem_q4_k(const uint8_t* b, int e) {
  const int c = e / 64, r = e % 64, s = e / 32;
  const uint8_t byte = b[16 + 32 * c + r % 32];
  const int q = r < 32 ? byte & 15 : byte >> 4;
  int sc, m;
  unpack_k4(b + 4, s, &sc, &m);
  return (f16_at(b) * static_cast<float>(sc)) * static_cast<float>(q) - (f16_at(b + 2) * static_cast<float>(m));
}

float elem_q5_k(const uint8_t* b, int e) {
  const int c = e / 64, r = e % 64, s = e / 32;
  const uint8_t byte = b[48 + 32 * c + r % 32];
  const int q = (r < 32 ? byte & 15 : byte >> 4) + 16 * ((b[16 + r % 32] >> s) & 1);
  int sc, m;
  unpack_k4(b + 4, s, &sc, &m);
  return (f16_at(b) * static_cast<float>(sc)) * static_cast<float>(q) - (f16_at(b + 2) * static_cast<float>(m));
}

float elem_q6_k(const uint8_t* b, int e) {
  const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
  const uint8_t byte = b[64 * h + 32 * (k & 1) + l];  // ql @0
  const int lo = k < 2 ? byte & 15 : byte >> 4;
  const int hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;  // qh @128
  const int q = (lo | hi << 4) - 32;
  const auto sc = static_cast<int8_t>(b[192 + e / 16]);  // scales @192
  return (f16_at(b + 208) * static_cast<float>(sc)) * static_cast<float>(q);
}

float elem_q2_k(const uint8_t* b, int e) {
  const int c = e / 128, r = e % 128, j = r / 32, t = r % 32;
  const int q = (b[16 + 32 * c + t] >> (2 * j)) & 3;
  const uint8_t sb = b[e / 16];
  return (f16_at(b + 80) * static_cast<float>(sb & 15)) * static_cast<float>(q) -
         (f16_at(b + 82) * static_cast<float>(sb >> 4));
}

float elem_q3_k(const uint8_t* b, int e) {
  const uint8_t* s = b + 96;
  int S[16];
  for (int i = 0; i < 4; ++i) {
    S[i] = (s[i] & 15) | ((s[8 + i] & 3) << 4);
    S[4 + i] = (s[4 + i] & 15) | (((s[8 + i] >> 2) & 3) << 4);
    S[8 + i] = (s[i] >> 4) | (((s[8 + i] >> 4) & 3) << 4);
    S[12 + i] = (s[4 + i] >> 4) | (((s[8 + i] >> 6) & 3) << 4);
  }
  const int c = e / 128, r = e % 128, j = r / 32, t = r % 32;
  const int lo = (b[32 + 32 * c + t] >> (2 * j)) & 3;
  const int hb = (b[t] >> (4 * c + j)) & 1;
  const int q = lo - (hb ? 0 : 4);
  return (f16_at(b + 108) * static_cast<float>(S[e / 16] - 32)) * static_cast<float>(q);
}

float elem_iq4_xs(const uint8_t* b, int e) {
  const int ib = e / 32, r = e % 32;
  const int scales_h = b[2] | b[3] << 8;
  const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4);
  const float dl = f16_at(b) * static_cast<float>(ls - 32);
  const uint8_t byte = b[8 + 16 * ib + r % 16];
  return dl * static_cast<float>(kNL[r < 16 ? byte & 15 : byte >> 4]);
}

float elem_q8_k(const uint8_t* b, int e) {
  float d;
  std::memcpy(&d, b, 4);
  return d * static_cast<float>(static_cast<int8_t>(b[4 + e]));
}

float elem_f32(const uint8_t* b, int) {
  float f;
  std::memcpy(&f, b, 4);
  return f;
}
float elem_f16(const uint8_t* b, int) { return f16_at(b); }
float elem_bf16(const uint8_t* b, int) { return bf16_to_f32(static_cast<uint16_t>(b[0] | b[1] << 8)); }

using ElemFn = float (*)(const uint8_t*, int);

ElemFn elem_fn(DType t) {
  switch (t) {
    case DType::F32: return elem_f32;
    case DType::F16: return elem_f16;
    case DType::BF16: return elem_bf16;
    case DType::Q4_0: return elem_q4_0;
    case DType::Q4_1: return elem_q4_1;
    case DType::Q5_0: return elem_q5_0;
    case DType::Q5_1: return elem_q5_1;
    case DType::Q8_0: return elem_q8_0;
    case DType::Q2_K: return elem_q2_k;
    case DType::Q3_K: return elem_q3_k;
    case DType::Q4_K: return elem_q4_k;
    case DType::Q5_K: return elem_q5_k;
    case DType::Q6_K: return elem_q6_k;
    case DType::IQ4_NL: return elem_iq4_nl;
    case DType::IQ4_XS: return elem_iq4_xs;
    case DType::Q8_K: return elem_q8_k;
    default: return nullptr;
  }
}

// Decodes `blocks` random blocks both ways; returns the number of bitwise mismatches and
// reports the first few.
int64_t compare_decoders(DType t, int64_t blocks, uint64_t seed) {
  const DTypeInfo& info = dtype_info(t);
  const std::vector<uint8_t> data = testing::make_random_blocks(t, blocks, seed);
  const int64_t n = blocks * info.block_elems;
  std::vector<float> y(static_cast<size_t>(n));
  if (t == DType::Q8_K) {
    dequantize_row_q8_k_ref(data.data(), y.data(), n);
  } else {
    dequantize_ref(t, data.data(), y.data(), n);
  }
  const ElemFn fn = elem_fn(t);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t blk = i / info.block_elems;
    const int e = static_cast<int>(i % info.block_elems);
    const float want = fn(data.data() + blk * info.block_bytes, e);
    if (bits(want) != bits(y[i]) && ++bad <= 5) {
      ADD_FAILURE() << dtype_name(t) << " block " << blk << " element " << e << ": loop " << y[i] << " element-form "
                    << want;
    }
  }
  return bad;
}

class ElementDecoder : public ::testing::TestWithParam<DType> {};

TEST_P(ElementDecoder, MatchesLoopDecoderBitForBit) {
  const DType t = GetParam();
  // 4096 blocks of 32 or 256 elements; scalar types get 64K elements.
  const int64_t blocks = dtype_info(t).block_elems == 1 ? 65536 : 4096;
  EXPECT_EQ(compare_decoders(t, blocks, 0x5eed0000u + static_cast<uint32_t>(t)), 0);
}

std::vector<DType> decoder_types() {
  std::vector<DType> v = testing::supported_types();
  v.push_back(DType::Q8_K);
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ElementDecoder, ::testing::ValuesIn(decoder_types()),
                         [](const ::testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace sluice::quant
