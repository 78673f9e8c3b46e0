// Strict GGUF reader (gguf.md): mmap, versions 2 and 3, every check of the spec's loader
// checklist (§10). Every error names the file and the offset, key or tensor, and what was
// wrong. Nothing in the file can cause a crash, an abort, undefined behaviour or an
// allocation sized by a count that was not first checked against the file size.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "gguf/value.h"

namespace sluice {
class MmapFile;
}

namespace sluice::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint64_t kMaxTensorNameLen = 63;  // ggml keeps names in char[64]
inline constexpr uint64_t kMaxStringLen = 1ull << 30;
inline constexpr uint64_t kMaxArrayCount = 1ull << 30;

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // elements per dim, fastest-varying first
  DType type = DType::F32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;
  uint64_t info_offset = 0;       // where this record starts in the file
  const uint8_t* data = nullptr;  // in the mapped file

  uint64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  uint64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  uint64_t row_bytes() const { return dtype_row_bytes(type, ne[0]); }
  std::string shape_string() const;  // "[640, 262144]"
};

struct ReadOptions {
  // Accept tensors of valid ggml types that sluice cannot decode (for `sluice inspect`).
  bool allow_unsupported_types = false;
};

class GgufFile {
 public:
  // Maps and validates a file. Throws sluice::Error.
  static std::unique_ptr<GgufFile> open(const std::string& path, ReadOptions opt = {});
  // Validates bytes that stay owned by the caller (fuzzing, tests). Throws sluice::Error.
  static std::unique_ptr<GgufFile> parse(std::span<const uint8_t> bytes, std::string name, ReadOptions opt = {});
  ~GgufFile();

  const std::string& name() const { return name_; }  // file path, for messages
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }

  // ---- metadata, in file order
  const std::vector<KeyValue>& kvs() const { return kvs_; }
  const KeyValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors. Each throws sluice::Error naming the file and key when the key is
  // missing, has the wrong type, or its value is out of range. Integer getters accept any
  // integer type (writers differ: u32 vs u64 vs i32) and range-check the value.
  std::string_view get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key, uint64_t max = UINT64_MAX) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;  // f32 or f64
  bool get_bool(std::string_view key) const;
  const KeyValue& get_array(std::string_view key, std::optional<ValueType> elem = {}) const;
  // Defaults when the key is absent (but still an error when present with a bad type).
  std::string_view get_string_or(std::string_view key, std::string_view def) const;
  uint64_t get_uint_or(std::string_view key, uint64_t def, uint64_t max = UINT64_MAX) const;
  double get_float_or(std::string_view key, double def) const;
  bool get_bool_or(std::string_view key, bool def) const;
  // "key or array": a scalar integer repeated n times, or an integer array of exactly n.
  std::vector<uint64_t> get_uint_per_layer(std::string_view key, uint64_t n, uint64_t max = UINT64_MAX) const;
  // Reads element i of an integer/float array as uint64 / double (range-checked).
  uint64_t array_uint(const KeyValue& kv, uint64_t i, uint64_t max = UINT64_MAX) const;
  double array_float(const KeyValue& kv, uint64_t i) const;

  // ---- tensors, in file order
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // throws "missing tensor 'X'"

  // Drops the mapped pages of [p, p + n) from this process's memory once their bytes have been
  // copied elsewhere (MmapFile::release): they stay readable, a later touch reads them back.
  // No-op for bytes the file does not map (parse(): caller-owned bytes, or any other pointer).
  void release_pages(const uint8_t* p, uint64_t n) const;

 private:
  GgufFile() = default;
  class Parser;
  [[noreturn]] void key_error(const KeyValue& kv, const char* what) const;

  std::string name_;
  std::unique_ptr<MmapFile> map_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kvs_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace sluice::gguf
