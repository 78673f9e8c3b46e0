#include "gguf/reader.h"

#include <algorithm>
#include <bit>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/mmap_file.h"

namespace sluice::gguf {

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (uint32_t d = 0; d < n_dims; ++d) {
    if (d) s += ", ";
    s += std::to_string(ne[d]);
  }
  return s + "]";
}

// ---------------------------------------------------------------------------------------
// Parser: a cursor over untrusted bytes. Every read checks the remaining size first.
class GgufFile::Parser {
 public:
  Parser(GgufFile& f, const ReadOptions& opt) : f_(f), opt_(opt), b_(f.bytes_) {}

  void run() {
    read_header();
    for (uint64_t i = 0; i < n_kv_; ++i) read_kv(i);
    check_well_known_keys();
    // Bounded reserve: a corrupt tensor_count (up to file size / 33) must not allocate
    // ~112 bytes per claimed record before a single record has been read.
    f_.tensors_.reserve(std::min<uint64_t>(n_tensors_, 4096));
    for (uint64_t i = 0; i < n_tensors_; ++i) read_tensor_info(i);
    place_tensors();
  }

 private:
  [[noreturn]] void error(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  const char* fname() const { return f_.name_.c_str(); }
  uint64_t remaining() const { return b_.size() - pos_; }

  void need(uint64_t n, const char* what) {
    if (n > remaining())
      error("unexpected end of file while reading %s at offset %llu (need %llu bytes, %llu left)", what, ull(pos_),
            ull(n), ull(remaining()));
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  // A gguf_string: u64 length, then bytes. Returns a view into the file.
  std::string_view read_string(const char* what) {
    const uint64_t at = pos_;
    const uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringLen)
      error("%s at offset %llu has length %llu, above the limit of %llu bytes", what, ull(at), ull(len),
            ull(kMaxStringLen));
    need(len, what);
    std::string_view s(reinterpret_cast<const char*>(b_.data() + pos_), len);
    pos_ += len;
    return s;
  }
  static unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

  void read_header() {
    if (b_.size() < 24) error("file is %zu bytes, too small for a GGUF header (24 bytes)", b_.size());
    const uint8_t* m = b_.data();
    pos_ = 4;
    if (std::memcmp(m, "FUGG", 4) == 0) error("big-endian GGUF files are not supported");
    if (std::memcmp(m, "GGUF", 4) != 0) {
      std::string shown;
      for (int i = 0; i < 4; ++i)
        shown += (m[i] >= 32 && m[i] < 127) ? std::string(1, static_cast<char>(m[i])) : strfmt("\\x%02x", m[i]);
      error("not a GGUF file: magic is '%s', expected 'GGUF'", shown.c_str());
    }
    const uint32_t v = read<uint32_t>("version");
    if ((v & 0xFFFF) == 0 && v != 0)
      error("version field is %u: a big-endian GGUF file (byte-order mismatch), not supported", v);
    if (v == 1) error("GGUF version 1 is no longer supported (need 2 or 3)");
    if (v == 0 || v > 3) error("unsupported GGUF version %u (this reader supports 2 and 3)", v);
    f_.version_ = v;
    n_tensors_ = read<uint64_t>("tensor count");
    n_kv_ = read<uint64_t>("metadata key/value count");
    // Each KV needs >= 8 (key length) + 1 (key) + 4 (type) + 1 (value) bytes; each tensor
    // info >= 8 + 1 + 4 + 8 + 4 + 8. Reject counts the file cannot hold before allocating.
    const uint64_t body = b_.size() - 24;
    if (n_kv_ > body / 14) error("metadata count %llu cannot fit in a file of %zu bytes", ull(n_kv_), b_.size());
    if (n_tensors_ > body / 33)
      error("tensor count %llu cannot fit in a file of %zu bytes", ull(n_tensors_), b_.size());
    if (n_kv_ * 14 + n_tensors_ * 33 > body)
      error("metadata count %llu and tensor count %llu cannot fit in a file of %zu bytes", ull(n_kv_), ull(n_tensors_),
            b_.size());
  }

  ValueType read_type(const std::string_view key, const char* what) {
    const uint64_t at = pos_;
    const uint32_t t = read<uint32_t>(what);
    if (t >= kValueTypeCount)
      error("key '%.*s' has invalid value type %u at offset %llu", int(key.size()), key.data(), t, ull(at));
    return static_cast<ValueType>(t);
  }

  void read_kv(uint64_t i) {
    KeyValue kv;
    kv.file_offset = pos_;
    kv.key = read_string("metadata key");
    if (kv.key.empty()) error("metadata key %llu at offset %llu is empty", ull(i), ull(kv.file_offset));
    if (f_.kv_index_.count(kv.key))
      error("duplicate metadata key '%.*s' at offset %llu", int(kv.key.size()), kv.key.data(), ull(kv.file_offset));
    kv.type = read_type(kv.key, "metadata value type");
    if (kv.type == ValueType::ARRAY) {
      kv.elem_type = read_type(kv.key, "array element type");
      if (kv.elem_type == ValueType::ARRAY)
        error("key '%.*s' is a nested array (array of arrays), which ggml rejects", int(kv.key.size()), kv.key.data());
      const uint64_t at = pos_;
      kv.count = read<uint64_t>("array length");
      if (kv.count > kMaxArrayCount)
        error("key '%.*s' array at offset %llu has %llu elements, above the limit of %llu", int(kv.key.size()),
              kv.key.data(), ull(at), ull(kv.count), ull(kMaxArrayCount));
      kv.data = b_.data() + pos_;
      if (kv.elem_type == ValueType::STRING) {
        if (kv.count > remaining() / 8)
          error("key '%.*s' string array of %llu elements at offset %llu exceeds the file", int(kv.key.size()),
                kv.key.data(), ull(kv.count), ull(at));
        kv.str_offsets.reserve(kv.count);
        kv.str_lens.reserve(kv.count);
        const uint64_t base = pos_;
        for (uint64_t e = 0; e < kv.count; ++e) {
          std::string_view s = read_string("array string");
          kv.str_offsets.push_back(static_cast<uint64_t>(s.data() - reinterpret_cast<const char*>(b_.data())) - base);
          kv.str_lens.push_back(s.size());
        }
      } else {
        const uint64_t es = value_type_size(kv.elem_type);
        if (kv.count > remaining() / es)
          error("key '%.*s' array of %llu %s elements at offset %llu exceeds the file", int(kv.key.size()),
                kv.key.data(), ull(kv.count), std::string(value_type_name(kv.elem_type)).c_str(), ull(at));
        if (kv.elem_type == ValueType::BOOL)
          for (uint64_t e = 0; e < kv.count; ++e) check_bool(kv.key, b_[pos_ + e], pos_ + e);
        pos_ += kv.count * es;
      }
    } else if (kv.type == ValueType::STRING) {
      std::string_view s = read_string("string value");
      kv.data = reinterpret_cast<const uint8_t*>(s.data());
      kv.str_len = s.size();
    } else {
      const uint64_t es = value_type_size(kv.type);
      need(es, "metadata value");
      kv.data = b_.data() + pos_;
      if (kv.type == ValueType::BOOL) check_bool(kv.key, *kv.data, pos_);
      pos_ += es;
    }
    f_.kv_index_.emplace(kv.key, f_.kvs_.size());
    f_.kvs_.push_back(std::move(kv));
  }

  // The spec allows only 0 and 1 (ggml treats any non-zero as true); we are strict.
  void check_bool(std::string_view key, uint8_t v, uint64_t at) {
    if (v > 1)
      error("key '%.*s' has bool byte %u at offset %llu (must be 0 or 1)", int(key.size()), key.data(), v, ull(at));
  }

  // Keys the container or every model relies on must have the type readers expect.
  void check_well_known_keys() {
    if (const KeyValue* kv = f_.find("general.alignment")) {
      if (kv->type != ValueType::U32)
        error("key 'general.alignment' must be of type u32 but is %s", kv->type_string().c_str());
      const uint32_t a = static_cast<uint32_t>(load_uint(ValueType::U32, kv->data));
      if (a == 0 || !std::has_single_bit(a)) error("key 'general.alignment' is %u, not a non-zero power of 2", a);
      f_.alignment_ = a;
    }
    struct Rule {
      const char* key;
      const char* want;
      bool (*ok)(const KeyValue&);
    };
    static const Rule kRules[] = {
        {"general.architecture", "string", [](const KeyValue& k) { return k.type == ValueType::STRING; }},
        {"general.name", "string", [](const KeyValue& k) { return k.type == ValueType::STRING; }},
        {"general.quantization_version", "an integer", [](const KeyValue& k) { return is_integer(k.type); }},
        {"general.file_type", "an integer", [](const KeyValue& k) { return is_integer(k.type); }},
        {"split.count", "an integer", [](const KeyValue& k) { return is_integer(k.type); }},
        {"tokenizer.ggml.model", "string", [](const KeyValue& k) { return k.type == ValueType::STRING; }},
        {"tokenizer.ggml.tokens", "array[string]",
         [](const KeyValue& k) { return k.type == ValueType::ARRAY && k.elem_type == ValueType::STRING; }},
        {"tokenizer.ggml.merges", "array[string]",
         [](const KeyValue& k) { return k.type == ValueType::ARRAY && k.elem_type == ValueType::STRING; }},
        {"tokenizer.ggml.scores", "array[f32]",
         [](const KeyValue& k) { return k.type == ValueType::ARRAY && k.elem_type == ValueType::F32; }},
        {"tokenizer.ggml.token_type", "array of integers",
         [](const KeyValue& k) { return k.type == ValueType::ARRAY && is_integer(k.elem_type); }},
    };
    for (const Rule& r : kRules)
      if (const KeyValue* kv = f_.find(r.key); kv && !r.ok(*kv))
        error("key '%s' must be %s but is %s", r.key, r.want, kv->type_string().c_str());
    if (const KeyValue* kv = f_.find("split.count")) {
      // A u64 count >= 2^63 must not wrap to a negative int64 and slip past the check.
      const bool negative = kv->type != ValueType::U64 && load_int(kv->type, kv->data) < 0;
      const uint64_t n = load_uint(kv->type, kv->data);
      if (!negative && n > 1)
        error(
            "this is one shard of a split GGUF (split.count = %llu); merge the shards first "
            "(llama-gguf-split --merge)",
            ull(n));
    }
  }

  void read_tensor_info(uint64_t i) {
    TensorInfo t;
    t.info_offset = pos_;
    std::string_view name = read_string("tensor name");
    if (name.empty()) error("tensor %llu at offset %llu has an empty name", ull(i), ull(t.info_offset));
    if (name.size() > kMaxTensorNameLen)
      error("tensor %llu at offset %llu: name is %zu bytes long, the limit is %llu", ull(i), ull(t.info_offset),
            name.size(), ull(kMaxTensorNameLen));
    t.name = std::string(name);
    const char* tn = t.name.c_str();
    if (f_.tensor_index_.count(name)) error("duplicate tensor name '%s' (tensor %llu)", tn, ull(i));
    t.n_dims = read<uint32_t>("tensor dimension count");
    if (t.n_dims == 0 || t.n_dims > 4) error("tensor '%s' has %u dimensions (must be 1 to 4)", tn, t.n_dims);
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t ne = read<uint64_t>("tensor dimension");
      if (ne >= (1ull << 63)) error("tensor '%s' dimension %u has invalid size %llu (>= 2^63)", tn, d, ull(ne));
      if (ne == 0) error("tensor '%s' has a zero-sized dimension %u", tn, d);
      if (!checked_mul(n_el, ne, &n_el) || n_el >= (1ull << 63))
        error("tensor '%s': total number of elements overflows at dimension %u", tn, d);
      t.ne[d] = ne;
    }
    const uint64_t type_at = pos_;
    const uint32_t type_id = read<uint32_t>("tensor type");
    const DTypeInfo* info = dtype_info(type_id);
    if (info == nullptr) error("tensor '%s' has invalid ggml type %u at offset %llu", tn, type_id, ull(type_at));
    if (!info->supported && !opt_.allow_unsupported_types)
      error("tensor '%s' uses type %u (%.*s), which sluice does not support", tn, type_id, int(info->name.size()),
            info->name.data());
    t.type = static_cast<DType>(type_id);
    if (t.ne[0] % info->block_elems != 0)
      error("tensor '%s' of type %.*s has %llu elements per row, not a multiple of the block size %u", tn,
            int(info->name.size()), info->name.data(), ull(t.ne[0]), info->block_elems);
    // Element count < 2^63, so ne1*ne2*ne3 cannot overflow; but a row of up to 2^63 elements
    // times up to 292 bytes per block can (F32 [2^62] is 2^64 bytes), so both products are checked.
    uint64_t row_bytes = 0;
    if (!checked_mul(t.ne[0] / info->block_elems, info->block_bytes, &row_bytes) ||
        !checked_mul(row_bytes, t.ne[1] * t.ne[2] * t.ne[3], &t.nbytes))
      error("tensor '%s' with shape %s has a byte size that overflows", tn, t.shape_string().c_str());
    t.offset = read<uint64_t>("tensor data offset");
    f_.tensors_.push_back(std::move(t));
    // The key views the name in the file bytes, which outlive the index (tensors_ may grow).
    f_.tensor_index_.emplace(name, f_.tensors_.size() - 1);
  }

