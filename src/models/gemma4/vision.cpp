#include "models/gemma4/vision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"
#include "kernels/cpu_kernels.h"
#include "kernels/linear.h"
#include "kernels/rowops.h"
#include "models/gemma4/clamped_linear.h"
#include "models/gemma4/vision_attention.h"
#include "quant/quant.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"

namespace sluice::models::gemma4 {
namespace {

using kernels::Linear;
constexpr int kPatch = 16, kPool = 3, kPatchValues = kPatch * kPatch * 3;

struct VisionLayer {
  ClampedLinear q, k, v, o, gate, up, down;
  std::vector<float> ln1, attn_post, ln2, ffn_post, q_norm, k_norm;
  std::vector<float> out_scale;  // llama.cpp's optional v.blk.N.out_scale (not in transformers 5.24)
};

struct VisionShape {
  int32_t d = 0, n_layer = 0, n_head = 0, head_dim = 0, n_ff = 0, text_d = 0, pos_size = 0;
  float eps = 1e-6f;
};

class VisionJob;

class Gemma4Vision final : public ImageEncoder {
 public:
  Gemma4Vision(const gguf::GgufFile& f, const LoadOptions& opt);
  const std::string& projector_type() const override { return type_; }
  int32_t text_width() const override { return s_.text_d; }
  int32_t patch_size() const override { return kPatch; }
  int32_t pool_kernel() const override { return kPool; }
  bool bidirectional_images() const override { return !std_bias_.empty(); }
  void encode(const float* patches, int32_t cols, int32_t rows, float* out) override;
  std::unique_ptr<EncodeJob> start_encode(const float* patches, int32_t cols, int32_t rows, float* out,
                                          ThreadPool& pool) override;
  void set_tap(Tap tap) override { tap_ = std::move(tap); }

 private:
  friend class VisionJob;
  void bind_layers(const gguf::GgufFile& f);
  void tap(const char* name, int layer, const float* data, int64_t rows, int64_t width) const {
    if (tap_) tap_(TapView{name, layer, data, rows, width});
  }

  std::string type_ = "gemma4v";
  VisionShape s_;
  ThreadPool& pool_;
  const kernels::CpuKernels& isa_;
  kernels::RowOps ops_;
  Linear patch_, proj_;
  std::vector<float> pos_;  // [2][pos_size][d]: x rows, then y rows
  std::vector<float> std_bias_, std_scale_;
  std::vector<VisionLayer> layers_;
  std::vector<float> inv_freq_;  // [head_dim/4]
  Tap tap_;
};

// One image through the tower (docs/spec/gemma4.md §9.3) as an EncodeJob over the patch rows:
// stage 0 the patch embedding, then per layer an "A" stage (ln1, q/k/v, their norms and RoPE:
// row by row) and a "B" stage (attention for its queries over every key, the output projection,
// the FFN: row by row once A is complete), last the pooling and projection (one piece). The
// activations are the job's own, so jobs do not share buffers; the weights are the tower's.
class VisionJob final : public EncodeJob {
 public:
  VisionJob(const Gemma4Vision& m, ThreadPool& pool, const float* patches, int32_t cols, int32_t rows, float* out);

 protected:
  int n_stages() const override { return 2 + 2 * m_.s_.n_layer; }
  int64_t stage_rows(int stage) const override { return stage == n_stages() - 1 ? 1 : n_; }
  int stage_kind(int stage) const override { return stage == 0 ? 0 : stage == n_stages() - 1 ? 3 : 2 - stage % 2; }
  int64_t row_align(int stage) const override { return stage_kind(stage) == 2 ? kVisionQueryBlock : 1; }
  void run_rows(int stage, int64_t r0, int64_t r1) override;

 private:
  void embed(int64_t r0, int64_t r1);
  void run(const ClampedLinear& cl, const float* x, int64_t m, float* y);
  void rope_tables();
  void layer_a(const VisionLayer& L, int64_t r0, int64_t r1);
  void layer_b(const VisionLayer& L, int64_t r0, int64_t r1);
  void pool_and_project();

