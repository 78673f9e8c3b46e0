// GGUF test support shared by the gtest (tests/unit/gguf) and the fuzz target (tests/fuzz).
// Nothing here depends on GoogleTest, so the fuzzer links it as plain code.
//
//  * RawFile: a tiny GGUF byte builder that writes exactly what it is told (wrong counts,
//    bad type ids, overridden string lengths, ...). The writer (gguf/writer.h) refuses to
//    produce malformed files, so malformed cases start from a RawFile.
//  * example_raw(): the 608-byte worked example of gguf.md §11 as a RawFile.
//  * malformed_cases(): the malformed corpus — the single source of truth. The gtest checks
//    every case; `sluice_gguf_corpus_tool DIR` (tests/tools) or `gguf_reader_fuzz --write-seeds=DIR`
//    writes them out as DIR/<name>.gguf fuzz seeds.
//  * touch_everything(): reads every value and every tensor's first/last byte of a parsed
//    file through the public accessors, so ASan sees any out-of-bounds view.
//  * check_invariants(): re-checks an accepted file independently of the reader.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/reader.h"

namespace sluice::gguf {

using Bytes = std::vector<uint8_t>;

// ---- little-endian encoders
inline void append(Bytes& b, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = b.size();
  b.resize(at + n);
  std::memcpy(b.data() + at, p, n);
}
template <class T>
void put_le(Bytes& b, T v) {
  append(b, &v, sizeof(T));  // hosts are little-endian (gguf.md §1)
}
// A gguf_string; `len` overrides the written length (the text bytes are written as given).
void put_str(Bytes& b, std::string_view s, std::optional<uint64_t> len = {});

template <class T>
Bytes enc(T v) {
  Bytes b;
  put_le(b, v);
  return b;
}
Bytes enc_str(std::string_view s, std::optional<uint64_t> len = {});
// Array header (element type, count) followed by `elems`, already encoded.
Bytes enc_arr(uint32_t elem_type, uint64_t count, const Bytes& elems = {});
Bytes enc_str_arr(const std::vector<std::string>& v);
Bytes concat(std::initializer_list<Bytes> parts);

// Value type ids as raw numbers (so tests can also write invalid ones).
inline constexpr uint32_t kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8,
                          kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12;

struct RawKv {
  RawKv(std::string k, uint32_t t, Bytes v, std::optional<uint64_t> klen = {})
      : key(std::move(k)), type(t), value(std::move(v)), key_len(klen) {}
  std::string key;
  uint32_t type;
  Bytes value;                      // encoded value bytes after the type id
  std::optional<uint64_t> key_len;  // written instead of key.size()
};

struct RawTensor {
  RawTensor(std::string n, uint32_t nd, std::vector<uint64_t> dims, uint32_t t, uint64_t off)
      : name(std::move(n)), n_dims(nd), ne(std::move(dims)), type(t), offset(off) {}
  std::string name;
  uint32_t n_dims;
  std::vector<uint64_t> ne;  // all written, whatever n_dims says
  uint32_t type;             // ggml type id
  uint64_t offset;
  std::optional<uint64_t> name_len;  // written instead of name.size()
};

struct RawFile {
  std::array<uint8_t, 4> magic{'G', 'G', 'U', 'F'};
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;  // default: tensors.size()
  std::optional<uint64_t> kv_count;      // default: kvs.size()
  std::vector<RawKv> kvs;
  std::vector<RawTensor> tensors;
  uint64_t pad_to = 32;  // padding between the infos and the data (if tensors)
  Bytes data;            // the data section, verbatim

  Bytes header_and_infos() const;   // everything up to E (end of tensor infos)
  Bytes bytes() const;              // the whole file
  RawKv& kv(std::string_view key);  // aborts if absent (test bug)
  RawTensor& tensor(std::string_view name);
};

// gguf.md §11: 3 KVs (architecture "test", alignment 32, tokens ["a", "<0x0A>"]) and
// tensors t.f32 (F32 [4,2] = 0..3.5), t.q4_0 (quants.md §3.5 block), t.q6_k (quants.md §8.6).
Bytes q4_0_example_block();  // 18 bytes
Bytes q6_k_example_block();  // 210 bytes
Bytes f32_example_data();    // 32 bytes: 0, 0.5, ..., 3.5
RawFile example_raw();       // serializes to the 608-byte file

struct MalformedCase {
  std::string name;  // also the corpus file name: <name>.gguf
  std::function<Bytes()> make;
  std::string expect;  // substring the error message must contain
  std::string spec;    // spec rows exercised, e.g. "§10 #5"
  ReadOptions opt = {};
};
const std::vector<MalformedCase>& malformed_cases();

// Valid files (writer-made and raw) used as fuzz seeds next to the malformed ones.
std::vector<std::pair<std::string, Bytes>> valid_seed_files();

// Writes every malformed case as DIR/<name>.gguf and every valid seed as
// DIR/valid_<name>.gguf (creates DIR). Returns the number of files. Throws sluice::Error.
size_t write_corpus(const std::string& dir);

// Reads every KV through the typed accessors (accessor errors are caught: only the
// accessors' own sluice::Error is expected) and every tensor's first and last data byte.
// Returns a checksum so the reads cannot be optimized away.
uint64_t touch_everything(const GgufFile& f);

// Independent re-check of an accepted file against the spec (§6, §10): returns an empty
// string when consistent, else a description of the first violated invariant.
std::string check_invariants(const GgufFile& f, std::span<const uint8_t> bytes);

}  // namespace sluice::gguf
