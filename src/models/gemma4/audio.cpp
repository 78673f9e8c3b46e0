#include "models/gemma4/audio.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "gguf/reader.h"
#include "kernels/cpu_kernels.h"
#include "kernels/linear.h"
#include "kernels/rowops.h"
#include "models/gemma4/clamped_linear.h"
#include "quant/quant.h"
#include "tensor/weights.h"
#include "threading/thread_pool.h"

namespace sluice::models::gemma4 {
namespace {

using kernels::Linear;
// Fixed by the architecture (transformers' Gemma4AudioConfig defaults; llama.cpp's GGUF
// carries none of them and its graph hard-codes the same): 128 mel bins, chunks of 12 queries
// attending to themselves and 11 past frames through windows of 24 keys (12 past + the
// chunk), 13 relative positions, depthwise kernel 5, logit cap 50, invalid logit −1e9,
// half-step residual 0.5, "gradient clipping" at ±1e10, every norm's eps 1e-6.
constexpr int kMel = 128, kChunk = 12, kPast = 12, kWindow = kChunk + kPast, kRel = kPast + 1, kKernel = 5;
constexpr int kLeft = 12;  // a key j is visible from query i iff 0 <= i − j < 12
constexpr float kCap = 50.0f, kInvalid = -1.0e9f, kResidual = 0.5f, kClip = 1.0e10f, kEps = 1e-6f;
// The longest clip one encode() takes: 5 minutes (7500 tokens). transformers' processor cuts
// at 30 s; longer audio is encoded in windows by the caller. The first stage's output, the
// largest buffer, is 16 KiB a frame (480 MB here, for an E2B tower).
constexpr int32_t kMaxFrames = 30000;

void clip(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i], -kClip), kClip);
}

// Σ a[e]·b[e] in 16 lanes (lane l takes e ≡ l mod 16), then the tree (l, l+8) → … → (l, l+1):
// one defined order, which the compiler vectorises as written.
float dot_lanes(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t e = 0;
  for (; e + 16 <= n; e += 16)
    for (int l = 0; l < 16; ++l) acc[l] = acc[l] + a[e + l] * b[e + l];
  for (int l = 0; e < n; ++e, ++l) acc[l] = acc[l] + a[e] * b[e];
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = acc[l] + acc[l + w];
  return acc[0];
}

// One half-step feed-forward module (transformers' Gemma4AudioFeedForward).
struct AudioFfn {
  ClampedLinear up, down;
  std::vector<float> pre, post;
};

struct AudioLayer {
  AudioFfn ffn1, ffn2;
  ClampedLinear q, k, v, o, pw1, pw2;
  Linear k_rel;
  std::vector<float> attn_pre, attn_post, conv_pre, conv_post, out_norm;
  std::vector<float> q_dim_scale;  // softplus(per_dim_scale), applied by the converter [head_dim]
  std::vector<float> k_dim_scale;  // llama.cpp's optional per_dim_k_scale (not in transformers 5.24)
  std::vector<float> dw;           // depthwise kernel, transposed to [5][d]
};

struct AudioShape {
  int32_t d = 0, n_layer = 0, n_head = 0, head_dim = 0, n_ff = 0, c0 = 0, c1 = 0, out_d = 0, text_d = 0;
};

// Frame counts and masks through the two stride-2 stages: stage s keeps every other mask entry.
struct Subsampled {
  int32_t t1 = 0, t2 = 0;
  std::vector<uint8_t> m0, m1, m2;  // validity of the input frames, stage-1 rows, output positions
};

Subsampled subsample_masks(const uint8_t* mask, int32_t frames) {
  Subsampled s;
  s.m0.assign(static_cast<size_t>(frames), 1);
  if (mask)
    for (int32_t t = 0; t < frames; ++t) s.m0[t] = mask[t] != 0;
  s.t1 = (frames - 1) / 2 + 1, s.t2 = (s.t1 - 1) / 2 + 1;
  for (int32_t t = 0; t < s.t1; ++t) s.m1.push_back(s.m0[2 * t] != 0);
  for (int32_t t = 0; t < s.t2; ++t) s.m2.push_back(s.m1[2 * t]);
  return s;
}

