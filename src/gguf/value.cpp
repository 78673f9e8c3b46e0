#include "gguf/value.h"

namespace sluice::gguf {

namespace {
constexpr std::string_view kNames[kValueTypeCount] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                      "bool", "string", "array", "u64", "i64", "f64"};
constexpr uint64_t kSizes[kValueTypeCount] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

std::string_view value_type_name(ValueType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < kValueTypeCount ? kNames[i] : "invalid";
}

uint64_t value_type_size(ValueType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < kValueTypeCount ? kSizes[i] : 0;
}

int64_t load_int(ValueType t, const uint8_t* p) {
  switch (t) {
    case ValueType::U8: return load<uint8_t>(p);
    case ValueType::I8: return load<int8_t>(p);
    case ValueType::U16: return load<uint16_t>(p);
    case ValueType::I16: return load<int16_t>(p);
    case ValueType::U32: return load<uint32_t>(p);
    case ValueType::I32: return load<int32_t>(p);
    case ValueType::U64: return static_cast<int64_t>(load<uint64_t>(p));
    case ValueType::I64: return load<int64_t>(p);
    case ValueType::BOOL: return load<uint8_t>(p);
    default: return 0;  // not an integer type: callers check is_integer() first
  }
}

uint64_t load_uint(ValueType t, const uint8_t* p) {
  if (t == ValueType::U64) return load<uint64_t>(p);
  return static_cast<uint64_t>(load_int(t, p));
}

double load_float(ValueType t, const uint8_t* p) {
  switch (t) {
    case ValueType::F32: return load<float>(p);
    case ValueType::F64: return load<double>(p);
    case ValueType::U64: return static_cast<double>(load<uint64_t>(p));
    default: return static_cast<double>(load_int(t, p));
  }
}

std::string KeyValue::type_string() const {
  if (type != ValueType::ARRAY) return std::string(value_type_name(type));
  return "array[" + std::string(value_type_name(elem_type)) + "," + std::to_string(count) + "]";
}

}  // namespace sluice::gguf
