// Load-time repacking into the x16 layouts of packed.h, and its inverse for one row (the tied
// embedding's lookups). Portable scalar code: the repacking runs once per weight at load, split
// over the thread pool by groups.
#include "kernels/packed.h"

#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "quant/blocks.h"

namespace sluice::kernels {

using namespace sluice::quant;

PackedFormat packed_format(DType t) {
  switch (t) {
    case DType::Q4_0: return PackedFormat::kQ4_0;
    case DType::Q5_0: return PackedFormat::kQ5_0;
    case DType::Q8_0: return PackedFormat::kQ8_0;
    case DType::Q4_K: return PackedFormat::kQ4_K;
    case DType::Q6_K: return PackedFormat::kQ6_K;
    case DType::F32: return PackedFormat::kF32;
    case DType::F16: return PackedFormat::kF16;
    case DType::BF16: return PackedFormat::kBF16;
    default: return PackedFormat::kNone;
  }
}

const char* packed_format_name(PackedFormat f) {
  static const char* const kNames[kPackedFormatCount] = {"none",    "q4_0x16", "q5_0x16", "q8_0x16", "q4_Kx16",
                                                         "q6_Kx16", "f32x16",  "f16x16",  "bf16x16", "q6_K8x16"};
  return kNames[static_cast<int>(f)];
}

int64_t packed_block_elems(PackedFormat f) {
  switch (f) {
    case PackedFormat::kQ4_0:
    case PackedFormat::kQ5_0:
    case PackedFormat::kQ8_0: return 32;
    case PackedFormat::kQ4_K:
    case PackedFormat::kQ6_K:
    case PackedFormat::kQ6_K8: return 256;
    case PackedFormat::kF32:
    case PackedFormat::kF16:
    case PackedFormat::kBF16: return 1;
    case PackedFormat::kNone: break;
  }
  return 0;
}

int64_t packed_block_bytes(PackedFormat f) {
  switch (f) {
    case PackedFormat::kQ4_0: return 288;
    case PackedFormat::kQ5_0: return 352;
    case PackedFormat::kQ8_0: return 544;
    case PackedFormat::kQ4_K: return 2368;
    case PackedFormat::kQ6_K: return 3360;
    case PackedFormat::kQ6_K8: return 4384;
    case PackedFormat::kF32: return 64;
    case PackedFormat::kF16:
    case PackedFormat::kBF16: return 32;
    case PackedFormat::kNone: break;
  }
  return 0;
}

ActFormat packed_act_format(PackedFormat f) {
  switch (f) {
    case PackedFormat::kQ4_0:
    case PackedFormat::kQ5_0:
    case PackedFormat::kQ8_0: return ActFormat::kA8_32;
    case PackedFormat::kQ4_K:
    case PackedFormat::kQ6_K:
    case PackedFormat::kQ6_K8: return ActFormat::kA8_256;
    default: return ActFormat::kF32;
  }
}

PackedMatrix pack_alloc(DType t, int64_t rows, int64_t cols, PackedFormat format, ByteArena* arena) {
  PackedMatrix m;
  m.format = packed_format(t);
  if (m.format == PackedFormat::kNone) fail("no packed layout for type %s", std::string(dtype_name(t)).c_str());
  if (format != PackedFormat::kNone && format != m.format) {
    if (!(t == DType::Q6_K && format == PackedFormat::kQ6_K8))
      fail("type %s cannot be packed as %s", std::string(dtype_name(t)).c_str(), packed_format_name(format));
    m.format = format;
  }
  const int64_t be = packed_block_elems(m.format);
  if (cols <= 0 || rows <= 0 || cols % be != 0)
    fail("cannot pack a [%lld, %lld] %s matrix (columns must be a positive multiple of %lld)",
         static_cast<long long>(cols), static_cast<long long>(rows), std::string(dtype_name(t)).c_str(),
         static_cast<long long>(be));
  m.type = t;
  m.rows = rows;
  m.cols = cols;
  m.groups = (rows + kGroupRows - 1) / kGroupRows;
  m.group_bytes = static_cast<uint64_t>(cols / be * packed_block_bytes(m.format));
  m.group_bytes = (m.group_bytes + 63) / 64 * 64;
  m.file_bytes = dtype_row_bytes(t, static_cast<uint64_t>(cols)) * static_cast<uint64_t>(rows);
  const uint64_t bytes = m.group_bytes * static_cast<uint64_t>(m.groups);
  m.data = arena ? AlignedBytes::borrowed(arena->take(bytes), bytes) : AlignedBytes::alloc(bytes);
  return m;
}

namespace {

inline int nib32(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }

// Codes of one 32-element block (0..15) into the Q4_0x16 chunk layout of row i.
void put_nibbles32(uint8_t* chunks, int i, const uint8_t code[32]) {
  for (int c = 0; c < 4; ++c)
    for (int t = 0; t < 4; ++t)
      chunks[64 * c + 4 * i + t] = static_cast<uint8_t>(code[4 * c + t] | (code[16 + 4 * c + t] << 4));
}

// The unsigned codes (q + 32, 0..63) of a Q6_K super-block in element order, as dot_ref reads them.
void q6_k_codes(const BlockQ6_K& x, uint8_t q[kQK_K]) {
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t b = x.ql[64 * h + 32 * (k & 1) + l];
    const int lo = k < 2 ? b & 15 : b >> 4;
    const int hi = (x.qh[32 * h + l] >> (2 * k)) & 3;
    q[e] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// q6_k_codes with the loops in the file's byte order (same result, no divisions).
void q6_k_codes_fast(const BlockQ6_K& x, uint8_t q[kQK_K]) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = x.ql[64 * h + l], c = x.ql[64 * h + 32 + l], hb = x.qh[32 * h + l];
      uint8_t* o = q + 128 * h + l;
      o[0] = static_cast<uint8_t>((a & 15) | ((hb & 3) << 4));
      o[32] = static_cast<uint8_t>((c & 15) | (((hb >> 2) & 3) << 4));
      o[64] = static_cast<uint8_t>((a >> 4) | (((hb >> 4) & 3) << 4));
      o[96] = static_cast<uint8_t>((c >> 4) | (((hb >> 6) & 3) << 4));
    }
}

void pack_row_block(PackedFormat f, uint8_t* dst, int i, const uint8_t* row, int64_t b) {
  switch (f) {
    case PackedFormat::kQ4_0: {
      // The file's qs[j] = q[j] | q[j+16] << 4 is exactly the x16 byte of chunk j/4, t = j%4:
      // each row's 16 bytes move as 4 dwords.
      const uint8_t* blk = row + 18 * b;
      std::memcpy(dst + 2 * i, blk, 2);
      for (int c = 0; c < 4; ++c) std::memcpy(dst + 32 + 64 * c + 4 * i, blk + 2 + 4 * c, 4);
      break;
    }
    case PackedFormat::kQ5_0: {
      const auto x = load_block<BlockQ5_0>(row, b);
      store_u16(dst + 2 * i, x.d);
      const uint32_t qh = load_u32(x.qh);
      for (int c = 0; c < 4; ++c) std::memcpy(dst + 32 + 64 * c + 4 * i, x.qs + 4 * c, 4);  // as Q4_0
      uint8_t* masks = dst + 32 + 256;
      for (int j = 0; j < 8; ++j) {
        uint64_t mask;
        std::memcpy(&mask, masks + 8 * j, 8);
        const int e0 = j < 4 ? 4 * j : 16 + 4 * (j - 4);
        for (int t = 0; t < 4; ++t)
          if ((qh >> (e0 + t)) & 1) mask |= uint64_t{1} << (4 * i + t);
        std::memcpy(masks + 8 * j, &mask, 8);
      }
      break;
    }
    case PackedFormat::kQ8_0: {
      const uint8_t* blk = row + 34 * b;
      std::memcpy(dst + 2 * i, blk, 2);
      for (int c = 0; c < 8; ++c) {
        uint32_t v;
        std::memcpy(&v, blk + 2 + 4 * c, 4);
        v ^= 0x80808080u;  // q + 128 as u8, per byte
        std::memcpy(dst + 32 + 64 * c + 4 * i, &v, 4);
      }
      break;
    }
    case PackedFormat::kQ4_K: {
      const auto x = load_block<BlockQ4_K>(row, b);
      store_u16(dst + 2 * i, x.d);
      store_u16(dst + 32 + 2 * i, x.dmin);
      for (int s = 0; s < 8; ++s) {
        uint8_t sc, mn;
        get_scale_min_k4(s, x.scales, &sc, &mn);
        dst[64 + 16 * s + i] = sc;
        dst[192 + 16 * s + i] = mn;
        uint8_t code[32];
        for (int e = 0; e < 32; ++e) {
          const int el = 32 * s + e;
          const uint8_t byte = x.qs[32 * (el / 64) + el % 32];
          code[e] = static_cast<uint8_t>((el % 64) < 32 ? byte & 15 : byte >> 4);
        }
        put_nibbles32(dst + 320 + 256 * s, i, code);
      }
      break;
    }
    case PackedFormat::kQ6_K: {
      const auto x = load_block<BlockQ6_K>(row, b);
      store_u16(dst + 2 * i, x.d);
      uint8_t q[kQK_K];
      q6_k_codes_fast(x, q);
      for (int g = 0; g < 16; ++g) {
        dst[32 + 16 * g + i] = static_cast<uint8_t>(x.scales[g]);
        const uint8_t* c = q + 16 * g;
        uint8_t* sub = dst + 288 + 192 * g;
        for (int t = 0; t < 4; ++t) {
          for (int ch = 0; ch < 2; ++ch)
            sub[64 * ch + 4 * i + t] = static_cast<uint8_t>((c[4 * ch + t] & 15) | ((c[8 + 4 * ch + t] & 15) << 4));
          sub[128 + 4 * i + t] = static_cast<uint8_t>((c[t] >> 4) | ((c[4 + t] >> 4) << 2) | ((c[8 + t] >> 4) << 4) |
                                                      ((c[12 + t] >> 4) << 6));
        }
      }
      break;
    }
    case PackedFormat::kQ6_K8: {
      const auto x = load_block<BlockQ6_K>(row, b);
      store_u16(dst + 2 * i, x.d);
      uint8_t q[kQK_K];
      q6_k_codes(x, q);
      for (int g = 0; g < 16; ++g) {
        dst[32 + 16 * g + i] = static_cast<uint8_t>(x.scales[g]);
        for (int c = 0; c < 4; ++c)
          for (int t = 0; t < 4; ++t) dst[288 + 256 * g + 64 * c + 4 * i + t] = q[16 * g + 4 * c + t];
      }
      break;
    }
    case PackedFormat::kF32: std::memcpy(dst + 4 * i, row + 4 * b, 4); break;
    case PackedFormat::kF16:
    case PackedFormat::kBF16: std::memcpy(dst + 2 * i, row + 2 * b, 2); break;
    case PackedFormat::kNone: break;
  }
}

// The inverse of pack_row_block: row i's block b of the file layout, from the group's block at src.
void unpack_row_block(PackedFormat f, const uint8_t* src, int i, uint8_t* row, int64_t b) {
  switch (f) {
    case PackedFormat::kQ4_0: {
      uint8_t* blk = row + 18 * b;
      std::memcpy(blk, src + 2 * i, 2);
      for (int c = 0; c < 4; ++c) std::memcpy(blk + 2 + 4 * c, src + 32 + 64 * c + 4 * i, 4);
      break;
    }
    case PackedFormat::kQ5_0: {
      BlockQ5_0 x{};
      x.d = load_u16(src + 2 * i);
      for (int c = 0; c < 4; ++c) std::memcpy(x.qs + 4 * c, src + 32 + 64 * c + 4 * i, 4);
      uint32_t qh = 0;
      for (int j = 0; j < 8; ++j) {
        uint64_t mask;
        std::memcpy(&mask, src + 32 + 256 + 8 * j, 8);
        const int e0 = j < 4 ? 4 * j : 16 + 4 * (j - 4);
        for (int t = 0; t < 4; ++t)
          if ((mask >> (4 * i + t)) & 1) qh |= uint32_t{1} << (e0 + t);
      }
      store_u32(x.qh, qh);
      store_block(row, b, x);
      break;
    }
    case PackedFormat::kQ8_0: {
      uint8_t* blk = row + 34 * b;
      std::memcpy(blk, src + 2 * i, 2);
      for (int c = 0; c < 8; ++c) store_u32(blk + 2 + 4 * c, load_u32(src + 32 + 64 * c + 4 * i) ^ 0x80808080u);
      break;
    }
    case PackedFormat::kQ4_K: {
      BlockQ4_K x{};
      x.d = load_u16(src + 2 * i);
      x.dmin = load_u16(src + 32 + 2 * i);
      uint8_t sc[8], mn[8];
      for (int s = 0; s < 8; ++s) {
        sc[s] = src[64 + 16 * s + i];
        mn[s] = src[192 + 16 * s + i];
        // sub-block s's 32 codes: chunk c byte 4i+t holds codes 4c+t (low) and 16+4c+t (high);
        // in the file, code e of sub-block s is a nibble of qs[32·(s/2) + e], high for odd s.
        const uint8_t* chunks = src + 320 + 256 * s;
        for (int c = 0; c < 4; ++c)
          for (int t = 0; t < 4; ++t) {
            const uint8_t byte = chunks[64 * c + 4 * i + t];
            const int shift = (s & 1) * 4;
            x.qs[32 * (s / 2) + 4 * c + t] |= static_cast<uint8_t>((byte & 15) << shift);
            x.qs[32 * (s / 2) + 16 + 4 * c + t] |= static_cast<uint8_t>((byte >> 4) << shift);
          }
      }
      pack_scale_min_k4(sc, mn, x.scales);
      store_block(row, b, x);
      break;
    }
    case PackedFormat::kQ6_K:
    case PackedFormat::kQ6_K8: {
      BlockQ6_K x{};
      x.d = load_u16(src + 2 * i);
      uint8_t q[kQK_K];
      for (int g = 0; g < 16; ++g) {
        x.scales[g] = static_cast<int8_t>(src[32 + 16 * g + i]);
        uint8_t* c = q + 16 * g;
        if (f == PackedFormat::kQ6_K8) {
          for (int e = 0; e < 16; ++e) c[e] = src[288 + 256 * g + 64 * (e / 4) + 4 * i + e % 4];
          continue;
        }
        const uint8_t* sub = src + 288 + 192 * g;
        for (int t = 0; t < 4; ++t) {
          for (int ch = 0; ch < 2; ++ch) {
            const uint8_t lo = sub[64 * ch + 4 * i + t];
            c[4 * ch + t] = lo & 15;
            c[8 + 4 * ch + t] = lo >> 4;
          }
          const uint8_t hi = sub[128 + 4 * i + t];
          for (int k = 0; k < 4; ++k) c[4 * k + t] |= static_cast<uint8_t>(((hi >> (2 * k)) & 3) << 4);
        }
      }
      // q6_k_codes inverted: code e's low nibble in ql, its top 2 bits in qh.
      for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        x.ql[64 * h + 32 * (k & 1) + l] |= static_cast<uint8_t>((q[e] & 15) << (k < 2 ? 0 : 4));
        x.qh[32 * h + l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * k));
      }
      store_block(row, b, x);
      break;
    }
    case PackedFormat::kF32: std::memcpy(row + 4 * b, src + 4 * i, 4); break;
    case PackedFormat::kF16:
    case PackedFormat::kBF16: std::memcpy(row + 2 * b, src + 2 * i, 2); break;
    case PackedFormat::kNone: break;
  }
}

}  // namespace