class Gemma4Audio final : public AudioEncoder {
 public:
  Gemma4Audio(const gguf::GgufFile& f, const LoadOptions& opt);
  const std::string& projector_type() const override { return type_; }
  int32_t text_width() const override { return s_.text_d; }
  int32_t n_mel() const override { return kMel; }
  int32_t n_tokens(const uint8_t* mask, int32_t frames) const override;
  void encode(const float* mel, const uint8_t* mask, int32_t frames, float* out) override;
  void set_tap(Tap tap) override { tap_ = std::move(tap); }

 private:
  void bind_layers(const gguf::GgufFile& f);
  void conv0(const float* mel, const Subsampled& sub, int32_t frames);
  void conv1_and_project(const Subsampled& sub);
  void layer_norm_relu(float* x, int64_t rows, int32_t c, const std::vector<float>& w) const;
  void run(const ClampedLinear& cl, const float* x, int64_t m, float* y) {
    cl.run(pool_, x, m, y, in_, scratch_, &isa_);
  }
  void clip_norm(const std::vector<float>& w, int64_t n);
  void ffn(const AudioFfn& F, int64_t n);
  void attention_block(const AudioLayer& L, const std::vector<uint8_t>& valid);
  void attend(const std::vector<uint8_t>& valid);
  void light_conv(const AudioLayer& L, int64_t n);
  void layer(const AudioLayer& L, const std::vector<uint8_t>& valid);
  void project(const std::vector<uint8_t>& valid, float* out);
  void tap(const char* name, int layer, const float* data, int64_t rows, int64_t width) const {
    if (tap_) tap_(TapView{name, layer, data, rows, width});
  }

  std::string type_ = "gemma4a";
  AudioShape s_;
  ThreadPool& pool_;
  const kernels::CpuKernels& isa_;
  kernels::RowOps ops_;
  std::vector<float> conv0_w_, conv0_norm_, conv1_norm_;  // conv0_w_ [3][3][c0] (the file's [c0][3][3] transposed)
  Linear conv1_, in_proj_, out_proj_, mm_proj_;           // conv1_: [c0·9 → c1], rows [c][kt][kf]
  std::vector<float> out_bias_;
  std::vector<AudioLayer> layers_;
  std::vector<float> pos_;  // [13][d]: [sin | cos] of relative positions 12, 11, …, 0
  int64_t n_ = 0;           // positions after subsampling
  std::vector<float> x0_, col_, h_, a_, q_, k_, v_, rel_, att_, g_, u_, in_;
  kernels::ActScratch scratch_;
  Tap tap_;
};

