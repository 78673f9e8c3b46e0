#include "media/audio_features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <numbers>

namespace sluice::media {

namespace {

using cplx = std::complex<double>;
constexpr int kBins = kMelFftLength / 2 + 1;   // 257
constexpr int kHalf = kMelFftLength / 2;       // the complex FFT's size: 256
constexpr int kUnfold = kMelFrameLength + 1;   // transformers unfolds 321 and keeps 320
constexpr int kPadLeft = kMelFrameLength / 2;  // "semicausal": 160 zeros in front
constexpr int64_t kPadMultiple = 128;          // pad_to_multiple_of
constexpr double kMelFloor = 1e-3;

// Python's floor division for a positive divisor.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// A 512-point real FFT in double: the even/odd samples packed as one 256-point complex FFT
// (iterative radix 2, twiddles from cos/sin of the exact angles), then split into the 257
// bins. Rounding is ~1e-16 relative, far below the 1e-5 the features are held to.
class RealFft512 {
 public:
  RealFft512() {
    for (int j = 0; j < kHalf; ++j) {
      const double a = -2.0 * std::numbers::pi * j / kHalf;
      tw_half_[j] = cplx(std::cos(a), std::sin(a));
    }
    for (int k = 0; k < kBins; ++k) {
      const double a = -2.0 * std::numbers::pi * k / kMelFftLength;
      tw_full_[k] = cplx(std::cos(a), std::sin(a));
    }
    int bits = 0;
    while ((1 << bits) < kHalf) ++bits;
    for (int i = 0; i < kHalf; ++i) {
      int r = 0;
      for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
      rev_[i] = r;
    }
  }

  // x: 512 real samples; out: |X[k]| for the 257 bins.
  void magnitude(const double* x, double* out) const {
    std::array<cplx, kHalf> z;
    for (int n = 0; n < kHalf; ++n) z[rev_[n]] = cplx(x[2 * n], x[2 * n + 1]);
    for (int len = 2; len <= kHalf; len <<= 1) {
      const int step = kHalf / len;
      for (int s = 0; s < kHalf; s += len)
        for (int j = 0; j < len / 2; ++j) {
          const cplx t = tw_half_[j * step] * z[s + j + len / 2];
          z[s + j + len / 2] = z[s + j] - t;
          z[s + j] += t;
        }
    }
    // X[k] = E[k] + w^k O[k], with E = (Z[k] + conj Z[-k]) / 2 and O = (Z[k] − conj Z[-k]) / 2i.
    for (int k = 0; k < kBins; ++k) {
      const cplx a = z[k % kHalf], b = std::conj(z[(kHalf - k) % kHalf]);
      const cplx even = 0.5 * (a + b), odd = cplx(0.0, -0.5) * (a - b);
      out[k] = std::abs(even + tw_full_[k] * odd);
    }
  }

