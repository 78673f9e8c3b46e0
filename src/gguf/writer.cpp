#include "gguf/writer.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace sluice::gguf {

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) fail("GGUF alignment %u is not a power of 2", alignment);
  if (alignment != 32) add_u32("general.alignment", alignment);
}

void GgufWriter::put_string(std::vector<uint8_t>& out, std::string_view s) const {
  const uint64_t n = s.size();
  const auto* p = reinterpret_cast<const uint8_t*>(&n);
  out.insert(out.end(), p, p + 8);
  out.insert(out.end(), s.begin(), s.end());
}

void GgufWriter::begin_kv(std::string_view key, ValueType t) {
  put_string(kv_bytes_, key);
  put(static_cast<uint32_t>(t));
  ++n_kv_;
}

void GgufWriter::add_u8(std::string_view k, uint8_t v) {
  begin_kv(k, ValueType::U8);
  put(v);
}
void GgufWriter::add_i8(std::string_view k, int8_t v) {
  begin_kv(k, ValueType::I8);
  put(v);
}
void GgufWriter::add_u16(std::string_view k, uint16_t v) {
  begin_kv(k, ValueType::U16);
  put(v);
}
void GgufWriter::add_i16(std::string_view k, int16_t v) {
  begin_kv(k, ValueType::I16);
  put(v);
}
void GgufWriter::add_u32(std::string_view k, uint32_t v) {
  begin_kv(k, ValueType::U32);
  put(v);
}
void GgufWriter::add_i32(std::string_view k, int32_t v) {
  begin_kv(k, ValueType::I32);
  put(v);
}
void GgufWriter::add_u64(std::string_view k, uint64_t v) {
  begin_kv(k, ValueType::U64);
  put(v);
}
void GgufWriter::add_i64(std::string_view k, int64_t v) {
  begin_kv(k, ValueType::I64);
  put(v);
}
void GgufWriter::add_f32(std::string_view k, float v) {
  begin_kv(k, ValueType::F32);
  put(v);
}
void GgufWriter::add_f64(std::string_view k, double v) {
  begin_kv(k, ValueType::F64);
  put(v);
}
void GgufWriter::add_bool(std::string_view k, bool v) {
  begin_kv(k, ValueType::BOOL);
  put(static_cast<uint8_t>(v));
}
void GgufWriter::add_string(std::string_view k, std::string_view v) {
  begin_kv(k, ValueType::STRING);
  put_string(kv_bytes_, v);
}

void GgufWriter::add_string_array(std::string_view k, const std::vector<std::string>& v) {
  begin_kv(k, ValueType::ARRAY);
  put(static_cast<uint32_t>(ValueType::STRING));
  put(static_cast<uint64_t>(v.size()));
  for (const std::string& s : v) put_string(kv_bytes_, s);
}

void GgufWriter::add_array(std::string_view k, ValueType elem, uint64_t count, std::span<const uint8_t> raw) {
  const uint64_t es = value_type_size(elem);
  if (es == 0 || raw.size() != count * es)
    fail("GGUF writer: array '%.*s' of %s needs %llu bytes, got %zu", int(k.size()), k.data(),
         std::string(value_type_name(elem)).c_str(), static_cast<unsigned long long>(count * es), raw.size());
  begin_kv(k, ValueType::ARRAY);
  put(static_cast<uint32_t>(elem));
  put(count);
  kv_bytes_.insert(kv_bytes_.end(), raw.begin(), raw.end());
}

void GgufWriter::add_kv(const KeyValue& kv) {
  if (kv.type == ValueType::STRING) return add_string(kv.key, kv.as_string());
  if (kv.type == ValueType::ARRAY) {
    if (kv.elem_type != ValueType::STRING)
      return add_array(kv.key, kv.elem_type, kv.count, {kv.data, kv.count * value_type_size(kv.elem_type)});
    std::vector<std::string> items;
    items.reserve(kv.count);
    for (uint64_t i = 0; i < kv.count; ++i) items.emplace_back(kv.string_at(i));
    return add_string_array(kv.key, items);
  }
  begin_kv(kv.key, kv.type);
  kv_bytes_.insert(kv_bytes_.end(), kv.data, kv.data + value_type_size(kv.type));
}

