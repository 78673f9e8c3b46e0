// Tensor element types, numbered as ggml numbers them in GGUF files (gguf.md §8).
// This table is the one place that knows every id; quant/ adds the decoders for the
// types we support.
#pragma once

#include <cstdint>
#include <string_view>

namespace sluice {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

inline constexpr uint32_t kDTypeIdCount = 43;  // ggml's GGML_TYPE_COUNT in the spec's snapshot

struct DTypeInfo {
  std::string_view name;  // ggml's name, e.g. "q4_0"; empty for removed ids
  uint32_t block_elems;   // elements per block (1 for scalar types); 0 for removed ids
  uint32_t block_bytes;   // bytes per block
  bool supported;         // sluice can decode tensors of this type
};

// Info for a ggml type id; nullptr when the id is unknown or was removed from ggml.
const DTypeInfo* dtype_info(uint32_t id);
inline const DTypeInfo& dtype_info(DType t) { return *dtype_info(static_cast<uint32_t>(t)); }
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }

// Bytes of one row of `n` elements; `n` must be a multiple of the block size.
inline uint64_t dtype_row_bytes(DType t, uint64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return n / i.block_elems * i.block_bytes;
}

}  // namespace sluice
