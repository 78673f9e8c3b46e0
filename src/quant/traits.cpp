// The one traits table: which reference (de)quantizer serves each supported type, plus the
// checked wrappers declared in quant.h.
#include "base/error.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/ref_rows.h"

namespace sluice::quant {

namespace {

// Index = ggml type id. Entries whose to_f32_ref is null are types sluice does not read;
// the set with a decoder must equal dtype_info(...).supported (checked by the unit tests).
struct Table {
  QuantTraits t[kDTypeIdCount] = {};
  constexpr Table() {
    add(DType::F32, ref::to_f32_f32, ref::from_f32_f32);
    add(DType::F16, ref::to_f32_f16, ref::from_f32_f16);
    add(DType::BF16, ref::to_f32_bf16, ref::from_f32_bf16);
    add(DType::Q4_0, ref::to_f32_q4_0, ref::from_f32_q4_0);
    add(DType::Q4_1, ref::to_f32_q4_1, ref::from_f32_q4_1);
    add(DType::Q5_0, ref::to_f32_q5_0, ref::from_f32_q5_0);
    add(DType::Q5_1, ref::to_f32_q5_1, ref::from_f32_q5_1);
    add(DType::Q8_0, ref::to_f32_q8_0, ref::from_f32_q8_0);
    add(DType::Q2_K, ref::to_f32_q2_k, nullptr);
    add(DType::Q3_K, ref::to_f32_q3_k, nullptr);
    add(DType::Q4_K, ref::to_f32_q4_k, nullptr);
    add(DType::Q5_K, ref::to_f32_q5_k, nullptr);
    add(DType::Q6_K, ref::to_f32_q6_k, ref::from_f32_q6_k);
    add(DType::IQ4_NL, ref::to_f32_iq4_nl, nullptr);
    add(DType::IQ4_XS, ref::to_f32_iq4_xs, nullptr);
    // Q8_K / Q8_1 are activation formats, never weights in a file: not in the table
    // (quantize_row_q8_k_ref below is the entry point for Q8_K).
  }
  constexpr void add(DType type, void (*to)(const void*, float*, int64_t), void (*from)(const float*, void*, int64_t)) {
    t[static_cast<uint32_t>(type)] = QuantTraits{type, to, from};
  }
};

constexpr Table kTable;

// Traits of t or a sluice::Error naming the type.
const QuantTraits& checked_traits(DType t, const char* what) {
  const QuantTraits* tr = traits(t);
  if (tr == nullptr) {
    const DTypeInfo* info = dtype_info(static_cast<uint32_t>(t));
    fail("%s: unsupported tensor type %u (%s)", what, static_cast<unsigned>(t),
         info ? std::string(info->name).c_str() : "unknown");
  }
  return *tr;
}

void check_count(DType t, int64_t n, const char* what) {
  const uint32_t be = dtype_info(t).block_elems;
  if (n < 0 || n % be != 0) {
    fail("%s: %lld elements of type %s is not a multiple of the block size %u", what, static_cast<long long>(n),
         std::string(dtype_name(t)).c_str(), be);
  }
}

}  // namespace

const QuantTraits* traits(DType t) {
  const auto id = static_cast<uint32_t>(t);
  if (id >= kDTypeIdCount || kTable.t[id].to_f32_ref == nullptr) return nullptr;
  return &kTable.t[id];
}

void dequantize_ref(DType t, const void* src, float* dst, int64_t n) {
  const QuantTraits& tr = checked_traits(t, "dequantize");
  check_count(t, n, "dequantize");
  tr.to_f32_ref(src, dst, n);
}

void quantize_ref(DType t, const float* src, void* dst, int64_t n) {
  const QuantTraits& tr = checked_traits(t, "quantize");
  if (tr.from_f32_ref == nullptr) {
    fail("quantize: no reference quantizer for type %s", std::string(dtype_name(t)).c_str());
  }
  check_count(t, n, "quantize");
  tr.from_f32_ref(src, dst, n);
}

bool can_quantize(DType t) {
  const QuantTraits* tr = traits(t);
  return tr != nullptr && tr->from_f32_ref != nullptr;
}

void quantize_row_q8_k_ref(const float* src, void* dst, int64_t n) {
  if (n < 0 || n % kQK_K != 0) {
    fail("quantize_row_q8_k_ref: %lld elements is not a multiple of %d", static_cast<long long>(n), kQK_K);
  }
  ref::from_f32_q8_k(src, dst, n);
}

void dequantize_row_q8_k_ref(const void* src, float* dst, int64_t n) {
  if (n < 0 || n % kQK_K != 0) {
    fail("dequantize_row_q8_k_ref: %lld elements is not a multiple of %d", static_cast<long long>(n), kQK_K);
  }
  ref::to_f32_q8_k(src, dst, n);
}

}  // namespace sluice::quant
