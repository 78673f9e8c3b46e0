#include "server/stop_strings.h"

#include <algorithm>

namespace sluice::server {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view text) {
  Result r;
  if (hit_) return r;
  held_.append(text);
  // The earliest stop string wins (ties: the one listed first).
  size_t best = std::string::npos;
  for (const auto& s : stops_) best = std::min(best, held_.find(s));
  if (best != std::string::npos) {
    r.emit = held_.substr(0, best);
    r.hit = hit_ = true;
    held_.clear();
    return r;
  }
  // Keep the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(held_.size(), s.size() - 1); n > keep; --n)
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
        keep = n;
        break;
      }
  r.emit = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopStringMatcher::flush() {
  std::string out;
  out.swap(held_);
  return hit_ ? std::string() : out;
}

}  // namespace sluice::server
