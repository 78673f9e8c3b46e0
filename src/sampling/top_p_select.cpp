// Top-p's cut without sorting the whole candidate list. The sorting rule (Sampler's
// cut_top_p_sorting) puts ranks in order in growing steps until the running mass reaches
// top_p: on a wide nucleus (a flat tail, no small top-k) that is most of a 262,144-entry sort,
// about 14 ms. Here:
//   1. one pass over the list (id order): each weight (the same bits as the chain's), the
//      total in id order (the same sum, the same bits, as the sorting rule's), and a histogram
//      of count and mass over buckets of (mx − l), monotone in the logit;
//   2. the first buckets whose mass passes top_p (with a margin far above the rounding of
//      either sum) hold the nucleus: they are moved out, the rest stay behind in id order;
//   3. those survivors are sorted by a stable radix sort on the logit's bits (from id order,
//      so equal logits stay in id order: the sorting rule's order exactly);
//   4. the running mass is summed over them in that order, as the sorting rule sums it.
// The last step is the sorting rule's own loop over the same ranks in the same order, so the
// cut is the same; the histogram only decides how many ranks get sorted. Were the margin ever
// too small, the caller goes on with the sorting rule over the rest, which all rank lower.
#include "sampling/top_p_select.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>

#include "sampling/weights.h"

namespace sluice::sampling_detail {
namespace {

constexpr uint32_t kBuckets = 2048;
constexpr int32_t kChunk = 1024;  // weights a block at a time, 8 KB of stack

// Bucket of logit l: floor((mx − l) · scale), capped at the last bucket. Subtraction,
// multiplication by a positive number, min and truncation are each monotone, so a higher
// logit never lands in a later bucket and equal logits share one.
struct Bucketing {
  float mx;
  float scale;
  // Four at a time in vector lanes (a select, not a branch per entry).
  I4 operator()(F4 l) const {
    const F4 x = (mx - l) * scale, cap = F4{} + static_cast<float>(kBuckets - 1);
    return __builtin_convertvector(x < cap ? x : cap, I4);
  }
  // Whether l's bucket is at most `last` (-1 in a lane where it is): x < last + 1, as x >= 0.
  I4 within(F4 l, int32_t last) const {
    if (last >= static_cast<int32_t>(kBuckets) - 1) return I4{} - 1;
    return (mx - l) * scale < static_cast<float>(last + 1);
  }
};

// The buckets span the list's logits (about), or as far as a weight is above 0 (e^−87: exp_nonpos).
Bucketing make_bucketing(const std::vector<TokenProb>& c, size_t n, float mx, float inv_t) {
  // The lowest logit of a sample of the list: one below it lands in the last bucket, which
  // only makes the buckets a little less even.
  const size_t stride = std::max<size_t>(1, n / 4096);
  float low = mx;
  for (size_t i = 0; i < n; i += stride) low = std::min(low, c[i].prob);
  const double span = std::min(static_cast<double>(mx) - low, 88.0 / inv_t);
  const double scale = span > 0 ? kBuckets / span : 1.0;
  return {mx, static_cast<float>(std::min(scale, 1e30))};
}

// Sort key: ascending in the order "higher logit first"; -0 and +0 equal, as they compare.
inline uint32_t rank_key(float l) {
  const uint32_t u = std::bit_cast<uint32_t>(l + 0.0f);                            // -0 + 0 = +0
  const uint32_t negative = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31);  // all ones or 0
  return ~(u ^ (negative | 0x80000000u));  // ascending bits: flip all of a negative, the sign of a positive
}

struct Histogram {
  struct Bin {
    double mass;
    uint32_t count;
  };
  Bin bin[kBuckets];  // a bin's mass and count in one cache line
};

// The logits of c[i0 .. i0 + len) into lb and their weights (the chain's bits) into wb.
void chunk_weights(const std::vector<TokenProb>& c, size_t i0, int32_t len, float mx, float inv_t, float* lb,
                   float* wb) {
  for (int32_t j = 0; j < len; ++j) lb[j] = c[i0 + static_cast<size_t>(j)].prob;
  int32_t j = block_weights(lb, mx, inv_t, wb, len);
  for (; j < len; ++j) wb[j] = weight_of(lb[j], mx, inv_t);
}

// Step 1: the weights of c[0 .. n) in blocks, their total in list order, and the histogram.
double weigh(const std::vector<TokenProb>& c, size_t n, float mx, float inv_t, const Bucketing& bucket, Histogram& h) {
  std::fill(h.bin, h.bin + kBuckets, Histogram::Bin{0.0, 0});
  alignas(64) float lb[kChunk + 4];
  alignas(64) float wb[kChunk];
  alignas(64) int32_t bb[kChunk + 4];
  double total = 0;
  for (size_t i0 = 0; i0 < n; i0 += kChunk) {
    const int32_t len = static_cast<int32_t>(std::min<size_t>(kChunk, n - i0));
    chunk_weights(c, i0, len, mx, inv_t, lb, wb);
    for (int32_t j = len; j % 4 != 0; ++j) lb[j] = mx;  // a partial last block's lanes: never counted
    for (int32_t j = 0; j < len; j += 4) {
      const I4 b = bucket(load4(lb + j));
      std::memcpy(bb + j, &b, sizeof b);
    }
    for (int32_t j = 0; j < len; ++j) {
      total += wb[j];
      ++h.bin[bb[j]].count;
      h.bin[bb[j]].mass += wb[j];
    }
  }
  return total;
}

// Step 2's split: the entries whose bucket is at most `last` (m of them) to s[1 .. m], the
// rest to c[m .. n), both in id order, in one backward pass without a branch per entry: each
// entry is written to both sides and only its own side's position moves (a write to the other
// side lands on a slot already read, or on s[0], or on one the next entry overwrites).
void split(std::vector<TokenProb>& c, size_t n, size_t m, const Bucketing& bucket, int32_t last, TokenProb* s) {
  size_t sp = m, np = n;
  const auto place = [&](size_t i, int32_t lane_in) {  // lane_in: -1 for a survivor, 0 for the rest
    const TokenProb e = c[i];
    const size_t in = lane_in != 0 ? 1 : 0;
    s[sp] = e;
    c[np - 1] = e;
    sp -= in;
    np -= 1 - in;
  };
  size_t i = n;
  for (; i % 4 != 0; --i) place(i - 1, bucket.within(F4{} + c[i - 1].prob, last)[0]);
  for (; i > 0; i -= 4) {  // whole blocks of four, their sides in vector lanes
    const I4 in = bucket.within(F4{c[i - 4].prob, c[i - 3].prob, c[i - 2].prob, c[i - 1].prob}, last);
    for (int k = 3; k >= 0; --k) place(i - 4 + static_cast<size_t>(k), in[k]);
  }
}

// Step 3: the stable LSD radix sort of src[0 .. m) by rank_key into dst (src is scratch),
// digits of up to 13 bits over the keys' spread only (a nucleus spans a few binades: 2
// digits), every digit's counts taken in one read.
void radix_sort(TokenProb* src, TokenProb* dst, size_t m, uint32_t kmin, uint32_t kmax) {
  constexpr int kMaxPasses = 3, kMaxDigit = 13;  // 3 digits of 13 bits cover 32
  const int bits = kmax > kmin ? 32 - std::countl_zero(kmax - kmin) : 0;
  const int passes = (bits + kMaxDigit - 1) / kMaxDigit;
  const int digit = passes > 0 ? (bits + passes - 1) / passes : 0;
  const uint32_t mask = (1u << digit) - 1;
  static_assert(kMaxPasses * kMaxDigit >= 32);
  uint32_t offset[kMaxPasses][1u << kMaxDigit];  // only the digits in use are cleared
  for (int p = 0; p < passes; ++p) std::fill(offset[p], offset[p] + (mask + 1), 0u);
  for (size_t i = 0; i < m; ++i) {
    const uint32_t k = rank_key(src[i].prob) - kmin;
    for (int p = 0; p < passes; ++p) ++offset[p][(k >> (p * digit)) & mask];
  }
  TokenProb* out = dst;
  for (int p = 0; p < passes; ++p) {
    uint32_t* o = offset[p];
    uint32_t sum = 0;
    for (uint32_t d = 0; d <= mask; ++d) sum += std::exchange(o[d], sum);
    const int shift = p * digit;
    for (size_t i = 0; i < m; ++i) dst[o[((rank_key(src[i].prob) - kmin) >> shift) & mask]++] = src[i];
    std::swap(src, dst);
  }
  if (src != out) std::copy(src, src + m, out);
}

// Step 4: the running mass over c[0 .. m) (in order) until it reaches top_p, weights in blocks.
TopPCut walk(const std::vector<TokenProb>& c, size_t m, float mx, float inv_t, float top_p, double total) {
  alignas(64) float lb[kChunk];
  alignas(64) float wb[kChunk];
  double cum = 0;
  for (size_t i0 = 0; i0 < m; i0 += kChunk) {
    const int32_t len = static_cast<int32_t>(std::min<size_t>(kChunk, m - i0));
    chunk_weights(c, i0, len, mx, inv_t, lb, wb);
    for (int32_t j = 0; j < len; ++j) {
      cum += wb[j] / total;
      if (cum >= top_p) return {i0 + static_cast<size_t>(j) + 1, i0 + static_cast<size_t>(j) + 1, cum, total};
    }
  }
  return {0, m, cum, total};
}

}  // namespace