  // gguf.md §6: the data section starts at the next ALIGN boundary; tensors are packed in
  // record order, each at the running (aligned) offset, and every one lies inside the file.
  void place_tensors() {
    const uint64_t a = f_.alignment_;
    uint64_t d = pos_;
    if (n_tensors_ > 0 && !checked_align_up(pos_, a, &d)) error("data section offset overflows");
    if (d > b_.size())
      error("data section would start at offset %llu, past the end of the %zu-byte file", ull(d), b_.size());
    f_.data_offset_ = d;
    uint64_t expected = 0;
    for (TensorInfo& t : f_.tensors_) {
      const char* tn = t.name.c_str();
      if (t.offset != expected)
        error("tensor '%s' has data offset %llu, expected %llu (tensors must be packed in order, aligned to %llu)", tn,
              ull(t.offset), ull(expected), ull(a));
      uint64_t begin, end, padded;
      if (!checked_add(d, t.offset, &begin) || !checked_add(begin, t.nbytes, &end) || end > b_.size())
        error("tensor '%s' data [%llu, +%llu) is not within the file (%zu bytes): corrupted or truncated", tn,
              ull(t.offset), ull(t.nbytes), b_.size());
      if (!checked_align_up(t.nbytes, a, &padded) || !checked_add(expected, padded, &expected))
        error("tensor '%s': data size overflows", tn);
      t.data = b_.data() + begin;
    }
  }