AudioShape read_shape(const gguf::GgufFile& f) {
  const std::string arch(f.get_string_or("general.architecture", ""));
  if (arch != "clip")
    fail("%s: not an mmproj file (general.architecture is '%s', expected 'clip')", f.name().c_str(), arch.c_str());
  const std::string proj(f.get_string_or("clip.audio.projector_type", f.get_string_or("clip.projector_type", "")));
  if (proj != "gemma4a")
    fail("%s: audio projector type '%s' is not supported (sluice reads Gemma 4's 'gemma4a')", f.name().c_str(),
         proj.c_str());
  AudioShape s;
  s.d = static_cast<int32_t>(f.get_uint("clip.audio.embedding_length", 1 << 16));
  s.n_layer = static_cast<int32_t>(f.get_uint("clip.audio.block_count", 1024));
  s.n_head = static_cast<int32_t>(f.get_uint("clip.audio.attention.head_count", 1024));
  s.n_ff = static_cast<int32_t>(f.get_uint("clip.audio.feed_forward_length", 1 << 20));
  s.text_d = static_cast<int32_t>(f.get_uint("clip.audio.projection_dim", 1 << 20));
  const uint64_t mel = f.get_uint_or("clip.audio.num_mel_bins", kMel, 1 << 16);
  if (s.d <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_ff <= 0 || s.text_d <= 0 || s.d % s.n_head != 0 ||
      s.d % 2 != 0)
    fail("%s: inconsistent audio shape (width %d, %d layers, %d heads, FFN %d, projection %d)", f.name().c_str(), s.d,
         s.n_layer, s.n_head, s.n_ff, s.text_d);
  if (mel != kMel) fail("%s: %llu mel bins, gemma4a takes 128", f.name().c_str(), (unsigned long long)mel);
  s.head_dim = s.d / s.n_head;
  const gguf::TensorInfo& c0 = f.tensor("a.conv1d.0.weight");
  const gguf::TensorInfo& c1 = f.tensor("a.conv1d.1.weight");
  s.c0 = static_cast<int32_t>(std::min<uint64_t>(c0.ne[3], 1 << 16));
  s.c1 = static_cast<int32_t>(std::min<uint64_t>(c1.ne[3], 1 << 16));
  if (c0.ne[0] != 3 || c0.ne[1] != 3 || c0.ne[2] != 1 || s.c0 == 0 || c1.ne[0] != 3 || c1.ne[1] != 3 ||
      c1.ne[2] != c0.ne[3] || s.c1 == 0)
    fail("%s: subsampling convolutions have shapes %s and %s, expected [3, 3, 1, C0] and [3, 3, C0, C1]",
         f.name().c_str(), c0.shape_string().c_str(), c1.shape_string().c_str());
  const gguf::TensorInfo& out = f.tensor("a.pre_encode.out.weight");
  s.out_d = static_cast<int32_t>(std::min<uint64_t>(out.ne[1], 1 << 20));
  return s;
}

void Gemma4Audio::bind_layers(const gguf::GgufFile& f) {
  const WeightBinder wb(f);
  const int64_t d = s_.d, ff = s_.n_ff, hd = s_.head_dim;
  auto bind_ffn = [&](const std::string& p, const char* sfx) {
    AudioFfn F;
    F.up = ClampedLinear::bind(wb, pool_, p + "ffn_up" + sfx, d, ff);
    F.down = ClampedLinear::bind(wb, pool_, p + "ffn_down" + sfx, ff, d);
    F.pre = wb.vector_f32(p + "ffn_norm" + sfx + ".weight", d);
    F.post = wb.vector_f32(p + "ffn_post_norm" + sfx + ".weight", d);
    return F;
  };
  for (int il = 0; il < s_.n_layer; ++il) {
    const std::string p = "a.blk." + std::to_string(il) + ".";
    AudioLayer L;
    L.ffn1 = bind_ffn(p, ""), L.ffn2 = bind_ffn(p, "_1");
    L.q = ClampedLinear::bind(wb, pool_, p + "attn_q", d, d);
    L.k = ClampedLinear::bind(wb, pool_, p + "attn_k", d, d);
    L.v = ClampedLinear::bind(wb, pool_, p + "attn_v", d, d);
    L.o = ClampedLinear::bind(wb, pool_, p + "attn_out", d, d);
    L.pw1 = ClampedLinear::bind(wb, pool_, p + "conv_pw1", d, 2 * d);
    L.pw2 = ClampedLinear::bind(wb, pool_, p + "conv_pw2", d, d);
    const Mat rel = wb.matrix(p + "attn_k_rel.weight", d, d);
    L.k_rel = Linear::build({&rel, 1}, pool_, p + "attn_k_rel");
    L.attn_pre = wb.vector_f32(p + "attn_pre_norm.weight", d);
    L.attn_post = wb.vector_f32(p + "attn_post_norm.weight", d);
    // llama.cpp's names are swapped: conv_norm holds the norm before the light conv's first
    // linear (transformers' lconv1d.pre_layer_norm), norm_conv the one after the depthwise conv.
    L.conv_pre = wb.vector_f32(p + "conv_norm.weight", d);
    L.conv_post = wb.vector_f32(p + "norm_conv.weight", d);
    L.out_norm = wb.vector_f32(p + "ln2.weight", d);
    L.q_dim_scale = wb.vector_f32(p + "per_dim_scale.weight", hd);
    if (wb.has(p + "per_dim_k_scale.weight")) L.k_dim_scale = wb.vector_f32(p + "per_dim_k_scale.weight", hd);
    const Mat dw = wb.matrix(p + "conv_dw.weight", kKernel, d);
    const std::vector<float> dw_file = read_all_f32(f, f.tensor(dw.name));  // [d][5]
    L.dw.resize(dw_file.size());
    for (int64_t j = 0; j < d; ++j)
      for (int k = 0; k < kKernel; ++k) L.dw[k * d + j] = dw_file[j * kKernel + k];
    layers_.push_back(std::move(L));
  }
}