void pack_groups(PackedMatrix& m, const PackSource* sources, int n_sources, int64_t first_group, int64_t last_group) {
  const int64_t be = packed_block_elems(m.format), bb = packed_block_bytes(m.format), nb = m.cols / be;
  for (int64_t g = first_group; g < last_group; ++g) {
    uint8_t* dst = m.data.data() + static_cast<uint64_t>(g) * m.group_bytes;
    for (int i = 0; i < kGroupRows; ++i) {
      int64_t r = g * kGroupRows + i;
      if (r >= m.rows) break;  // padding rows stay zero: zero scales, zero codes
      int s = 0;
      while (s < n_sources && r >= sources[s].rows) r -= sources[s++].rows;
      if (s == n_sources) fail("pack_groups: sources hold fewer rows than the matrix");
      const uint8_t* row = sources[s].data + static_cast<uint64_t>(r) * sources[s].row_bytes;
      for (int64_t b = 0; b < nb; ++b) pack_row_block(m.format, dst + b * bb, i, row, b);
    }
  }
}

void unpack_row(const PackedMatrix& m, int64_t r, uint8_t* row) {
  const int64_t be = packed_block_elems(m.format), bb = packed_block_bytes(m.format), nb = m.cols / be;
  const uint8_t* group = m.group(r / kGroupRows);
  const int i = static_cast<int>(r % kGroupRows);
  for (int64_t b = 0; b < nb; ++b) unpack_row_block(m.format, group + b * bb, i, row, b);
}

}  // namespace sluice::kernels
