#include "base/json_read.h"

#include <memory>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sluice {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// An object's keys -> positions, once it is big enough that a linear search would cost more.
constexpr size_t kIndexFrom = 16;

// nlohmann SAX events -> a value, one container frame per open array or object.
template <class J>
class Builder {
 public:
  using number_integer_t = typename J::number_integer_t;
  using number_unsigned_t = typename J::number_unsigned_t;
  using number_float_t = typename J::number_float_t;
  using string_t = typename J::string_t;
  using binary_t = typename J::binary_t;

  Builder(const JsonLimits& limits, const std::string& what) : limits_(limits), what_(what) {}

  bool null() { return put(J(nullptr)) != nullptr; }
  bool boolean(bool v) { return put(J(v)) != nullptr; }
  bool number_integer(number_integer_t v) { return put(J(v)) != nullptr; }
  bool number_unsigned(number_unsigned_t v) { return put(J(v)) != nullptr; }
  bool number_float(number_float_t v, const string_t&) { return put(J(v)) != nullptr; }
  bool string(string_t& v) { return put(J(std::move(v))) != nullptr; }
  bool binary(binary_t& v) { return put(J::binary(std::move(v))) != nullptr; }
  bool start_object(size_t) { return open(J::object()); }
  bool start_array(size_t) { return open(J::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    throw JsonReadError(what_ + " is not valid JSON: " + e.what(), false);
  }

  J take() { return std::move(root_); }

 private:
  struct Frame {
    J* value;
    std::unique_ptr<std::unordered_map<std::string, size_t>> index;  // large ordered objects
  };

  J* put(J v) {
    if (++n_values_ > limits_.max_values)
      throw JsonReadError(what_ + " holds more than " + std::to_string(limits_.max_values) + " values", true);
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& top = stack_.back();
    if (top.value->is_array()) {
      auto& a = top.value->template get_ref<typename J::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    return insert(top, std::move(v));
  }

  J* insert(Frame& top, J v) {
    auto& o = top.value->template get_ref<typename J::object_t&>();
    if constexpr (std::is_same_v<J, ordered_json>) {
      typename J::object_t::Container& items = o;  // ordered_map is a vector of pairs
      if (!top.index && items.size() >= kIndexFrom) {
        top.index = std::make_unique<std::unordered_map<std::string, size_t>>();
        for (size_t i = 0; i < items.size(); ++i) top.index->emplace(items[i].first, i);
      }
      size_t at = items.size();
      if (top.index) {
        const auto [it, fresh] = top.index->emplace(key_, items.size());
        at = it->second;
      } else {
        for (size_t i = 0; i < items.size(); ++i)
          if (items[i].first == key_) at = i;
      }
      if (at < items.size()) {  // a duplicate key: first position, last value
        items[at].second = std::move(v);
        return &items[at].second;
      }
      items.emplace_back(std::move(key_), std::move(v));
      return &items.back().second;
    } else {
      J& slot = o[std::move(key_)];
      slot = std::move(v);
      return &slot;
    }
  }

  bool open(J container) {
    if (stack_.size() >= static_cast<size_t>(limits_.max_depth))
      throw JsonReadError(
          what_ + " is nested deeper than " + std::to_string(limits_.max_depth) + " levels of arrays and objects",
          true);
    stack_.push_back(Frame{put(std::move(container)), nullptr});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  const JsonLimits& limits_;
  const std::string& what_;
  J root_;
  std::vector<Frame> stack_;
  string_t key_;
  size_t n_values_ = 0;
};

thread_local size_t n_texts_read = 0;

}  // namespace

size_t json_texts_read() { return n_texts_read; }

const JsonLimits& request_json_limits() {
  static const JsonLimits limits{kMaxJsonDepth, size_t{64} << 20, kMaxJsonValues};
  return limits;
}

template <class J>
J read_json(std::string_view text, const JsonLimits& limits, const std::string& what) {
  ++n_texts_read;
  if (text.size() > limits.max_bytes)
    throw JsonReadError(
        what + " is " + std::to_string(text.size()) + " bytes, over the limit of " + std::to_string(limits.max_bytes),
        true);
  Builder<J> b(limits, what);
  J::sax_parse(text, &b);
  return b.take();
}

template json read_json<json>(std::string_view, const JsonLimits&, const std::string&);
template ordered_json read_json<ordered_json>(std::string_view, const JsonLimits&, const std::string&);

template <class To, class From>
To convert_json(const From& from) {
  // Containers are created empty and filled from a work list of (source, destination)
  // pairs; a destination's children are all placed (into reserved storage) before any of
  // them is filled, so the pointers on the list stay valid.
  auto shell = [](const From& v) -> To {
    if (v.is_object()) return To::object();
    if (v.is_array()) return To::array();
    return To(v);  // a scalar: no recursion
  };
  To root = shell(from);
  std::vector<std::pair<const From*, To*>> work{{&from, &root}};
  while (!work.empty()) {
    const auto [src, dst] = work.back();
    work.pop_back();
    if (src->is_array()) {
      auto& a = dst->template get_ref<typename To::array_t&>();
      a.reserve(src->size());
      for (const From& x : *src) {
        a.push_back(shell(x));
        if (x.is_structured()) work.emplace_back(&x, &a.back());
      }
    } else if (src->is_object()) {
      auto& o = dst->template get_ref<typename To::object_t&>();
      if constexpr (std::is_same_v<To, ordered_json>) o.reserve(src->size());
      for (auto it = src->begin(); it != src->end(); ++it) {
        To* slot;
        if constexpr (std::is_same_v<To, ordered_json>) {
          typename To::object_t::Container& items = o;  // keys of `from` are unique
          items.emplace_back(it.key(), shell(it.value()));
          slot = &items.back().second;
        } else {
          slot = &(o[it.key()] = shell(it.value()));
        }
        if (it.value().is_structured()) work.emplace_back(&it.value(), slot);
      }
    }
  }
  return root;
}

template json convert_json<json, ordered_json>(const ordered_json&);
template ordered_json convert_json<ordered_json, json>(const json&);

}  // namespace sluice