  GgufFile& f_;
  const ReadOptions& opt_;
  std::span<const uint8_t> b_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0, n_kv_ = 0;
};

void GgufFile::Parser::error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  throw Error(strfmt("%s: %s", fname(), buf));
}

// ---------------------------------------------------------------------------------------

GgufFile::~GgufFile() = default;

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, ReadOptions opt) {
  auto map = std::make_unique<MmapFile>(path);
  const auto bytes = map->bytes();
  std::unique_ptr<GgufFile> f = parse(bytes, path, opt);
  f->map_ = std::move(map);
  return f;
}

std::unique_ptr<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string name, ReadOptions opt) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->name_ = std::move(name);
  f->bytes_ = bytes;
  Parser(*f, opt).run();
  return f;
}

void GgufFile::release_pages(const uint8_t* p, uint64_t n) const {
  if (map_) map_->release(p, static_cast<size_t>(n));
}

const KeyValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) fail("%s: missing tensor '%.*s'", name_.c_str(), int(name.size()), name.data());
  return *t;
}

void GgufFile::key_error(const KeyValue& kv, const char* what) const {
  fail("%s: key '%.*s' (%s) %s", name_.c_str(), int(kv.key.size()), kv.key.data(), kv.type_string().c_str(), what);
}

static const KeyValue& require(const GgufFile& f, std::string_view key) {
  const KeyValue* kv = f.find(key);
  if (!kv) fail("%s: missing required key '%.*s'", f.name().c_str(), int(key.size()), key.data());
  return *kv;
}