// Relative position table: position p = 12 − c at row c, [sin(p·τ_i) | cos(p·τ_i)] with
// τ_i = exp(−i·ln(10⁴)/(d/2 − 1)), i < d/2, each step in f32 as transformers computes it.
std::vector<float> relative_positions(int32_t d) {
  const int32_t half = d / 2;
  const float step = static_cast<float>(-std::log(10000.0) / std::max(half - 1, 1));
  std::vector<float> pos(static_cast<size_t>(kRel) * d);
  for (int c = 0; c < kRel; ++c) {
    for (int32_t i = 0; i < half; ++i) {
      const float inv = static_cast<float>(std::exp(static_cast<double>(static_cast<float>(i) * step)));
      const double angle = static_cast<float>(kPast - c) * inv;
      pos[c * d + i] = static_cast<float>(std::sin(angle));
      pos[c * d + half + i] = static_cast<float>(std::cos(angle));
    }
  }
  return pos;
}

Gemma4Audio::Gemma4Audio(const gguf::GgufFile& f, const LoadOptions& opt)
    : s_(read_shape(f)),
      pool_(*opt.pool),
      isa_(opt.isa ? *opt.isa : kernels::cpu_kernels()),
      ops_(kernels::merged_ops(isa_)) {
  const WeightBinder wb(f);
  const std::vector<float> w0 = read_all_f32(f, f.tensor("a.conv1d.0.weight"));  // [c0][3][3]
  conv0_w_.resize(w0.size());
  for (int32_t c = 0; c < s_.c0; ++c)
    for (int k = 0; k < 9; ++k) conv0_w_[int64_t{k} * s_.c0 + c] = w0[int64_t{c} * 9 + k];
  conv0_norm_ = wb.vector_f32("a.conv1d.0.norm.weight", s_.c0);
  conv1_norm_ = wb.vector_f32("a.conv1d.1.norm.weight", s_.c1);
  const gguf::TensorInfo& c1 = f.tensor("a.conv1d.1.weight");
  if (!quant::traits(c1.type)) fail("%s: a.conv1d.1.weight has a type sluice cannot read", f.name().c_str());
  const int64_t k1 = int64_t{s_.c0} * 9;
  const Mat c1m{c1.name, c1.type, c1.data, k1, s_.c1, dtype_row_bytes(c1.type, k1)};
  conv1_ = Linear::build({&c1m, 1}, pool_, "a.conv1d.1");
  const Mat in = wb.matrix("a.input_projection.weight", int64_t{kMel / 4} * s_.c1, s_.d);
  in_proj_ = Linear::build({&in, 1}, pool_, "a.input_projection");
  const Mat out = wb.matrix("a.pre_encode.out.weight", s_.d, s_.out_d);
  out_proj_ = Linear::build({&out, 1}, pool_, "a.pre_encode.out");
  out_bias_ = wb.vector_f32("a.pre_encode.out.bias", s_.out_d);
  const Mat mm = wb.matrix("mm.a.input_projection.weight", s_.out_d, s_.text_d);
  mm_proj_ = Linear::build({&mm, 1}, pool_, "mm.a.input_projection");
  bind_layers(f);
  pos_ = relative_positions(s_.d);
}