  const Gemma4Vision& m_;
  const VisionShape& s_;
  const kernels::RowOps& ops_;
  ThreadPool& pool_;
  const float* patches_;
  int32_t cols_, rows_;
  int64_t n_;
  float* out_;
  std::vector<float> rope_x_, rope_y_;  // per column / row: [cos | sin] of head_dim/4 each
  std::vector<float> h_, a_, q_, k_, v_, att_, g_, u_, in_, kt_;
  kernels::ActScratch scratch_;
};

void Gemma4Vision::bind_layers(const gguf::GgufFile& f) {
  const WeightBinder wb(f);
  const int64_t d = s_.d, hd = s_.head_dim, qd = int64_t{s_.n_head} * hd, ff = s_.n_ff;
  for (int il = 0; il < s_.n_layer; ++il) {
    const std::string p = "v.blk." + std::to_string(il) + ".";
    VisionLayer L;
    L.q = ClampedLinear::bind(wb, pool_, p + "attn_q", d, qd);
    L.k = ClampedLinear::bind(wb, pool_, p + "attn_k", d, qd);
    L.v = ClampedLinear::bind(wb, pool_, p + "attn_v", d, qd);
    L.o = ClampedLinear::bind(wb, pool_, p + "attn_out", qd, d);
    L.gate = ClampedLinear::bind(wb, pool_, p + "ffn_gate", d, ff);
    L.up = ClampedLinear::bind(wb, pool_, p + "ffn_up", d, ff);
    L.down = ClampedLinear::bind(wb, pool_, p + "ffn_down", ff, d);
    L.ln1 = wb.vector_f32(p + "ln1.weight", d);
    L.attn_post = wb.vector_f32(p + "attn_post_norm.weight", d);
    L.ln2 = wb.vector_f32(p + "ln2.weight", d);
    L.ffn_post = wb.vector_f32(p + "ffn_post_norm.weight", d);
    L.q_norm = wb.vector_f32(p + "attn_q_norm.weight", hd);
    L.k_norm = wb.vector_f32(p + "attn_k_norm.weight", hd);
    if (wb.has(p + "out_scale.weight")) L.out_scale = wb.vector_f32(p + "out_scale.weight", d);
    layers_.push_back(std::move(L));
  }
}

VisionShape read_shape(const gguf::GgufFile& f) {
  const std::string arch(f.get_string_or("general.architecture", ""));
  if (arch != "clip")
    fail("%s: not an mmproj file (general.architecture is '%s', expected 'clip')", f.name().c_str(), arch.c_str());
  const std::string proj(f.get_string_or("clip.vision.projector_type", f.get_string_or("clip.projector_type", "")));
  if (proj != "gemma4v")
    fail("%s: projector type '%s' is not supported (sluice reads Gemma 4's 'gemma4v')", f.name().c_str(), proj.c_str());
  VisionShape s;
  s.d = static_cast<int32_t>(f.get_uint("clip.vision.embedding_length", 1 << 16));
  s.n_layer = static_cast<int32_t>(f.get_uint("clip.vision.block_count", 1024));
  s.n_head = static_cast<int32_t>(f.get_uint("clip.vision.attention.head_count", 1024));
  s.n_ff = static_cast<int32_t>(f.get_uint("clip.vision.feed_forward_length", 1 << 20));
  s.text_d = static_cast<int32_t>(f.get_uint("clip.vision.projection_dim", 1 << 20));
  s.eps = static_cast<float>(f.get_float_or("clip.vision.attention.layer_norm_epsilon", 1e-6));
  const uint64_t patch = f.get_uint_or("clip.vision.patch_size", kPatch, 1 << 10);
  if (s.d <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_ff <= 0 || s.text_d <= 0 || s.d % s.n_head != 0)
    fail("%s: inconsistent vision shape (width %d, %d layers, %d heads, FFN %d, projection %d)", f.name().c_str(), s.d,
         s.n_layer, s.n_head, s.n_ff, s.text_d);
  if (patch != kPatch) fail("%s: patch size %llu, gemma4v uses 16", f.name().c_str(), (unsigned long long)patch);
  s.head_dim = s.d / s.n_head;
  if (s.head_dim % 4 != 0) fail("%s: head_dim %d is not a multiple of 4 (2-D RoPE)", f.name().c_str(), s.head_dim);
  const gguf::TensorInfo& pos = f.tensor("v.position_embd.weight");
  if (pos.ne[0] != static_cast<uint64_t>(s.d) || pos.ne[2] != 2 || pos.ne[3] != 1 || pos.ne[1] == 0 ||
      pos.ne[1] > (1u << 20))
    fail("%s: v.position_embd.weight has shape %s, expected [%d, N, 2]", f.name().c_str(), pos.shape_string().c_str(),
         s.d);
  s.pos_size = static_cast<int32_t>(pos.ne[1]);
  return s;
}

Gemma4Vision::Gemma4Vision(const gguf::GgufFile& f, const LoadOptions& opt)
    : s_(read_shape(f)),
      pool_(*opt.pool),
      isa_(opt.isa ? *opt.isa : kernels::cpu_kernels()),
      ops_(kernels::merged_ops(isa_)) {
  const WeightBinder wb(f);
  // v.patch_embd.weight: a [16, 16, 3, d] conv kernel; each of its d rows is [channel][py][px].
  const gguf::TensorInfo& pe = f.tensor("v.patch_embd.weight");
  if (pe.ne[0] != kPatch || pe.ne[1] != kPatch || pe.ne[2] != 3 || pe.ne[3] != static_cast<uint64_t>(s_.d))
    fail("%s: v.patch_embd.weight has shape %s, expected [16, 16, 3, %d]", f.name().c_str(), pe.shape_string().c_str(),
         s_.d);
  if (!quant::traits(pe.type)) fail("%s: v.patch_embd.weight has a type sluice cannot read", f.name().c_str());
  const Mat pm{pe.name, pe.type, pe.data, kPatchValues, s_.d, dtype_row_bytes(pe.type, kPatchValues)};
  patch_ = Linear::build({&pm, 1}, pool_, "v.patch_embd");
  pos_ = read_all_f32(f, f.tensor("v.position_embd.weight"));
  const Mat proj = wb.matrix("mm.input_projection.weight", s_.d, s_.text_d);
  proj_ = Linear::build({&proj, 1}, pool_, "mm.input_projection");
  if (wb.has("v.std_bias") || wb.has("v.std_scale")) {
    std_bias_ = wb.vector_f32("v.std_bias", s_.d);
    std_scale_ = wb.vector_f32("v.std_scale", s_.d);
  }
  bind_layers(f);
  // inv_freq_i = 1 / 100^(2i / (head_dim/2)) for i < head_dim/4, in f32 as transformers computes it.
  const int32_t spatial = s_.head_dim / 2;
  for (int32_t i = 0; i < spatial / 2; ++i)
    inv_freq_.push_back(1.0f / std::pow(100.0f, static_cast<float>(2 * i) / static_cast<float>(spatial)));
}

VisionJob::VisionJob(const Gemma4Vision& m, ThreadPool& pool, const float* patches, int32_t cols, int32_t rows,
                     float* out)
    : m_(m),
      s_(m.s_),
      ops_(m.ops_),
      pool_(pool),
      patches_(patches),
      cols_(cols),
      rows_(rows),
      n_(int64_t{cols} * rows),
      out_(out) {
  const int64_t d = s_.d, qd = int64_t{s_.n_head} * s_.head_dim;
  h_.resize(n_ * d), a_.resize(n_ * d);
  q_.resize(n_ * qd), k_.resize(n_ * qd), v_.resize(n_ * qd), att_.resize(n_ * qd);
  rope_tables();
}

void VisionJob::run_rows(int stage, int64_t r0, int64_t r1) {
  if (stage == 0) {
    embed(r0, r1);
    if (r1 == n_) m_.tap("v_embd", -1, h_.data(), n_, s_.d);
  } else if (stage == n_stages() - 1) {
    pool_and_project();
  } else if (stage % 2 == 1) {
    layer_a(m_.layers_[(stage - 1) / 2], r0, r1);
  } else {
    const int il = (stage - 1) / 2;
    layer_b(m_.layers_[il], r0, r1);
    if (r1 == n_) m_.tap("v_l_out", il, h_.data(), n_, s_.d);
  }
}

// h = (2p − 1)·W_inᵀ + pos_x + pos_y for patches [r0, r1), the values reordered to the
// kernel's [c][py][px].
void VisionJob::embed(int64_t r0, int64_t r1) {
  const int64_t m = r1 - r0, d = s_.d;
  in_.resize(m * kPatchValues);
  for (int64_t i = 0; i < m; ++i) {
    const float* p = patches_ + (r0 + i) * kPatchValues;
    float* x = in_.data() + i * kPatchValues;
    for (int c = 0; c < 3; ++c)
      for (int j = 0; j < kPatch * kPatch; ++j) x[c * kPatch * kPatch + j] = (p[j * 3 + c] - 0.5f) * 2.0f;
  }
  m_.patch_.run(pool_, in_.data(), m, h_.data() + r0 * d, scratch_, &m_.isa_);
  for (int64_t i = r0; i < r1; ++i) {
    const float* px = m_.pos_.data() + (i % cols_) * d;
    const float* py = m_.pos_.data() + (int64_t{s_.pos_size} + i / cols_) * d;
    float* hi = h_.data() + i * d;
    for (int64_t j = 0; j < d; ++j) hi[j] = hi[j] + (px[j] + py[j]);
  }
}

void VisionJob::run(const ClampedLinear& cl, const float* x, int64_t m, float* y) {
  cl.run(pool_, x, m, y, in_, scratch_, &m_.isa_);
}

// Per position p: [cos(p·f_i) | sin(p·f_i)], angles in f32 as transformers computes them.
void VisionJob::rope_tables() {
  const std::vector<float>& inv_freq = m_.inv_freq_;
  const int64_t q = static_cast<int64_t>(inv_freq.size());
  auto fill = [&](std::vector<float>& t, int32_t n) {
    t.resize(static_cast<size_t>(n) * 2 * q);
    for (int32_t p = 0; p < n; ++p) {
      for (int64_t i = 0; i < q; ++i) {
        const float angle = static_cast<float>(p) * inv_freq[i];
        t[p * 2 * q + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
        t[p * 2 * q + q + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
      }
    }
  };
  fill(rope_x_, cols_);
  fill(rope_y_, rows_);
}

// A layer's first half for rows [r0, r1) (docs/spec/gemma4.md §9.3 step 2): ln1, q/k/v, their
// RMSNorms and the 2-D RoPE. The row ops run split over the pool (each row alone: same values).
void VisionJob::layer_a(const VisionLayer& L, int64_t r0, int64_t r1) {
  const int64_t d = s_.d, H = s_.n_head, hd = s_.head_dim, half = hd / 2, m = r1 - r0;
  for_rows(pool_, m, [&](int64_t i0, int64_t i1) {
    for (int64_t i = r0 + i0; i < r0 + i1; ++i)
      ops_.rms_norm(h_.data() + i * d, L.ln1.data(), a_.data() + i * d, d, s_.eps);
  });
  run(L.q, a_.data() + r0 * d, m, q_.data() + r0 * H * hd);
  run(L.k, a_.data() + r0 * d, m, k_.data() + r0 * H * hd);
  run(L.v, a_.data() + r0 * d, m, v_.data() + r0 * H * hd);
  for_rows(pool_, m, [&](int64_t i0, int64_t i1) {
    for (int64_t i = r0 + i0; i < r0 + i1; ++i) {
      const float* rx = rope_x_.data() + (i % cols_) * half;
      const float* ry = rope_y_.data() + (i / cols_) * half;
      for (int64_t h = 0; h < H; ++h) {
        float* qh = q_.data() + (i * H + h) * hd;
        float* kh = k_.data() + (i * H + h) * hd;
        ops_.rms_norm(qh, L.q_norm.data(), qh, hd, s_.eps);
        ops_.rms_norm(kh, L.k_norm.data(), kh, hd, s_.eps);
        ops_.rms_norm(v_.data() + (i * H + h) * hd, nullptr, v_.data() + (i * H + h) * hd, hd, s_.eps);
        ops_.rope(qh, rx, half), ops_.rope(qh + half, ry, half);  // first half by x, second by y
        ops_.rope(kh, rx, half), ops_.rope(kh + half, ry, half);
      }
    }
  });
}

// A layer's second half for rows [r0, r1), every row's K/V done: softmax(q·kᵀ)·v over all n
// patches (bidirectional, scale 1; vision_attention.h), the output projection and post-norm,
// then the GeGLU FFN and its post-norm.
void VisionJob::layer_b(const VisionLayer& L, int64_t r0, int64_t r1) {
  const int64_t d = s_.d, qd = int64_t{s_.n_head} * s_.head_dim, m = r1 - r0, ff = s_.n_ff;
  const VisionAttnArgs args{q_.data(), k_.data(), v_.data(), att_.data(), n_, s_.n_head, s_.head_dim};
  if (r0 == 0) vision_attention_pack(args, pool_, kt_);
  vision_attention_rows(args, pool_, kt_, r0, r1);
  float* a = a_.data() + r0 * d;
  float* h = h_.data() + r0 * d;
  run(L.o, att_.data() + r0 * qd, m, a);
  for_rows(pool_, m, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      ops_.add_rms_norm(h + i * d, a + i * d, L.attn_post.data(), d, s_.eps);
      ops_.rms_norm(h + i * d, L.ln2.data(), a + i * d, d, s_.eps);
    }
  });
  g_.resize(m * ff), u_.resize(m * ff);
  run(L.gate, a, m, g_.data());
  run(L.up, a, m, u_.data());
  for_rows(pool_, m, [&](int64_t i0, int64_t i1) {
    ops_.gelu_mul(g_.data() + i0 * ff, u_.data() + i0 * ff, g_.data() + i0 * ff, (i1 - i0) * ff);
  });
  run(L.down, g_.data(), m, a);
  for_rows(pool_, m, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      ops_.add_rms_norm(h + i * d, a + i * d, L.ffn_post.data(), d, s_.eps);
      if (!L.out_scale.empty())
        for (int64_t j = 0; j < d; ++j) h[i * d + j] *= L.out_scale[j];
    }
  });
}