std::string_view GgufFile::get_string(std::string_view key) const {
  const KeyValue& kv = require(*this, key);
  if (kv.type != ValueType::STRING) key_error(kv, "has the wrong type, expected string");
  return kv.as_string();
}

// Range-checked integer decode shared by scalar and array accessors.
static bool decode_uint(ValueType t, const uint8_t* p, uint64_t max, uint64_t* out) {
  if (!is_integer(t)) return false;
  if (t == ValueType::U64) {
    *out = load_uint(t, p);
  } else {
    const int64_t v = load_int(t, p);
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
  }
  return *out <= max;
}

uint64_t GgufFile::get_uint(std::string_view key, uint64_t max) const {
  const KeyValue& kv = require(*this, key);
  if (!is_integer(kv.type)) key_error(kv, "has the wrong type, expected an integer");
  uint64_t v;
  if (!decode_uint(kv.type, kv.data, max, &v))
    key_error(kv, strfmt("is out of range [0, %llu]", static_cast<unsigned long long>(max)).c_str());
  return v;
}

int64_t GgufFile::get_int(std::string_view key) const {
  const KeyValue& kv = require(*this, key);
  if (!is_integer(kv.type)) key_error(kv, "has the wrong type, expected an integer");
  if (kv.type == ValueType::U64 && load_uint(kv.type, kv.data) > uint64_t(INT64_MAX))
    key_error(kv, "does not fit in int64");
  return load_int(kv.type, kv.data);
}

