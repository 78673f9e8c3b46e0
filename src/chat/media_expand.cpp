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

namespace {

// The kind whose placeholder `t` is, or -1.
int kind_of(int32_t t, std::span<const MediaKind> kinds) {
  for (size_t k = 0; k < kinds.size(); ++k)
    if (kinds[k].markers.placeholder == t) return static_cast<int>(k);
  return -1;
}

void check_counts(std::span<const int32_t> ids, const MediaKind& k) {
  const size_t have = count_placeholders(ids, k.markers);
  if (have != k.counts.size())
    fail("the prompt has %zu %s placeholder%s for %zu %s%s", have, k.noun, have == 1 ? "" : "s", k.counts.size(),
         k.noun, k.counts.size() == 1 ? "" : "s");
}

}  // namespace

ExpandedPrompt expand_placeholders(std::span<const int32_t> ids, std::span<const MediaKind> kinds) {
  std::vector<int64_t> next_row(kinds.size(), 0);  // each kind's next row, kinds back to back
  std::vector<size_t> next_item(kinds.size(), 0);
  size_t n = ids.size();
  for (size_t k = 0; k < kinds.size(); ++k) {
    check_counts(ids, kinds[k]);
    if (k + 1 < kinds.size()) next_row[k + 1] = next_row[k];
    for (int32_t c : kinds[k].counts) {
      if (k + 1 < kinds.size()) next_row[k + 1] += c;
      n += static_cast<size_t>(c) + 1;
    }
  }
  ExpandedPrompt out;
  out.ids.reserve(n);
  out.soft_row.reserve(n);
  for (int32_t t : ids) {
    const int k = kind_of(t, kinds);
    if (k < 0) {
      out.ids.push_back(t), out.soft_row.push_back(-1);
      continue;
    }
    const MediaMarkers& m = kinds[k].markers;
    out.ids.push_back(m.begin), out.soft_row.push_back(-1);
    for (int32_t i = 0; i < kinds[k].counts[next_item[k]]; ++i)
      out.ids.push_back(m.placeholder), out.soft_row.push_back(next_row[k]++);
    out.ids.push_back(m.end), out.soft_row.push_back(-1);
    ++next_item[k];
  }
  return out;
}

}  // namespace sluice::chat