int32_t Gemma4Audio::n_tokens(const uint8_t* mask, int32_t frames) const {
  if (frames <= 0) return 0;
  const Subsampled sub = subsample_masks(mask, frames);
  return static_cast<int32_t>(std::count(sub.m2.begin(), sub.m2.end(), uint8_t{1}));
}

// x[rows][c] = relu(LayerNorm_c(x) · w): mean and biased variance over the channels, no bias.
void Gemma4Audio::layer_norm_relu(float* x, int64_t rows, int32_t c, const std::vector<float>& w) const {
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * c;
    double sum = 0, sq = 0;
    for (int32_t j = 0; j < c; ++j) sum += v[j];
    const float mean = static_cast<float>(sum / c);
    for (int32_t j = 0; j < c; ++j) sq += double{v[j] - mean} * (v[j] - mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(sq / c + kEps));
    for (int32_t j = 0; j < c; ++j) v[j] = std::max((v[j] - mean) * rstd * w[j], 0.0f);
  }
}

// Stage 1: 3×3 stride-2 convolution (padding 1) of the masked mel image [T][128] into
// x0_ [t1][64][c0], then LayerNorm over channels and ReLU; rows of invalid stage-1 positions
// are then zeroed, as transformers masks the next stage's input.
void Gemma4Audio::conv0(const float* mel, const Subsampled& sub, int32_t frames) {
  const int32_t c0 = s_.c0, f1 = kMel / 2;
  x0_.resize(static_cast<size_t>(sub.t1) * f1 * c0);  // every element written below
  pool_.run([&](int ith, int nth) {
    for (int32_t t = ith; t < sub.t1; t += nth) {
      for (int32_t f = 0; f < f1; ++f) {
        float patch[9];
        for (int kt = 0; kt < 3; ++kt) {
          for (int kf = 0; kf < 3; ++kf) {
            const int32_t tt = 2 * t - 1 + kt, ff = 2 * f - 1 + kf;
            const bool in = tt >= 0 && tt < frames && ff >= 0 && ff < kMel && sub.m0[tt];
            patch[kt * 3 + kf] = in ? mel[int64_t{tt} * kMel + ff] : 0.0f;
          }
        }
        float* o = x0_.data() + (int64_t{t} * f1 + f) * c0;
        // Per channel 0 + Σ_k w[k][c]·patch[k], k rising; the channels side by side in lanes.
        std::fill_n(o, c0, 0.0f);
        for (int k = 0; k < 9; ++k) {
          const float* wk = conv0_w_.data() + int64_t{k} * c0;
          for (int32_t c = 0; c < c0; ++c) o[c] += wk[c] * patch[k];
        }
      }
      layer_norm_relu(x0_.data() + int64_t{t} * f1 * c0, f1, c0, conv0_norm_);
    }
  });
  tap("a_conv0", -1, x0_.data(), sub.t1, int64_t{f1} * c0);
  for (int32_t t = 0; t < sub.t1; ++t)
    if (!sub.m1[t]) std::fill_n(x0_.data() + int64_t{t} * f1 * c0, int64_t{f1} * c0, 0.0f);
}