// 3×3 average by position (token kx + (cols/3)·ky), ·sqrt(d), standardisation, then the
// projector: weightless RMSNorm and mm.input_projection into `out`.
void VisionJob::pool_and_project() {
  const int64_t d = s_.d, tc = cols_ / kPool, tr = rows_ / kPool, T = tc * tr;
  a_.assign(T * d, 0.0f);
  const float ninth = 1.0f / 9.0f, root = static_cast<float>(std::sqrt(static_cast<double>(d)));
  for (int64_t i = 0; i < n_; ++i) {
    float* t = a_.data() + ((i % cols_) / kPool + tc * ((i / cols_) / kPool)) * d;
    for (int64_t j = 0; j < d; ++j) t[j] += ninth * h_[i * d + j];
  }
  for (int64_t t = 0; t < T; ++t) {
    float* r = a_.data() + t * d;
    for (int64_t j = 0; j < d; ++j) r[j] *= root;
    if (!m_.std_bias_.empty())
      for (int64_t j = 0; j < d; ++j) r[j] = (r[j] - m_.std_bias_[j]) * m_.std_scale_[j];
  }
  m_.tap("v_pooled", -1, a_.data(), T, d);
  for (int64_t t = 0; t < T; ++t) ops_.rms_norm(a_.data() + t * d, nullptr, a_.data() + t * d, d, s_.eps);
  m_.proj_.run(pool_, a_.data(), T, out_, scratch_, &m_.isa_);
  m_.tap("v_soft", -1, out_, T, s_.text_d);
}

