#include "kv/kv_cache.h"

#include <cstring>

#include "base/error.h"
#include "base/fp16.h"

namespace sluice {

KvType parse_kv_type(const std::string& s) {
  if (s == "f32") return KvType::F32;
  if (s == "f16") return KvType::F16;
  if (s == "bf16") return KvType::BF16;
  fail("unknown KV type '%s' (expected f32, f16 or bf16)", s.c_str());
}

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
  }
  return "?";
}

size_t kv_type_size(KvType t) { return t == KvType::F32 ? 4 : 2; }

KvCache::KvCache(std::vector<KvGroupSpec> groups, int32_t block_tokens, std::vector<int32_t> blocks, KvType type)
    : groups_(std::move(groups)), block_tokens_(block_tokens), type_(type) {
  if (blocks.size() != groups_.size()) fail("KV cache: %zu block counts for %zu groups", blocks.size(), groups_.size());
  if (block_tokens <= 0) fail("KV cache: block size must be positive");
  for (size_t g = 0; g < groups_.size(); ++g) {
    pools_.emplace_back(blocks[g]);
    const uint64_t n = static_cast<uint64_t>(blocks[g]) * groups_[g].n_layers * 2 * block_tokens_ *
                       groups_[g].row_elems() * kv_type_size(type_);
    storage_.push_back(AlignedBytes::alloc(n));  // zeroed: never read uninitialized memory
  }
}

uint64_t KvCache::bytes() const {
  uint64_t s = 0;
  for (size_t g = 0; g < groups_.size(); ++g)
    s += static_cast<uint64_t>(pools_[g].n_total()) * groups_[g].n_layers * 2 * block_tokens_ * groups_[g].row_elems() *
         kv_type_size(type_);
  return s;
}

uint8_t* KvCache::row_ptr(int32_t g, int32_t layer, BlockId b, int32_t kv, int32_t slot) const {
  const KvGroupSpec& gs = groups_[g];
  const uint64_t row_bytes = gs.row_elems() * kv_type_size(type_);
  const uint64_t idx = ((static_cast<uint64_t>(b) * gs.n_layers + layer) * 2 + kv) * block_tokens_ + slot;
  return storage_[g].data() + idx * row_bytes;
}

KvCache::Layout KvCache::layout(int32_t g) {
  const KvGroupSpec& gs = groups_[g];
  const uint64_t row = gs.row_elems() * kv_type_size(type_);
  const uint64_t kv = row * static_cast<uint64_t>(block_tokens_);
  return Layout{storage_[g].data(), kv * 2 * static_cast<uint64_t>(gs.n_layers), kv * 2, kv, row};
}

static void put_row(KvType t, uint8_t* dst, const float* src, int64_t n) {
  switch (t) {
    case KvType::F32: std::memcpy(dst, src, n * sizeof(float)); break;
    case KvType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case KvType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
  }
}

static void get_row(KvType t, const uint8_t* src, float* dst, int64_t n) {
  switch (t) {
    case KvType::F32: std::memcpy(dst, src, n * sizeof(float)); break;
    case KvType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      break;
    case KvType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      break;
  }
}

void KvCache::store(int32_t g, int32_t layer, BlockId b, int32_t slot, const float* k, const float* v) {
  const int64_t n = groups_[g].row_elems();
  put_row(type_, row_ptr(g, layer, b, 0, slot), k, n);
  put_row(type_, row_ptr(g, layer, b, 1, slot), v, n);
}

void KvCache::load_k(int32_t g, int32_t layer, BlockId b, int32_t slot, float* out) const {
  get_row(type_, row_ptr(g, layer, b, 0, slot), out, groups_[g].row_elems());
}

void KvCache::load_v(int32_t g, int32_t layer, BlockId b, int32_t slot, float* out) const {
  get_row(type_, row_ptr(g, layer, b, 1, slot), out, groups_[g].row_elems());
}

}  // namespace sluice