// Stage 2 by im2col (rows [c][kt][kf] as the kernel's) in slabs of time rows, LayerNorm and
// ReLU, then the [t2][32][c1] image flattened per time row into a.input_projection: h_ [t2][d].
void Gemma4Audio::conv1_and_project(const Subsampled& sub) {
  const int32_t c0 = s_.c0, c1 = s_.c1, f1 = kMel / 2, f2 = kMel / 4;
  const int64_t k1 = int64_t{c0} * 9, slab = 16;
  std::vector<float> y(static_cast<size_t>(sub.t2) * f2 * c1);
  col_.resize(slab * f2 * k1);
  for (int32_t t0 = 0; t0 < sub.t2; t0 += slab) {
    const int64_t rows = std::min<int64_t>(slab, sub.t2 - t0) * f2;
    for_rows(pool_, rows, [&](int64_t r0, int64_t r1) {
      std::fill(col_.begin() + r0 * k1, col_.begin() + r1 * k1, 0.0f);
      for (int64_t r = r0; r < r1; ++r) {
        const int32_t t = t0 + static_cast<int32_t>(r / f2), f = static_cast<int32_t>(r % f2);
        float* col = col_.data() + r * k1;
        for (int kt = 0; kt < 3; ++kt) {
          const int32_t tt = 2 * t - 1 + kt;
          if (tt < 0 || tt >= sub.t1) continue;
          for (int kf = 0; kf < 3; ++kf) {
            const int32_t ff = 2 * f - 1 + kf;
            if (ff < 0 || ff >= f1) continue;
            const float* src = x0_.data() + (int64_t{tt} * f1 + ff) * c0;
            for (int32_t c = 0; c < c0; ++c) col[c * 9 + kt * 3 + kf] = src[c];
          }
        }
      }
    });
    float* dst = y.data() + int64_t{t0} * f2 * c1;
    conv1_.run(pool_, col_.data(), rows, dst, scratch_, &isa_);
    for_rows(pool_, rows, [&](int64_t r0, int64_t r1) { layer_norm_relu(dst + r0 * c1, r1 - r0, c1, conv1_norm_); });
  }
  n_ = sub.t2;
  h_.resize(n_ * s_.d);
  in_proj_.run(pool_, y.data(), n_, h_.data(), scratch_, &isa_);
}

// a_ = rms_norm(clip(h_); w), rows [0, n): the input of a block.
void Gemma4Audio::clip_norm(const std::vector<float>& w, int64_t n) {
  const int64_t d = s_.d;
  a_.resize(n * d);
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* a = a_.data() + i * d;
      std::copy_n(h_.data() + i * d, d, a);
      clip(a, d);
      ops_.rms_norm(a, w.data(), a, d, kEps);
    }
  });
}

// x += 0.5 · post_norm(clip(W2 · silu(W1 · pre_norm(clip(x))))), rows of h_.
void Gemma4Audio::ffn(const AudioFfn& F, int64_t n) {
  const int64_t d = s_.d, ff = s_.n_ff;
  clip_norm(F.pre, n);
  g_.resize(n * ff);
  run(F.up, a_.data(), n, g_.data());
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    float* g = g_.data() + i0 * ff;
    ops_.sigmoid_mul(g, g, g, (i1 - i0) * ff);  // SiLU
  });
  run(F.down, g_.data(), n, a_.data());
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* a = a_.data() + i * d;
      clip(a, d);
      ops_.rms_norm(a, F.post.data(), a, d, kEps);
      float* h = h_.data() + i * d;
      for (int64_t j = 0; j < d; ++j) h[j] = h[j] + a[j] * kResidual;
    }
  });
}

