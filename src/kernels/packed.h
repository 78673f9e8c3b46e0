// Weight matrices repacked once at load into the layout the SIMD matmul wants ("x16").
//
// Rows are taken in groups of 16. Inside a group, every block (32 or 256 elements along K)
// stores first the 16 rows' scales side by side, then the codes in VNNI lane order: one
// 64-byte vector holds 4 consecutive codes of each of the 16 rows (byte 4·i + t = row i,
// element t), which is exactly the operand layout of VPDPBUSD (u8 × s8 → one int32 lane per
// row). So a block of 16 rows is summed with no horizontal reduction at all, and the f32
// scaling is one vector op per block for 16 rows. The bytes are the file's bytes rearranged:
// only Q4_K grows (its 6-bit scales are stored as bytes, +2.8%).
//
// Per group and block (i = row in group 0..15, t = 0..3, codes as unsigned bytes):
//   Q4_0 (288 B = 16·18):  d[16] f16 | 4 chunks c of 64 B: byte 4i+t = q(i,4c+t) | q(i,16+4c+t)<<4
//   Q5_0 (352 B = 16·22):  as Q4_0 (low 4 bits) | 8 u64 masks: mask j<4 has bit 4i+t = bit 4 of
//                          q(i,4j+t), mask 4+j of q(i,16+4j+t)
//   Q8_0 (544 B = 16·34):  d[16] f16 | 8 chunks c of 64 B: byte 4i+t = q(i,4c+t) + 128 (u8)
//   Q4_K (2368 B per 256): d[16] f16 | dmin[16] f16 | sc[8][16] u8 | m[8][16] u8 |
//                          8 sub-blocks of 32, each laid out as a Q4_0 block's codes (256 B)
//   Q6_K (3360 B = 16·210): d[16] f16 | sc[16][16] i8 | 16 sub-blocks g of 16 codes (q+32, 0..63):
//                          2 × 64 B low nibbles (byte 4i+t = lo(i,4c+t) | lo(i,8+4c+t)<<4, c = 0,1)
//                          then 64 B high bits (byte 4i+t = hi(i,t) | hi(i,4+t)<<2 | hi(i,8+t)<<4 | hi(i,12+t)<<6)
//   F32 / F16 / BF16:      per column k, the 16 rows' values (64 / 32 / 32 B)
//   Q6_K8 (4384 B per 256): Q6_K with its codes widened to bytes (an lm_head option, 1.3× the
//                          bytes, no unpacking): d[16] | sc[16][16] | 16 sub-blocks of 4 × 64 B,
//                          chunk c byte 4i+t = q(i, 4c+t) + 32
// Rows past the end of the matrix (last group) are zero codes with zero scales.
//
// Exactness: every kernel over these layouts computes, per output, the same integer block
// sums and the same f32 operations in the same order as dot_ref (dot_ref.h) on the original
// rows: results are bit-identical to it, on every ISA, for any batch size or thread split.
// Float types reduce along K with fused multiply-adds in two chains, even and odd columns,
// added at the end (gemm_ref.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/aligned_bytes.h"
#include "base/dtype.h"

namespace sluice::kernels {

inline constexpr int kGroupRows = 16;

enum class PackedFormat : uint8_t { kNone, kQ4_0, kQ5_0, kQ8_0, kQ4_K, kQ6_K, kF32, kF16, kBF16, kQ6_K8 };
inline constexpr int kPackedFormatCount = 10;

// The packed format of a weight type (kNone: no packed kernel; the generic path is used).
PackedFormat packed_format(DType t);
const char* packed_format_name(PackedFormat f);

// Elements along K per packed block, and bytes of one group's block.
int64_t packed_block_elems(PackedFormat f);
int64_t packed_block_bytes(PackedFormat f);

// The activation format a packed format's kernel reads (act.h).
enum class ActFormat : uint8_t { kF32, kA8_32, kA8_256 };
ActFormat packed_act_format(PackedFormat f);

using sluice::AlignedBytes;
using sluice::ByteArena;

// One repacked matrix: `rows` outputs of `cols` inputs in groups of 16.
struct PackedMatrix {
  PackedFormat format = PackedFormat::kNone;
  DType type = DType::F32;  // the file's type it came from
  int64_t rows = 0, cols = 0;
  int64_t groups = 0;        // ceil(rows / 16)
  uint64_t group_bytes = 0;  // bytes of one group (all its blocks), a multiple of 64
  uint64_t file_bytes = 0;   // bytes of the same rows in the file's layout
  AlignedBytes data;
  const uint8_t* group(int64_t g) const { return data.data() + static_cast<uint64_t>(g) * group_bytes; }
};

// Rows of file data to pack: `rows` rows of the packed matrix's type, row r at data + r·row_bytes.
struct PackSource {
  const uint8_t* data;
  uint64_t row_bytes;
  int64_t rows;
};

// pack_alloc sizes a zeroed matrix of `rows` rows of type t; pack_groups fills groups
// [first_group, last_group) from the sources stacked in order (their rows sum to m.rows), so a
// repack can be split over threads by groups.
// `format` kNone: packed_format(t); the only other choice is kQ6_K8 for Q6_K.
// With an arena the bytes are carved from it (and live as long as it does).
PackedMatrix pack_alloc(DType t, int64_t rows, int64_t cols, PackedFormat format = PackedFormat::kNone,
                        ByteArena* arena = nullptr);
void pack_groups(PackedMatrix& m, const PackSource* sources, int n_sources, int64_t first_group, int64_t last_group);
inline void pack_groups(PackedMatrix& m, const uint8_t* src, uint64_t src_row_bytes, int64_t first_group,
                        int64_t last_group) {
  const PackSource s{src, src_row_bytes, m.rows};
  pack_groups(m, &s, 1, first_group, last_group);
}

// Row r of the matrix in the file's layout, dtype_row_bytes(m.type, m.cols) bytes at `row`: the
// bytes it was packed from, exactly, for every format (Q6_K8 gives back Q6_K). r must be in
// [0, m.rows) (unchecked: a step's tokens are checked before its lookups). The tied embedding
// reads its rows this way from the packed lm_head, so the file's copy of the table can go.
void unpack_row(const PackedMatrix& m, int64_t r, uint8_t* row);

}  // namespace sluice::kernels
