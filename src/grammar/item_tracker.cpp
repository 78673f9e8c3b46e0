#include "grammar/item_tracker.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace sluice::grammar {

namespace {

// Integral floats become integers: JSON Schema's equality compares numbers by value.
void integral_numbers(nlohmann::json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9e18) v = static_cast<int64_t>(d);
  } else if (v.is_structured()) {
    for (auto& x : v) integral_numbers(x);
  }
}

}  // namespace

std::string canonical_json(std::string_view text) {
  nlohmann::json v = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) {
    // A number past the double range (nlohmann refuses it) is infinite to other JSON readers
    // (Python's json too): 1E999 and 2E999 are the same value.
    const std::string t(text);
    char* end = nullptr;
    const double d = std::strtod(t.c_str(), &end);
    if (end != t.c_str() && std::isinf(d) && std::string_view(end).find_first_not_of(" \n\t\r") == std::string::npos)
      return d > 0 ? "inf" : "-inf";
    return {};
  }
  integral_numbers(v);  // nlohmann::json keeps members sorted
  return v.dump();
}

// Appends b to the current item of every open array among the first `levels` levels (an
// inner value's bytes are part of each enclosing array's item).
void ItemTracker::append(uint8_t b, size_t levels) {
  for (size_t i = 0; i < levels; ++i)
    if (levels_[i].array && levels_[i].open) levels_[i].cur += static_cast<char>(b);
}

void ItemTracker::feed(uint8_t b, bool unique_comma) {
  if (unique_comma) marks_.push_back(fed_);
  ++fed_;
  feed_byte(b, unique_comma);
}

void ItemTracker::feed_byte(uint8_t b, bool unique_comma) {
  if (in_str_) {
    if (esc_) esc_ = false;
    else if (b == '\\') esc_ = true;
    else if (b == '"') in_str_ = false;
    append(b, levels_.size());
    return;
  }
  if (b == ' ' || b == '\n' || b == '\t' || b == '\r') return;
  const bool top_array = !levels_.empty() && levels_.back().array;
  if ((b == ',' || b == ']' || b == '}') && !levels_.empty()) {
    Level& top = levels_.back();
    top.unique = top.unique || unique_comma;
    if (top.array && top.open) {
      top.items.push_back(canonical_json(top.cur));
      top.open = false;
      top.cur.clear();
    }
    if (b != ',') {
      arrays_ -= top.array;
      levels_.pop_back();
    }
    append(b, levels_.size() - (b == ',' ? 1 : 0));
    return;
  }
  if (top_array && !levels_.back().open) levels_.back().open = true;  // an item starts
  append(b, levels_.size());
  if (b == '"') in_str_ = true;
  if (b == '[' || b == '{') {
    levels_.push_back(Level{b == '['});
    arrays_ += b == '[';
  }
}

bool ItemTracker::completed_duplicate() const {
  if (in_str_ || levels_.empty()) return false;
  const Level& top = levels_.back();
  // The innermost level is this array, so a container item has closed already.
  if (!top.array || !top.open || top.items.empty() || top.cur.empty()) return false;
  const char first = top.cur[0];
  if (first != '"' && first != '[' && first != '{') return false;
  const std::string c = canonical_json(top.cur);
  return !c.empty() && std::find(top.items.begin(), top.items.end(), c) != top.items.end();
}

bool ItemTracker::in_number_context() const {
  return !in_str_ && !levels_.empty() && levels_.back().array && !levels_.back().items.empty();
}

namespace {

// "-123" -> (true, "123"); the digits empty when the text is not -?digits.
std::pair<bool, std::string_view> integer_digits(std::string_view t) {
  const bool neg = !t.empty() && t[0] == '-';
  t.remove_prefix(neg);
  if (t.empty() || t.find_first_not_of("0123456789") != std::string_view::npos) return {neg, {}};
  return {neg, t};
}

}  // namespace

bool ItemTracker::dead_integer_prefix() const {
  if (in_str_ || levels_.empty()) return false;
  const Level& top = levels_.back();
  if (!top.array || !top.unique || !top.open || top.items.empty()) return false;
  const auto [neg, d] = integer_digits(top.cur);
  if (d.empty() || (d[0] == '0' && d.size() > 1)) return false;
  const size_t cap = kUniqueIntegerDigits;
  // Integers that begin with these bytes: the prefix itself and its longer forms (saturated
  // just past the items written: more completions than items always leaves one).
  size_t completions = 1;
  if (d[0] != '0' && d.size() < cap)
    for (size_t j = 1, p = 1; j <= cap - d.size() && completions <= top.items.size(); ++j) {
      p = std::min(p * 10, top.items.size() + 1);
      completions += p;
    }
  if (completions > top.items.size()) return false;
  size_t used = 0;
  for (const std::string& c : top.items) {
    const auto [cneg, cd] = integer_digits(c);
    if (cd.empty()) continue;
    if (d == "0") {  // -0 is 0
      used += cd == "0";
      continue;
    }
    const size_t longest = std::max(cap, d.size());
    if (cneg == neg && cd.size() <= longest && cd.substr(0, d.size()) == d && (d.size() < cap || cd.size() == d.size()))
      ++used;
  }
  return used >= completions;
}

bool ItemTracker::closes_duplicate(uint8_t b) const {
  if (in_str_ || (b != ',' && b != ']') || levels_.empty()) return false;
  const Level& top = levels_.back();
  if (!top.array || !top.open || top.items.empty()) return false;
  const std::string c = canonical_json(top.cur);
  return !c.empty() && std::find(top.items.begin(), top.items.end(), c) != top.items.end();
}

}  // namespace sluice::grammar