// Chunked local attention over q_, k_, v_ ([n][heads·head_dim], q and k already scaled) with
// the relative-key rows rel_ [13][heads·head_dim]: query i (chunk b = i/12, row r = i%12) scores
// the 24 window slots w, key j = 12b + w − 12 (zero K/V outside [0, n)): content q·k_j plus
// the shifted relative term q·rel[w − r] (0 outside [0, 12]), capped 50·tanh(s/50); a slot
// whose key is padding, or not 0 <= i − j < 12, scores −1e9 — all 24 when none is left, so the
// softmax is then uniform over the window, exactly as transformers' masked_fill makes it. Only
// visible slots need their dot products; a slot of probability 0 adds nothing to the output.
void Gemma4Audio::attend(const std::vector<uint8_t>& valid) {
  const int64_t H = s_.n_head, hd = s_.head_dim, w = s_.d, n = n_;
  att_.assign(n * w, 0.0f);
  pool_.run([&](int ith, int nth) {
    float sc[kWindow];
    int64_t q0, q1;
    split_range(n, ith, nth, &q0, &q1);
    for (int64_t i = q0; i < q1; ++i) {
      const int64_t r = i % kChunk, base = i - r - kPast;
      for (int64_t h = 0; h < H; ++h) {
        const float* qi = q_.data() + i * w + h * hd;
        float mx = -ClampedLinear::kInf;
        for (int64_t s = 0; s < kWindow; ++s) {
          const int64_t j = base + s, c = s - r;
          const bool visible = j >= 0 && j < n && valid[j] && i - j >= 0 && i - j < kLeft;
          if (visible) {
            const float ac = dot_lanes(qi, k_.data() + j * w + h * hd, hd);
            const float bd = c >= 0 && c < kRel ? dot_lanes(qi, rel_.data() + c * w + h * hd, hd) : 0.0f;
            sc[s] = std::tanh((ac + bd) / kCap) * kCap;
          } else {
            sc[s] = kInvalid;
          }
          mx = std::max(mx, sc[s]);
        }
        float sum = 0.0f;
        for (float& x : sc) sum += (x = std::exp(x - mx));
        float* o = att_.data() + i * w + h * hd;
        for (int64_t s = 0; s < kWindow; ++s) {
          const int64_t j = base + s;
          const float p = sc[s] / sum;
          if (j < 0 || j >= n || p == 0.0f) continue;
          const float* vj = v_.data() + j * w + h * hd;
          for (int64_t e = 0; e < hd; ++e) o[e] += p * vj[e];
        }
      }
    }
  });
}

// x += attn_post_norm(clip(post(attention(attn_pre_norm(clip(x)))))).
void Gemma4Audio::attention_block(const AudioLayer& L, const std::vector<uint8_t>& valid) {
  const int64_t d = s_.d, n = n_, hd = s_.head_dim;
  clip_norm(L.attn_pre, n);
  q_.resize(n * d), k_.resize(n * d), v_.resize(n * d);
  run(L.q, a_.data(), n, q_.data());
  run(L.k, a_.data(), n, k_.data());
  run(L.v, a_.data(), n, v_.data());
  const float q_scale = static_cast<float>(std::pow(static_cast<double>(hd), -0.5) / std::log(2.0));
  const float k_scale = static_cast<float>(std::log(1.0 + std::exp(1.0)) / std::log(2.0));
  const bool k_dim = !L.k_dim_scale.empty();
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0 * d; i < i1 * d; i += hd) {  // one head's slice at a time
      float *q = q_.data() + i, *k = k_.data() + i;
      for (int64_t e = 0; e < hd; ++e) q[e] = q[e] * q_scale * L.q_dim_scale[e];
      for (int64_t e = 0; e < hd; ++e) k[e] = k[e] * k_scale;
      if (k_dim)
        for (int64_t e = 0; e < hd; ++e) k[e] *= L.k_dim_scale[e];
    }
  });
  rel_.resize(static_cast<size_t>(kRel) * d);
  L.k_rel.run(pool_, pos_.data(), kRel, rel_.data(), scratch_, &isa_);
  attend(valid);
  run(L.o, att_.data(), n, a_.data());
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      clip(a_.data() + i * d, d);
      ops_.add_rms_norm(h_.data() + i * d, a_.data() + i * d, L.attn_post.data(), d, kEps);
    }
  });
}