double GgufFile::get_float(std::string_view key) const {
  const KeyValue& kv = require(*this, key);
  if (!is_float(kv.type)) key_error(kv, "has the wrong type, expected f32 or f64");
  return load_float(kv.type, kv.data);
}

bool GgufFile::get_bool(std::string_view key) const {
  const KeyValue& kv = require(*this, key);
  if (kv.type != ValueType::BOOL) key_error(kv, "has the wrong type, expected bool");
  return *kv.data != 0;
}

const KeyValue& GgufFile::get_array(std::string_view key, std::optional<ValueType> elem) const {
  const KeyValue& kv = require(*this, key);
  if (kv.type != ValueType::ARRAY) key_error(kv, "has the wrong type, expected an array");
  if (elem && kv.elem_type != *elem)
    key_error(kv,
              strfmt("has the wrong element type, expected %s", std::string(value_type_name(*elem)).c_str()).c_str());
  return kv;
}

std::string_view GgufFile::get_string_or(std::string_view key, std::string_view def) const {
  return has(key) ? get_string(key) : def;
}
uint64_t GgufFile::get_uint_or(std::string_view key, uint64_t def, uint64_t max) const {
  return has(key) ? get_uint(key, max) : def;
}
double GgufFile::get_float_or(std::string_view key, double def) const { return has(key) ? get_float(key) : def; }
bool GgufFile::get_bool_or(std::string_view key, bool def) const { return has(key) ? get_bool(key) : def; }

uint64_t GgufFile::array_uint(const KeyValue& kv, uint64_t i, uint64_t max) const {
  if (kv.type != ValueType::ARRAY || i >= kv.count) key_error(kv, "index out of range");
  uint64_t v;
  if (!decode_uint(kv.elem_type, kv.elem_ptr(i), max, &v))
    key_error(kv, strfmt("element %llu is not an integer in [0, %llu]", static_cast<unsigned long long>(i),
                         static_cast<unsigned long long>(max))
                      .c_str());
  return v;
}

double GgufFile::array_float(const KeyValue& kv, uint64_t i) const {
  if (kv.type != ValueType::ARRAY || i >= kv.count) key_error(kv, "index out of range");
  if (!is_float(kv.elem_type) && !is_integer(kv.elem_type)) key_error(kv, "is not a numeric array");
  return load_float(kv.elem_type, kv.elem_ptr(i));
}

std::vector<uint64_t> GgufFile::get_uint_per_layer(std::string_view key, uint64_t n, uint64_t max) const {
  const KeyValue& kv = require(*this, key);
  if (kv.type != ValueType::ARRAY) return std::vector<uint64_t>(n, get_uint(key, max));
  if (kv.count != n)
    key_error(kv, strfmt("has %llu elements, expected one per layer (%llu)", static_cast<unsigned long long>(kv.count),
                         static_cast<unsigned long long>(n))
                      .c_str());
  std::vector<uint64_t> out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = array_uint(kv, i, max);
  return out;
}

}  // namespace sluice::gguf