 private:
  std::array<cplx, kHalf> tw_half_;
  std::array<cplx, kBins> tw_full_;
  std::array<int, kHalf> rev_;
};

const RealFft512& fft() {
  static const RealFft512 f;
  return f;
}

// transformers' window_function(320): numpy.hanning(321) without its last point, i.e. the
// periodic Hann 0.5 − 0.5·cos(2πn/320), computed as numpy does and cast to float32 as the
// extractor stores it.
const std::array<double, kMelFrameLength>& hann_window() {
  static const std::array<double, kMelFrameLength> w = [] {
    std::array<double, kMelFrameLength> v{};
    for (int n = 0; n < kMelFrameLength; ++n)
      v[n] = static_cast<float>(0.5 + 0.5 * std::cos(std::numbers::pi * (2 * n - kMelFrameLength) / kMelFrameLength));
    return v;
  }();
  return w;
}

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// Each filter's nonzero bins [first, last), so the mel sum skips the zeros.
struct FilterSpan {
  int first = 0, last = 0;
};
const std::array<FilterSpan, kMelBins>& filter_spans() {
  static const std::array<FilterSpan, kMelBins> spans = [] {
    std::array<FilterSpan, kMelBins> s{};
    const std::vector<double>& f = mel_filters();
    for (int m = 0; m < kMelBins; ++m) {
      int first = kBins, last = 0;
      for (int k = 0; k < kBins; ++k)
        if (f[static_cast<size_t>(k) * kMelBins + m] != 0.0) first = std::min(first, k), last = k + 1;
      s[m] = {std::min(first, last), last};
    }
    return s;
  }();
  return spans;
}

// One frame: 320 samples from `padded` at `start` (zeros past the end), windowed, rfft 512,
// magnitude, mel, log(mel + 1e-3) → 128 floats.
void frame_features(std::span<const float> clip, int64_t start, float* out) {
  std::array<double, kMelFftLength> x{};
  const std::array<double, kMelFrameLength>& w = hann_window();
  for (int j = 0; j < kMelFrameLength; ++j) {
    const int64_t i = start + j - kPadLeft;  // index into the clip; outside it the pads are 0
    const double v = (i >= 0 && i < static_cast<int64_t>(clip.size())) ? clip[static_cast<size_t>(i)] : 0.0;
    x[j] = v * w[j];
  }
  std::array<double, kBins> mag;
  fft().magnitude(x.data(), mag.data());
  const std::vector<double>& f = mel_filters();
  const std::array<FilterSpan, kMelBins>& spans = filter_spans();
  for (int m = 0; m < kMelBins; ++m) {
    double mel = 0.0;
    for (int k = spans[m].first; k < spans[m].last; ++k) mel += mag[k] * f[static_cast<size_t>(k) * kMelBins + m];
    out[m] = static_cast<float>(std::log(mel + kMelFloor));
  }
}

}  // namespace

const std::vector<double>& mel_filters() {
  // transformers' mel_filter_bank: 130 points evenly spaced in HTK mel between 0 and 8000 Hz,
  // triangles over the bin frequencies linspace(0, 8000, 257): min(rising, falling), floored at 0.
  static const std::vector<double> filters = [] {
    std::array<double, kMelBins + 2> hz{};
    const double lo = hz_to_mel(0.0), hi = hz_to_mel(8000.0);
    for (int i = 0; i < kMelBins + 2; ++i) {
      const double mel = i * ((hi - lo) / (kMelBins + 1)) + lo;  // numpy.linspace: i·step + start
      hz[i] = mel_to_hz(i == kMelBins + 1 ? hi : mel);
    }
    std::vector<double> f(static_cast<size_t>(kBins) * kMelBins);
    for (int k = 0; k < kBins; ++k) {
      const double bin_hz = 8000.0 * k / (kBins - 1);
      for (int m = 0; m < kMelBins; ++m) {
        const double down = -(hz[m] - bin_hz) / (hz[m + 1] - hz[m]);
        const double up = (hz[m + 2] - bin_hz) / (hz[m + 2] - hz[m + 1]);
        f[static_cast<size_t>(k) * kMelBins + m] = std::max(0.0, std::min(down, up));
      }
    }
    return f;
  }();
  return filters;
}

int64_t mel_frame_count(int64_t n) {
  n = std::clamp<int64_t>(n, 0, kAudioMaxSamples);
  const int64_t padded = (n + kPadMultiple - 1) / kPadMultiple * kPadMultiple;
  return std::max<int64_t>(0, floor_div(padded + kPadLeft - kUnfold, kMelHop) + 1);
}

int64_t mel_valid_frames(int64_t n) {
  n = std::clamp<int64_t>(n, 0, kAudioMaxSamples);
  // Frame i's window ends at padded index i·160 + 320, i.e. clip sample i·160 + 160.
  if (n <= kMelHop) return 0;
  return std::min(mel_frame_count(n), (n - kMelHop - 1) / kMelHop + 1);
}

int64_t audio_token_count(int64_t n) {
  const int64_t v = mel_valid_frames(n);
  const int64_t once = (v + 1) / 2;  // mask[::2] keeps the even frames of a valid prefix
  return (once + 1) / 2;
}

std::vector<AudioSegment> audio_segments(int64_t n_samples, AudioLayout layout) {
  n_samples = std::max<int64_t>(0, n_samples);
  if (layout == AudioLayout::kTruncate30s || n_samples <= kAudioMaxSamples)
    return {{0, std::min(n_samples, kAudioMaxSamples)}};
  std::vector<AudioSegment> segs;
  for (int64_t off = 0; off < n_samples; off += kAudioMaxSamples)
    segs.push_back({off, std::min(kAudioMaxSamples, n_samples - off)});
  return segs;
}

int64_t audio_token_count(int64_t n_samples, AudioLayout layout) {
  int64_t total = 0;
  for (const AudioSegment& s : audio_segments(n_samples, layout)) total += audio_token_count(s.count);
  return total;
}

LogMel log_mel(std::span<const float> samples) {
  const std::span<const float> clip = samples.first(
      static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(samples.size()), kAudioMaxSamples)));
  const int64_t n = static_cast<int64_t>(clip.size());
  LogMel out;
  out.frames = mel_frame_count(n);
  out.valid_frames = mel_valid_frames(n);
  out.values.assign(static_cast<size_t>(out.frames) * kMelBins, 0.0f);
  out.mask.assign(static_cast<size_t>(out.frames), 0);
  // Frame i reads the semicausally padded clip from i·160; samples past the clip are the zeros
  // of the pad to a multiple of 128 (only valid frames are computed: the rest are zeroed).
  for (int64_t i = 0; i < out.valid_frames; ++i) {
    out.mask[static_cast<size_t>(i)] = 1;
    frame_features(clip, i * kMelHop, &out.values[static_cast<size_t>(i) * kMelBins]);
  }
  return out;
}

std::vector<LogMel> audio_features(std::span<const float> samples, AudioLayout layout) {
  std::vector<LogMel> out;
  for (const AudioSegment& s : audio_segments(static_cast<int64_t>(samples.size()), layout))
    out.push_back(log_mel(samples.subspan(static_cast<size_t>(s.offset), static_cast<size_t>(s.count))));
  return out;
}

}  // namespace sluice::media
