#include "media/preprocess.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace sluice::media {

bool is_supported_budget(int t) { return t == 70 || t == 140 || t == 280 || t == 560 || t == 1120; }

ImageSize fit_to_budget(int32_t height, int32_t width, int max_soft_tokens) {
  if (!is_supported_budget(max_soft_tokens))
    fail("image token budget %d is not one of 70, 140, 280, 560, 1120", max_soft_tokens);
  if (height <= 0 || width <= 0) fail("cannot resize a %dx%d image", width, height);
  // The same double arithmetic as transformers: factor = sqrt(target_px / total_px).
  const int64_t max_patches = int64_t{max_soft_tokens} * kPoolKernel * kPoolKernel;
  const int64_t target_px = max_patches * kPatchSize * kPatchSize;
  const double factor = std::sqrt(static_cast<double>(target_px) / static_cast<double>(int64_t{height} * width));
  const int64_t side = kPatchSize * kPoolKernel;
  int64_t h = static_cast<int64_t>(std::floor(factor * height / side)) * side;
  int64_t w = static_cast<int64_t>(std::floor(factor * width / side)) * side;
  if (h == 0 && w == 0) fail("a %dx%d image resizes to 0x0", width, height);
  const int64_t max_side = max_patches / (kPoolKernel * kPoolKernel) * side;
  if (h == 0) {
    h = side;
    w = std::min(static_cast<int64_t>(std::floor(static_cast<double>(width) / height)) * side, max_side);
  } else if (w == 0) {
    w = side;
    h = std::min(static_cast<int64_t>(std::floor(static_cast<double>(height) / width)) * side, max_side);
  }
  if (h * w > target_px) fail("a %dx%d image resizes past %lld patches", width, height, (long long)max_patches);
  return {static_cast<int32_t>(h), static_cast<int32_t>(w)};
}

namespace {

// One axis of the resample: output i reads `count[i]` inputs from `first[i]` with int16
// weights taps[i·width ..], fixed point with `precision` fractional bits.
struct AxisTaps {
  std::vector<int64_t> first, count;
  std::vector<int32_t> taps;
  int width = 0;
  unsigned precision = 0;
};

double keys_cubic(double x) {  // a = −0.5, in torch's evaluation order
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

AxisTaps axis_taps(int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  AxisTaps a;
  a.width = static_cast<int>(std::ceil(support)) * 2 + 1;
  a.first.resize(out), a.count.resize(out);
  std::vector<double> w(static_cast<size_t>(out) * a.width, 0.0);
  double wt_max = 0.0;
  for (int64_t i = 0; i < out; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    const int64_t xsize = std::clamp(std::min(static_cast<int64_t>(center + support + 0.5), in) - xmin, int64_t{0},
                                     static_cast<int64_t>(a.width));
    double* wi = &w[static_cast<size_t>(i) * a.width];
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      wi[j] = keys_cubic((static_cast<double>(j + xmin) - center + 0.5) * invscale);
      total += wi[j];
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < xsize; ++j) wi[j] /= total, wt_max = std::max(wt_max, wi[j]);
    }
    a.first[i] = xmin, a.count[i] = xsize;
  }
  // The largest precision under which the largest weight, doubled, still fits int16.
  for (a.precision = 0; a.precision < 22; ++a.precision) {
    if (static_cast<int>(0.5 + wt_max * (1 << (a.precision + 1))) >= (1 << 15)) break;
  }
  a.taps.resize(w.size());
  for (size_t j = 0; j < w.size(); ++j) {
    const double v = w[j] * (1 << a.precision);
    a.taps[j] = static_cast<int16_t>(v < 0 ? -0.5 + v : 0.5 + v);
  }
  return a;
}

uint8_t convolve(const AxisTaps& a, int64_t i, const uint8_t* src, int64_t stride) {
  int32_t acc = a.precision > 0 ? 1 << (a.precision - 1) : 0;
  const int32_t* t = &a.taps[static_cast<size_t>(i) * a.width];
  const uint8_t* s = src + a.first[i] * stride;
  for (int64_t j = 0; j < a.count[i]; ++j) acc += t[j] * s[j * stride];
  return static_cast<uint8_t>(std::clamp(acc >> a.precision, 0, 255));
}

RgbImage resize_width(const RgbImage& in, int32_t out_w) {
  const AxisTaps a = axis_taps(in.width, out_w);
  RgbImage out{out_w, in.height, std::vector<uint8_t>(static_cast<size_t>(out_w) * in.height * 3)};
  for (int32_t y = 0; y < in.height; ++y) {
    for (int32_t x = 0; x < out_w; ++x) {
      for (int c = 0; c < 3; ++c) out.row(y)[x * 3 + c] = convolve(a, x, in.row(y) + c, 3);
    }
  }
  return out;
}

RgbImage resize_height(const RgbImage& in, int32_t out_h) {
  const AxisTaps a = axis_taps(in.height, out_h);
  RgbImage out{in.width, out_h, std::vector<uint8_t>(static_cast<size_t>(in.width) * out_h * 3)};
  const int64_t stride = int64_t{in.width} * 3;
  for (int32_t y = 0; y < out_h; ++y) {
    for (int64_t k = 0; k < stride; ++k) out.row(y)[k] = convolve(a, y, in.pixels.data() + k, stride);
  }
  return out;
}

}  // namespace

RgbImage resize_bicubic_aa(const RgbImage& in, int32_t out_height, int32_t out_width) {
  if (out_height <= 0 || out_width <= 0 || in.width <= 0 || in.height <= 0)
    fail("cannot resize a %dx%d image to %dx%d", in.width, in.height, out_width, out_height);
  if (out_width == in.width && out_height == in.height) return in;
  if (out_width == in.width) return resize_height(in, out_height);
  RgbImage mid = resize_width(in, out_width);
  return out_height == in.height ? mid : resize_height(mid, out_height);
}

PreprocessedImage preprocess_image(const RgbImage& img, int max_soft_tokens) {
  const ImageSize size = fit_to_budget(img.height, img.width, max_soft_tokens);
  const RgbImage r = resize_bicubic_aa(img, size.height, size.width);
  PreprocessedImage p;
  p.height = r.height, p.width = r.width;
  p.patches_y = r.height / kPatchSize, p.patches_x = r.width / kPatchSize;
  p.patches.resize(static_cast<size_t>(p.n_patches()) * kPatchValues);
  const float inv255 = static_cast<float>(1.0 / 255.0);  // torch: float32 tensor × the scalar as float32
  float* dst = p.patches.data();
  for (int32_t gy = 0; gy < p.patches_y; ++gy) {
    for (int32_t gx = 0; gx < p.patches_x; ++gx) {
      for (int py = 0; py < kPatchSize; ++py) {
        const uint8_t* src = r.row(gy * kPatchSize + py) + static_cast<size_t>(gx) * kPatchSize * 3;
        for (int k = 0; k < kPatchSize * 3; ++k) *dst++ = static_cast<float>(src[k]) * inv255;
      }
    }
  }
  return p;
}

}  // namespace sluice::media
