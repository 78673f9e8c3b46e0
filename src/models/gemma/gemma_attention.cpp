// The attention step of a Gemma layer (gemma4.md §2.2, gemma3.md §2): input norm, the fused
// q|k|v matmul, q/k-norm + RoPE (+ V-norm), the K/V rows into the paged cache, paged GQA
// attention (kernels/paged_attention.h), the output projection and the post-attention norm.
#include <cstring>

#include "models/gemma/gemma_forward.h"

namespace sluice::models {

void GemmaModel::attention(int il, const ForwardBatch& b, KvCache& kv) {
  const GemmaLayerWeights& lw = w_.layers[il];
  const LayerOps& lo = layer_ops_[il];
  const int64_t d = spec_.n_embd;

  grow(xn_, static_cast<size_t>(T_ * d));
  if (il == 0 || il == tail_start_) {
    // Other layers get their input norm from the previous layer's last residual op.
    for_rows(pool_, T_, d * kCostCopy,
             [&](int64_t t) { ops_.rms_norm(&x_[t * d], lw.attn_norm.data(), &xn_[t * d], d, spec_.eps); });
  }
  grow(qkv_, static_cast<size_t>(T_ * lo.qkv.rows()));
  matmul(lo.qkv, xn_.data(), T_, qkv_.data(), OpClass::kAttnQkv);
  qk_norm_rope_store(il, b, kv);
  prof_.mark(OpClass::kOther);
  paged_attention(il, b, kv);
  prof_.mark(OpClass::kAttention);

  grow(att_, static_cast<size_t>(T_ * d));
  matmul(lo.o, o_.data(), T_, att_.data(), OpClass::kAttnOutput);
  tap("attn_out", il, att_.data(), T_, d);
  // x += RMSNorm(att; post_attn_norm); xn = RMSNorm(x; ffn_norm)   (one pass per row)
  for_rows(pool_, T_, d * 2 * kCostCopy, [&](int64_t t) {
    ops_.add_rms_norm(&x_[t * d], &att_[t * d], lw.post_attn_norm.data(), d, spec_.eps);
    ops_.rms_norm(&x_[t * d], lw.ffn_norm.data(), &xn_[t * d], d, spec_.eps);
  });
  prof_.mark(OpClass::kOther);
}

// Per token: q-norm + RoPE on every query head; for KV-owning layers k-norm + RoPE, V-norm,
// and the K/V rows stored in the cache.
void GemmaModel::qk_norm_rope_store(int il, const ForwardBatch& b, KvCache& kv) {
  const LayerSpec& ls = spec_.layers[il];
  const GemmaLayerWeights& lw = w_.layers[il];
  const int64_t hd = ls.head_dim, H = ls.n_head, Hkv = ls.n_head_kv;
  const int64_t qw = H * hd, kvw = Hkv * hd, stride = layer_ops_[il].qkv.rows();
  const int32_t bt = kv.block_tokens();
  const int64_t rope_off = ropes_[layer_rope_[il]].offset;
  const int64_t heads = ls.has_kv ? H + Hkv : H;
  // K=V layers: V is the raw K projection, taken before k-norm and RoPE into v_.
  if (ls.k_eq_v) grow(v_, static_cast<size_t>(T_ * kvw));
  for_rows(pool_, T_, heads * hd * kCostNormRope, [&](int64_t t) {
    float* row = &qkv_[t * stride];
    const float* cs = &rope_cs_[t * rope_row_ + rope_off];
    for (int64_t h = 0; h < H; ++h) {
      ops_.rms_norm(row + h * hd, lw.q_norm.data(), row + h * hd, hd, spec_.eps);
      ops_.rope(row + h * hd, cs, ls.n_rot);
    }
    if (!ls.has_kv) return;
    float* v = ls.k_eq_v ? &v_[t * kvw] : row + qw + kvw;
    if (ls.k_eq_v) std::memcpy(v, row + qw, 4 * static_cast<size_t>(kvw));
    for (int64_t h = 0; h < Hkv; ++h) {
      float* kh = row + qw + h * hd;
      float* vh = v + h * hd;
      ops_.rms_norm(kh, lw.k_norm.data(), kh, hd, spec_.eps);
      ops_.rope(kh, cs, ls.n_rot);
      if (ls.v_norm) ops_.rms_norm(vh, nullptr, vh, hd, spec_.eps);
    }
    const int32_t pos = ref_[t].pos;
    const BlockId blk = b.seqs[ref_[t].seq].block_tables[ls.kv_group][pos / bt];
    store_kv(kv, ls, blk, pos % bt, row + qw, v, kvw);
  });
}

// One position's K and V rows into the cache, converted with the ISA set's row ops.
void GemmaModel::store_kv(KvCache& kv, const LayerSpec& ls, BlockId blk, int32_t slot, const float* k, const float* v,
                          int64_t n) {
  const KvCache::Layout lay = kv.layout(ls.kv_group);
  for (int32_t part = 0; part < 2; ++part) {
    uint8_t* dst = lay.row(ls.kv_index, blk, part, slot);
    const float* src = part == 0 ? k : v;
    switch (kv.type()) {
      case KvType::F32: std::memcpy(dst, src, 4 * static_cast<size_t>(n)); break;
      case KvType::F16: ops_.to_f16(src, reinterpret_cast<uint16_t*>(dst), n); break;
      case KvType::BF16: ops_.to_bf16(src, reinterpret_cast<uint16_t*>(dst), n); break;
    }
  }
}

kernels::PagedLayer paged_layer(const LayerSpec& ls, KvCache& kv) {
  const KvCache::Layout lay = kv.layout(ls.kv_group);
  kernels::PagedLayer pl;
  pl.n_head = ls.n_head;
  pl.n_head_kv = ls.n_head_kv;
  pl.head_dim = ls.head_dim;
  pl.scale = ls.attn_scale;
  pl.window = ls.window;
  pl.base = lay.base;
  pl.block_stride = lay.block_stride;
  pl.k_off = static_cast<uint64_t>(ls.kv_index) * lay.layer_stride;
  pl.v_off = pl.k_off + lay.kv_stride;
  pl.slot_stride = lay.slot_stride;
  pl.elem_bytes = kv_type_size(kv.type());
  pl.block_tokens = kv.block_tokens();
  pl.elem = kv.type() == KvType::F32   ? kernels::KvElem::kF32
            : kv.type() == KvType::F16 ? kernels::KvElem::kF16
                                       : kernels::KvElem::kBF16;
  return pl;
}

// o[T × H·hd] from the queries in qkv_ and the K/V rows of the layer's cache slot (its own,
// or its source layer's when it reads shared K/V).
void GemmaModel::paged_attention(int il, const ForwardBatch& b, KvCache& kv) {
  const LayerSpec& ls = spec_.layers[il];
  const kernels::PagedLayer pl = paged_layer(ls, kv);
  grow(attn_tok_, static_cast<size_t>(T_));
  for (int64_t t = 0; t < T_; ++t)
    attn_tok_[t] = {b.seqs[ref_[t].seq].block_tables[ls.kv_group].data(), ref_[t].pos,
                    ls.window > 0 ? block_[t].second : -1};  // blocks: sliding layers only (gemma4.md §9.4)
  const int64_t qw = static_cast<int64_t>(ls.n_head) * ls.head_dim;
  grow(o_, static_cast<size_t>(T_ * qw));
  attn_.run(pool_, isa_, pl, {attn_tok_.data(), static_cast<size_t>(T_)}, qkv_.data(), layer_ops_[il].qkv.rows(),
            o_.data(), qw);
}

}  // namespace sluice::models
