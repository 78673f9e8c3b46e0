#include "kernels/tuning.h"

#include "base/error.h"

namespace sluice::kernels {

namespace {
Tuning g_tuning;
}  // namespace

std::string tuning_error(const Tuning& t) {
  for (int f = 0; f < kPackedFormatCount; ++f)
    if (t.weight_ahead[f] < 0 || t.weight_ahead[f] > kMaxWeightAhead || t.weight_ahead[f] % 64 != 0)
      return strfmt("weight_ahead of %s must be a multiple of 64 in [0, %d], got %d",
                    packed_format_name(static_cast<PackedFormat>(f)), kMaxWeightAhead, t.weight_ahead[f]);
  if (t.act_ahead < 0 || t.act_ahead > kMaxActAhead)
    return strfmt("act_ahead must be in [0, %d], got %d", kMaxActAhead, t.act_ahead);
  if (t.streams < 1 || t.streams > kMaxStreams)
    return strfmt("streams must be in [1, %d], got %d", kMaxStreams, t.streams);
  if (t.interleave < 1 || t.interleave > kMaxInterleave)
    return strfmt("interleave must be in [1, %d], got %d", kMaxInterleave, t.interleave);
  if (t.split_div < 1 || t.split_div > kMaxSplitDiv)
    return strfmt("split_div must be in [1, %d], got %d", kMaxSplitDiv, t.split_div);
  return {};
}

std::string describe_tuning(const Tuning& t) {
  std::string s = strfmt("streams %dx%d, act_ahead %d, split 1/%d, weight_ahead", t.streams, t.interleave, t.act_ahead,
                         t.split_div);
  for (PackedFormat f : {PackedFormat::kQ4_0, PackedFormat::kQ5_0, PackedFormat::kQ8_0, PackedFormat::kQ6_K})
    s += strfmt(" %s:%d", packed_format_name(f), t.weight_ahead[static_cast<int>(f)]);
  return s;
}

const Tuning& tuning() { return g_tuning; }

void set_tuning(const Tuning& t) {
  const std::string why = tuning_error(t);
  if (!why.empty()) fail("tuning: %s", why.c_str());
  g_tuning = t;
}

}  // namespace sluice::kernels
