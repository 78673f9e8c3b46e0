#include "chat/media_expand.h"

#include <algorithm>

#include "base/error.h"

namespace sluice::chat {

size_t count_placeholders(std::span<const int32_t> ids, const MediaMarkers& m) {
  return static_cast<size_t>(std::count(ids.begin(), ids.end(), m.placeholder));
}

int64_t expanded_length(size_t n_ids, std::span<const int32_t> counts) {
  int64_t n = static_cast<int64_t>(n_ids);
  for (int32_t c : counts) n += int64_t{c} + 1;  // the placeholder becomes begin + c + end
  return n;
}

ExpandedPrompt expand_placeholders(std::span<const int32_t> ids, const MediaMarkers& m,
                                   std::span<const int32_t> counts) {
  const size_t have = count_placeholders(ids, m);
  if (have != counts.size())
    fail("the prompt has %zu image placeholder%s for %zu image%s", have, have == 1 ? "" : "s", counts.size(),
         counts.size() == 1 ? "" : "s");
  ExpandedPrompt out;
  const auto n = static_cast<size_t>(expanded_length(ids.size(), counts));
  out.ids.reserve(n);
  out.soft_row.reserve(n);
  size_t item = 0;
  int64_t row = 0;
  for (int32_t t : ids) {
    if (t != m.placeholder) {
      out.ids.push_back(t), out.soft_row.push_back(-1);
      continue;
    }
    out.ids.push_back(m.begin), out.soft_row.push_back(-1);
    for (int32_t i = 0; i < counts[item]; ++i) out.ids.push_back(m.placeholder), out.soft_row.push_back(row++);
    out.ids.push_back(m.end), out.soft_row.push_back(-1);
    ++item;
  }
  return out;
}

}  // namespace sluice::chat
