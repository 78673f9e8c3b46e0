// Paged KV storage. KV-owning layers are partitioned into layer groups (e.g. Gemma's
// sliding and global layers); each group has its own block pool and storage, and a sequence
// has one block table per group. A block holds `block_tokens` positions for every layer of
// its group:  storage[block][layer_in_group][K|V][slot][n_kv_heads · head_dim].
// Layers that own no KV (Gemma 4's shared layers) read the blocks of their source layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/aligned_bytes.h"
#include "kv/block_pool.h"

namespace sluice {

enum class KvType { F32, F16, BF16 };
KvType parse_kv_type(const std::string& s);  // "f32" | "f16" | "bf16"; throws otherwise
const char* kv_type_name(KvType t);
size_t kv_type_size(KvType t);

struct KvGroupSpec {
  int32_t n_layers = 0;  // KV-owning layers in this group
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t window = 0;  // 0: full attention; else keys j visible from query p iff p - j < window
  int64_t row_elems() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
};

class KvCache {
 public:
  // blocks[g]: number of blocks of group g.
  KvCache(std::vector<KvGroupSpec> groups, int32_t block_tokens, std::vector<int32_t> blocks, KvType type);

  int32_t n_groups() const { return static_cast<int32_t>(groups_.size()); }
  const KvGroupSpec& group(int32_t g) const { return groups_[g]; }
  int32_t block_tokens() const { return block_tokens_; }
  KvType type() const { return type_; }
  BlockPool& pool(int32_t g) { return pools_[g]; }
  const BlockPool& pool(int32_t g) const { return pools_[g]; }
  uint64_t bytes() const;

  // The raw layout of group g, for kernels that read rows in place: the K (kv = 0) or V (1)
  // row of layer `layer`, block b, slot s is at
  //   base + b·block_stride + layer·layer_stride + kv·kv_stride + s·slot_stride.
  // Kernels may write rows in place through it (element type: type()).
  struct Layout {
    uint8_t* base;
    uint64_t block_stride, layer_stride, kv_stride, slot_stride;
    uint8_t* row(int32_t layer, BlockId b, int32_t kv, int32_t slot) const {
      return base + static_cast<uint64_t>(b) * block_stride + static_cast<uint64_t>(layer) * layer_stride +
             static_cast<uint64_t>(kv) * kv_stride + static_cast<uint64_t>(slot) * slot_stride;
    }
  };
  Layout layout(int32_t g);

  // Writes one position's K and V rows (f32 in, converted to the cache type).
  void store(int32_t g, int32_t layer, BlockId b, int32_t slot, const float* k, const float* v);
  // Reads one position's K or V row as f32.
  void load_k(int32_t g, int32_t layer, BlockId b, int32_t slot, float* out) const;
  void load_v(int32_t g, int32_t layer, BlockId b, int32_t slot, float* out) const;

 private:
  uint8_t* row_ptr(int32_t g, int32_t layer, BlockId b, int32_t kv, int32_t slot) const;

  std::vector<KvGroupSpec> groups_;
  int32_t block_tokens_;
  KvType type_;
  std::vector<BlockPool> pools_;
  std::vector<AlignedBytes> storage_;
};

}  // namespace sluice
