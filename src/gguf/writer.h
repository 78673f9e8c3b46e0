// GGUF writer (version 3) for tools and tests: metadata in insertion order, tensors packed in
// insertion order at ALIGN boundaries — exactly the layout the reader requires. Tensor data
// can be given as bytes or produced on demand while writing (large generated models).
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "gguf/value.h"

namespace sluice::gguf {

class GgufWriter {
 public:
  // alignment != 32 also writes general.alignment (u32).
  explicit GgufWriter(uint32_t alignment = 32);

  void add_u8(std::string_view key, uint8_t v);
  void add_i8(std::string_view key, int8_t v);
  void add_u16(std::string_view key, uint16_t v);
  void add_i16(std::string_view key, int16_t v);
  void add_u32(std::string_view key, uint32_t v);
  void add_i32(std::string_view key, int32_t v);
  void add_u64(std::string_view key, uint64_t v);
  void add_i64(std::string_view key, int64_t v);
  void add_f32(std::string_view key, float v);
  void add_f64(std::string_view key, double v);
  void add_bool(std::string_view key, bool v);
  void add_string(std::string_view key, std::string_view v);
  void add_string_array(std::string_view key, const std::vector<std::string>& v);
  // A fixed-size-element array from raw little-endian element bytes (count elements).
  void add_array(std::string_view key, ValueType elem, uint64_t count, std::span<const uint8_t> raw);
  template <class T>
  void add_array(std::string_view key, ValueType elem, const std::vector<T>& v) {
    add_array(key, elem, v.size(), {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)});
  }

  // Copies a key/value pair read from another file, whatever its type.
  void add_kv(const KeyValue& kv);

  // ne: elements per dimension, fastest-varying first (ne[0] = row length).
  void add_tensor(std::string_view name, DType type, std::vector<uint64_t> ne, std::vector<uint8_t> data);
  // Data produced at write time: `produce(out)` must write exactly nbytes(type, ne) bytes.
  void add_tensor(std::string_view name, DType type, std::vector<uint64_t> ne,
                  std::function<void(std::ostream&)> produce);

  void write(std::ostream& out) const;
  std::vector<uint8_t> to_bytes() const;
  void write_file(const std::string& path) const;  // writes PATH.tmp, then renames

  static uint64_t tensor_nbytes(DType type, const std::vector<uint64_t>& ne);

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<uint64_t> ne;
    uint64_t nbytes;
    std::vector<uint8_t> data;
    std::function<void(std::ostream&)> produce;
  };
  void begin_kv(std::string_view key, ValueType t);
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    kv_bytes_.insert(kv_bytes_.end(), p, p + sizeof(T));
  }
  void put_string(std::vector<uint8_t>& out, std::string_view s) const;

  uint32_t alignment_;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> kv_bytes_;
  std::vector<Tensor> tensors_;
};

}  // namespace sluice::gguf