// x += pw2(silu(conv_post(clip(causal_depthwise5(glu(pw1(conv_pre(x)))))))).
void Gemma4Audio::light_conv(const AudioLayer& L, int64_t n) {
  const int64_t d = s_.d;
  a_.resize(n * d);
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) ops_.rms_norm(h_.data() + i * d, L.conv_pre.data(), a_.data() + i * d, d, kEps);
  });
  g_.resize(n * 2 * d);
  run(L.pw1, a_.data(), n, g_.data());
  u_.resize(n * d);
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      ops_.sigmoid_mul(g_.data() + i * 2 * d, g_.data() + i * 2 * d + d, u_.data() + i * d, d);
  });
  // Causal depthwise convolution (left padding kKernel − 1): row i reads GLU rows i−4 … i, all
  // written above, so its rows split like the rest. Per output: 0 + Σ_k dw[k]·u[i−4+k], k rising.
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* o = a_.data() + i * d;
      std::fill_n(o, d, 0.0f);
      for (int k = 0; k < kKernel; ++k) {
        const int64_t t = i - (kKernel - 1) + k;
        if (t < 0) continue;
        const float* w = L.dw.data() + k * d;
        const float* u = u_.data() + t * d;
        for (int64_t j = 0; j < d; ++j) o[j] += w[j] * u[j];
      }
      clip(o, d);
      ops_.rms_norm(o, L.conv_post.data(), o, d, kEps);
      ops_.sigmoid_mul(o, o, o, d);  // SiLU
    }
  });
  run(L.pw2, a_.data(), n, u_.data());
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0 * d; i < i1 * d; ++i) h_[i] = h_[i] + u_[i];
  });
}

// One conformer layer over h_ (docs/spec/gemma4.md §10.5 step 3).
void Gemma4Audio::layer(const AudioLayer& L, const std::vector<uint8_t>& valid) {
  const int64_t d = s_.d, n = n_;
  ffn(L.ffn1, n);
  attention_block(L, valid);
  light_conv(L, n);
  ffn(L.ffn2, n);
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      clip(h_.data() + i * d, d);
      ops_.rms_norm(h_.data() + i * d, L.out_norm.data(), h_.data() + i * d, d, kEps);
    }
  });
}

// output_proj (+bias) at every position, then the valid ones through the projector:
// weightless RMSNorm and mm.a.input_projection into `out`.
void Gemma4Audio::project(const std::vector<uint8_t>& valid, float* out) {
  const int64_t n = n_, od = s_.out_d;
  g_.resize(n * od);
  out_proj_.run(pool_, h_.data(), n, g_.data(), scratch_, &isa_);
  for_rows(pool_, n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = 0; j < od; ++j) g_[i * od + j] += out_bias_[j];
  });
  tap("a_out", -1, g_.data(), n, od);
  a_.clear();
  for (int64_t i = 0; i < n; ++i)
    if (valid[i]) a_.insert(a_.end(), g_.begin() + i * od, g_.begin() + (i + 1) * od);
  const int64_t m = static_cast<int64_t>(a_.size()) / od;
  for_rows(pool_, m, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) ops_.rms_norm(a_.data() + i * od, nullptr, a_.data() + i * od, od, kEps);
  });
  mm_proj_.run(pool_, a_.data(), m, out, scratch_, &isa_);
  tap("a_soft", -1, out, m, s_.text_d);
}

void Gemma4Audio::encode(const float* mel, const uint8_t* mask, int32_t frames, float* out) {
  if (frames <= 0) fail("audio clip of %d frames: nothing to encode", frames);
  if (frames > kMaxFrames)
    fail("audio clip of %d frames (%.1f s) is too long: one encode takes at most %d (5 minutes)", frames,
         frames / 100.0, kMaxFrames);
  const Subsampled sub = subsample_masks(mask, frames);
  conv0(mel, sub, frames);
  conv1_and_project(sub);
  tap("a_sscp", -1, h_.data(), n_, s_.d);
  for (int il = 0; il < s_.n_layer; ++il) {
    layer(layers_[il], sub.m2);
    tap("a_l_out", il, h_.data(), n_, s_.d);
  }
  project(sub.m2, out);
}

}  // namespace

std::unique_ptr<AudioEncoder> load_audio(const gguf::GgufFile& f, const LoadOptions& opt) {
  if (!opt.pool) fail("load_audio: LoadOptions::pool is required");
  return std::make_unique<Gemma4Audio>(f, opt);
}

}  // namespace sluice::models::gemma4

namespace sluice::models {

std::unique_ptr<AudioEncoder> load_audio_encoder(const gguf::GgufFile& f, const LoadOptions& opt) {
  return gemma4::load_audio(f, opt);
}

}  // namespace sluice::models
