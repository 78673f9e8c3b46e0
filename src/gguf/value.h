// GGUF metadata values (gguf.md §4). Values are views into the validated file bytes:
// nothing is copied except the per-element offsets of string arrays.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sluice::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;

std::string_view value_type_name(ValueType t);  // "u32", "string", "array", ...
uint64_t value_type_size(ValueType t);          // fixed-size types; 0 for string/array
inline bool is_integer(ValueType t) {
  return t == ValueType::U8 || t == ValueType::I8 || t == ValueType::U16 || t == ValueType::I16 ||
         t == ValueType::U32 || t == ValueType::I32 || t == ValueType::U64 || t == ValueType::I64;
}
inline bool is_float(ValueType t) { return t == ValueType::F32 || t == ValueType::F64; }

// Decodes one fixed-size numeric element at p as int64 / uint64 / double. The caller knows
// the type is numeric; u64 values >= 2^63 do not fit int64 and are reported by the caller.
int64_t load_int(ValueType t, const uint8_t* p);
uint64_t load_uint(ValueType t, const uint8_t* p);
double load_float(ValueType t, const uint8_t* p);

// One key/value pair. For scalars `data` points at the value bytes; for strings at the text
// (len = str_len); for arrays at the first element and `count` is the element count.
struct KeyValue {
  std::string_view key;
  ValueType type = ValueType::U8;
  ValueType elem_type = ValueType::U8;  // arrays only
  uint64_t count = 0;                   // arrays only
  const uint8_t* data = nullptr;
  uint64_t str_len = 0;               // strings only
  uint64_t file_offset = 0;           // where the key starts, for error messages
  std::vector<uint64_t> str_offsets;  // string arrays: offset of element i's text from data
  std::vector<uint64_t> str_lens;     // string arrays: length of element i

  std::string_view as_string() const { return {reinterpret_cast<const char*>(data), str_len}; }
  std::string_view string_at(uint64_t i) const {
    return {reinterpret_cast<const char*>(data) + str_offsets[i], str_lens[i]};
  }
  // Element i of a fixed-size numeric array.
  const uint8_t* elem_ptr(uint64_t i) const { return data + i * value_type_size(elem_type); }
  // Human-readable type, e.g. "u32" or "array[string,262144]".
  std::string type_string() const;
};

}  // namespace sluice::gguf
