// Gemma 4's image preprocessing, as transformers' Gemma4ImageProcessor computes it
// (docs/spec/gemma4.md §6.1): an aspect-preserving resize to the soft-token budget with both
// sides floored to a multiple of 48 (patch 16 × pooling 3), torchvision's antialiased bicubic
// resize on 8-bit samples, rescale by 1/255, and 16×16 patches.
#pragma once

#include <cstdint>
#include <vector>

#include "media/image.h"

namespace sluice::media {

inline constexpr int kPatchSize = 16;
inline constexpr int kPoolKernel = 3;
inline constexpr int kPatchValues = kPatchSize * kPatchSize * 3;  // 768
inline constexpr int kDefaultSoftTokens = 280;

// The budgets transformers accepts: 70, 140, 280, 560, 1120.
bool is_supported_budget(int max_soft_tokens);

struct ImageSize {
  int32_t height = 0, width = 0;
};

// The size an image of `height`×`width` is resized to (get_aspect_ratio_preserving_size).
// Throws sluice::Error for an unsupported budget or a zero-sized image.
ImageSize fit_to_budget(int32_t height, int32_t width, int max_soft_tokens);

// torchvision's resize(antialias=True, BICUBIC) of a uint8 image: the separable PIL-style
// filter (Keys cubic, a = −0.5, support widened by the downscale factor), weights in double
// rounded to int16 fixed point, the width pass first, 8-bit rounding between and after the
// passes. Bit-identical to torch's CPU kernels.
RgbImage resize_bicubic_aa(const RgbImage& in, int32_t out_height, int32_t out_width);

struct PreprocessedImage {
  int32_t height = 0, width = 0;         // after the resize
  int32_t patches_y = 0, patches_x = 0;  // height / 16, width / 16
  // [patches_y·patches_x][768]: patches in raster order, each [py][px][channel] of x/255
  // (the model maps them to 2x − 1). Patch i sits at column i % patches_x, row i / patches_x.
  std::vector<float> patches;
  int64_t n_patches() const { return int64_t{patches_y} * patches_x; }
  int32_t n_soft_tokens() const { return patches_y * patches_x / (kPoolKernel * kPoolKernel); }
};

PreprocessedImage preprocess_image(const RgbImage& img, int max_soft_tokens = kDefaultSoftTokens);

}  // namespace sluice::media