std::unique_ptr<EncodeJob> Gemma4Vision::start_encode(const float* patches, int32_t cols, int32_t rows, float* out,
                                                      ThreadPool& pool) {
  if (cols <= 0 || rows <= 0 || cols % kPool != 0 || rows % kPool != 0)
    fail("image patch grid %dx%d is not a positive multiple of 3 each way", cols, rows);
  if (cols > s_.pos_size || rows > s_.pos_size)
    fail("image patch grid %dx%d exceeds the tower's position table (%d per side)", cols, rows, s_.pos_size);
  return std::make_unique<VisionJob>(*this, pool, patches, cols, rows, out);
}

void Gemma4Vision::encode(const float* patches, int32_t cols, int32_t rows, float* out) {
  start_encode(patches, cols, rows, out, pool_)->run_all();
}

}  // namespace

std::unique_ptr<ImageEncoder> load_vision(const gguf::GgufFile& f, const LoadOptions& opt) {
  if (!opt.pool) fail("load_vision: LoadOptions::pool is required");
  return std::make_unique<Gemma4Vision>(f, opt);
}

}  // namespace sluice::models::gemma4

namespace sluice::models {

std::unique_ptr<ImageEncoder> load_image_encoder(const gguf::GgufFile& f, const LoadOptions& opt) {
  return gemma4::load_vision(f, opt);
}

void check_projector_fits(const std::string& projector_type, int32_t text_width, const ModelSpec& text,
                          const std::string& mmproj_name) {
  if (text.arch != "gemma4")
    fail("%s: a %s projector feeds Gemma 4 models; this model is '%s'", mmproj_name.c_str(), projector_type.c_str(),
         text.arch.c_str());
  if (text_width != text.n_embd)
    fail("%s: the projector outputs width %d but the model's embedding width is %d (an mmproj of another model size)",
         mmproj_name.c_str(), text_width, text.n_embd);
}

}  // namespace sluice::models