uint64_t GgufWriter::tensor_nbytes(DType type, const std::vector<uint64_t>& ne) {
  const DTypeInfo* info = dtype_info(static_cast<uint32_t>(type));
  if (!info || ne.empty() || ne.size() > 4 || ne[0] % info->block_elems != 0)
    fail("GGUF writer: bad tensor type or shape");
  uint64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  return ne[0] / info->block_elems * info->block_bytes * rows;
}

void GgufWriter::add_tensor(std::string_view name, DType type, std::vector<uint64_t> ne, std::vector<uint8_t> data) {
  const uint64_t nb = tensor_nbytes(type, ne);
  if (data.size() != nb)
    fail("GGUF writer: tensor '%.*s' needs %llu bytes, got %zu", int(name.size()), name.data(),
         static_cast<unsigned long long>(nb), data.size());
  tensors_.push_back({std::string(name), type, std::move(ne), nb, std::move(data), {}});
}

void GgufWriter::add_tensor(std::string_view name, DType type, std::vector<uint64_t> ne,
                            std::function<void(std::ostream&)> produce) {
  const uint64_t nb = tensor_nbytes(type, ne);
  tensors_.push_back({std::string(name), type, std::move(ne), nb, {}, std::move(produce)});
}

static void pad_to(std::ostream& out, uint64_t written, uint64_t align) {
  static const char zeros[256] = {};
  uint64_t pad = (align - written % align) % align;
  while (pad > 0) {
    const uint64_t n = pad < sizeof zeros ? pad : sizeof zeros;
    out.write(zeros, static_cast<std::streamsize>(n));
    pad -= n;
  }
}

void GgufWriter::write(std::ostream& out) const {
  std::vector<uint8_t> head;
  auto put_raw = [&](const void* p, size_t n) {
    head.insert(head.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  const uint32_t version = 3;
  const uint64_t n_tensors = tensors_.size();
  put_raw("GGUF", 4);
  put_raw(&version, 4);
  put_raw(&n_tensors, 8);
  put_raw(&n_kv_, 8);
  head.insert(head.end(), kv_bytes_.begin(), kv_bytes_.end());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    const uint32_t n_dims = static_cast<uint32_t>(t.ne.size());
    put_raw(&n_dims, 4);
    for (uint64_t ne : t.ne) put_raw(&ne, 8);
    const uint32_t type = static_cast<uint32_t>(t.type);
    put_raw(&type, 4);
    put_raw(&offset, 8);
    offset += (t.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  out.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  if (!tensors_.empty()) pad_to(out, head.size(), alignment_);
  for (const Tensor& t : tensors_) {
    const auto before = out.tellp();
    if (t.produce) {
      t.produce(out);
    } else {
      out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
    }
    if (before >= 0 && out.tellp() >= 0 && static_cast<uint64_t>(out.tellp() - before) != t.nbytes)
      fail("GGUF writer: tensor '%s' produced %lld bytes, expected %llu", t.name.c_str(),
           static_cast<long long>(out.tellp() - before), static_cast<unsigned long long>(t.nbytes));
    pad_to(out, t.nbytes, alignment_);
  }
  if (!out) fail("GGUF writer: write failed");
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::ostringstream ss(std::ios::binary);
  write(ss);
  const std::string s = ss.str();
  return {s.begin(), s.end()};
}

void GgufWriter::write_file(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("%s: cannot open for writing", tmp.c_str());
    write(out);
    out.flush();
    if (!out) fail("%s: write failed (disk full?)", tmp.c_str());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("%s: cannot rename to %s", tmp.c_str(), path.c_str());
}

}  // namespace sluice::gguf