TopPCut select_top_p(std::vector<TokenProb>& c, size_t n, float mx, float inv_t, float top_p,
                     std::vector<TokenProb>& spare) {
  const Bucketing bucket = make_bucketing(c, n, mx, inv_t);
  Histogram h;
  const double total = weigh(c, n, mx, inv_t, bucket, h);
  // Step 2: the buckets down to where the mass passes top_p. Both the histogram's sums and
  // the running mass are within ~n · 2^-53 (relative) of the exact mass; 1e-9 is far above.
  const double need = static_cast<double>(top_p) * total * (1.0 + 1e-9);
  int32_t last = kBuckets - 1;
  size_t m = 0;
  double acc = 0;
  for (int32_t b = 0; b < static_cast<int32_t>(kBuckets); ++b) {
    acc += h.bin[b].mass;
    m += h.bin[b].count;
    if (acc >= need) {
      last = b;
      break;
    }
  }
  if (spare.capacity() < n + 1) spare.reserve(n + 1);  // once, to the list's size: no growth in steps
  spare.resize(m + 1);
  TokenProb* s = spare.data();
  split(c, n, m, bucket, last, s);
  float low[4] = {mx, mx, mx, mx};  // the lowest survivor (its key is the largest): four chains
  for (size_t i = 1; i <= m; ++i) low[i & 3] = std::min(low[i & 3], s[i].prob);
  const float lowest = std::min(std::min(low[0], low[1]), std::min(low[2], low[3]));
  radix_sort(s + 1, c.data(), m, rank_key(mx), rank_key(lowest));
  return walk(c, m, mx, inv_t, top_p, total);
}

}  // namespace sluice::sampling_detail
