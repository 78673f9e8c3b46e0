#include "unit/gguf/gguf_corpus.h"

#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/dtype.h"
#include "base/error.h"
#include "gguf/writer.h"

namespace sluice::gguf {

// ---------------------------------------------------------------------------------------
// Encoders and the raw builder

void put_str(Bytes& b, std::string_view s, std::optional<uint64_t> len) {
  put_le<uint64_t>(b, len ? *len : s.size());
  append(b, s.data(), s.size());
}

Bytes enc_str(std::string_view s, std::optional<uint64_t> len) {
  Bytes b;
  put_str(b, s, len);
  return b;
}

Bytes enc_arr(uint32_t elem_type, uint64_t count, const Bytes& elems) {
  Bytes b;
  put_le(b, elem_type);
  put_le(b, count);
  append(b, elems.data(), elems.size());
  return b;
}

Bytes enc_str_arr(const std::vector<std::string>& v) {
  Bytes elems;
  for (const std::string& s : v) put_str(elems, s);
  return enc_arr(kString, v.size(), elems);
}

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) append(out, p.data(), p.size());
  return out;
}

Bytes RawFile::header_and_infos() const {
  Bytes b(magic.begin(), magic.end());
  put_le(b, version);
  put_le<uint64_t>(b, tensor_count ? *tensor_count : tensors.size());
  put_le<uint64_t>(b, kv_count ? *kv_count : kvs.size());
  for (const RawKv& kv : kvs) {
    put_str(b, kv.key, kv.key_len);
    put_le(b, kv.type);
    append(b, kv.value.data(), kv.value.size());
  }
  for (const RawTensor& t : tensors) {
    put_str(b, t.name, t.name_len);
    put_le(b, t.n_dims);
    for (uint64_t ne : t.ne) put_le(b, ne);
    put_le(b, t.type);
    put_le(b, t.offset);
  }
  return b;
}

Bytes RawFile::bytes() const {
  Bytes b = header_and_infos();
  if (!tensors.empty()) b.resize((b.size() + pad_to - 1) / pad_to * pad_to, 0);
  append(b, data.data(), data.size());
  return b;
}

RawKv& RawFile::kv(std::string_view key) {
  for (RawKv& kv : kvs)
    if (kv.key == key) return kv;
  std::abort();  // a bug in a test case, not in the reader
}

RawTensor& RawFile::tensor(std::string_view name) {
  for (RawTensor& t : tensors)
    if (t.name == name) return t;
  std::abort();
}

// ---------------------------------------------------------------------------------------
// gguf.md §11

Bytes q4_0_example_block() {  // quants.md §3.5 step 4
  return {0xC0, 0xB8, 0x6D, 0x6D, 0x5C, 0x5C, 0x5B, 0x4B, 0x4B, 0x3A, 0x3A, 0x39, 0x29, 0x28, 0x18, 0x18, 0x07, 0x07};
}

Bytes q6_k_example_block() {  // quants.md §8.6: ql[0], ql[32], qh[0], scales 0/2/4/6, d = 0.5
  Bytes b(210, 0);
  b[0] = 0xF5;
  b[32] = 0x09;
  b[128] = 0x36;
  b[192 + 0] = 2;
  b[192 + 2] = 0xFD;  // -3
  b[192 + 4] = 1;
  b[192 + 6] = 4;
  b[208] = 0x00;  // f16 0x3800 = 0.5
  b[209] = 0x38;
  return b;
}

Bytes f32_example_data() {
  Bytes b;
  for (int i = 0; i < 8; ++i) put_le(b, 0.5f * static_cast<float>(i));
  return b;
}

static void append_padded(Bytes& d, const Bytes& x, size_t align) {
  append(d, x.data(), x.size());
  d.resize((d.size() + align - 1) / align * align, 0);
}

RawFile example_raw() {
  RawFile f;
  f.kvs = {{"general.architecture", kString, enc_str("test")},
           {"general.alignment", kU32, enc<uint32_t>(32)},
           {"tokenizer.ggml.tokens", kArray, enc_str_arr({"a", "<0x0A>"})}};
  f.tensors = {{"t.f32", 2, {4, 2}, 0, 0}, {"t.q4_0", 2, {32, 1}, 2, 32}, {"t.q6_k", 1, {256}, 14, 64}};
  append_padded(f.data, f32_example_data(), 32);
  append_padded(f.data, q4_0_example_block(), 32);
  append_padded(f.data, q6_k_example_block(), 32);
  return f;
}

// ---------------------------------------------------------------------------------------
// The malformed corpus. Most cases are the §11 file with one thing broken; offsets in the
// comments refer to that file (E = 298, D = 320, size 608).

namespace {

using Mutation = std::function<void(RawFile&)>;

std::function<Bytes()> ex(Mutation m) {
  return [m] {
    RawFile f = example_raw();
    m(f);
    return f.bytes();
  };
}
std::function<Bytes()> ex_prefix(size_t n) {
  return [n] {
    Bytes b = example_raw().bytes();
    b.resize(n);
    return b;
  };
}
std::function<Bytes()> ex_patch(size_t at, Bytes patch) {
  return [at, patch] {
    Bytes b = example_raw().bytes();
    std::memcpy(b.data() + at, patch.data(), patch.size());
    return b;
  };
}
// An extra KV appended after the three of the example.
std::function<Bytes()> add_kv(RawKv kv) {
  return ex([kv](RawFile& f) { f.kvs.push_back(kv); });
}
std::function<Bytes()> set_kv(std::string key, uint32_t type, Bytes value) {
  return ex([=](RawFile& f) {
    RawKv& kv = f.kv(key);
    kv.type = type;
    kv.value = value;
  });
}
// Replaces t.q6_k's shape and type (data stays; most of these fail before placement).
std::function<Bytes()> set_q6k(uint32_t n_dims, std::vector<uint64_t> ne, uint32_t type = 14) {
  return ex([=](RawFile& f) {
    RawTensor& t = f.tensor("t.q6_k");
    t.n_dims = n_dims;
    t.ne = ne;
    t.type = type;
  });
}

constexpr uint64_t kI64Max = 0x7FFFFFFFFFFFFFFFull;
constexpr uint64_t k2p63 = 1ull << 63;

std::vector<MalformedCase> build_cases() {
  std::vector<MalformedCase> c;
  auto add = [&](std::string name, std::function<Bytes()> make, std::string expect, std::string spec,
                 ReadOptions opt = {}) {
    c.push_back({std::move(name), std::move(make), std::move(expect), std::move(spec), opt});
  };

  // ---- header (§3, §10 #1-#4)
  add(
      "empty_file", [] { return Bytes{}; }, "file is 0 bytes, too small for a GGUF header", "§10 #1");
  add("header_23_bytes", ex_prefix(23), "file is 23 bytes, too small", "§10 #1");
  add("magic_ggml", ex_patch(0, {'G', 'G', 'M', 'L'}), "not a GGUF file: magic is 'GGML'", "§10 #2");
  add("magic_binary", ex_patch(0, {0x00, 0xFF, 0x7F, 0x0A}), "not a GGUF file: magic is '\\x00\\xff\\x7f\\x0a'",
      "§10 #2");
  add("magic_fugg", ex_patch(0, {'F', 'U', 'G', 'G'}), "big-endian GGUF files are not supported", "§3.2");
  add("version_0", ex([](RawFile& f) { f.version = 0; }), "unsupported GGUF version 0", "§3.1, §10 #3");
  add("version_1", ex([](RawFile& f) { f.version = 1; }), "GGUF version 1 is no longer supported", "§3.1, §10 #3");
  add("version_4", ex([](RawFile& f) { f.version = 4; }), "unsupported GGUF version 4", "§3.1, §10 #3");
  add("version_byteswapped", ex([](RawFile& f) { f.version = 0x03000000; }),
      "version field is 50331648: a big-endian GGUF file (byte-order mismatch)", "§3.1, §10 #3");
  add("version_ffffffff", ex([](RawFile& f) { f.version = 0xFFFFFFFF; }), "unsupported GGUF version 4294967295",
      "§10 #3");
  add("tensor_count_i64max", ex([](RawFile& f) { f.tensor_count = kI64Max; }),
      "tensor count 9223372036854775807 cannot fit in a file of 608 bytes", "§9.3, §10 #4");
  add("tensor_count_2p63", ex([](RawFile& f) { f.tensor_count = k2p63; }),
      "tensor count 9223372036854775808 cannot fit", "§10 #4 (negative as i64)");
  add("kv_count_2p40", ex([](RawFile& f) { f.kv_count = 1ull << 40; }),
      "metadata count 1099511627776 cannot fit in a file of 608 bytes", "§9.3, §10 #4");
  add("kv_count_i64max", ex([](RawFile& f) { f.kv_count = kI64Max; }), "metadata count 9223372036854775807 cannot fit",
      "§10 #4");
  add("kv_count_u64max", ex([](RawFile& f) { f.kv_count = UINT64_MAX; }),
      "metadata count 18446744073709551615 cannot fit", "§10 #4");
  // Each count alone fits (30*14 <= 584, 10*33 <= 584) but both together do not.
  add("counts_cannot_fit_together", ex([](RawFile& f) {
        f.kv_count = 30;
        f.tensor_count = 10;
      }),
      "metadata count 30 and tensor count 10 cannot fit", "§9.3");
  // One KV too many: the 4th "KV" is read from t.f32's info record (key "t.f32", type 2 = u16
  // taken from n_dims); the first tensor record then starts mid-dimension with a huge name length.
  add("kv_count_one_too_many", ex([](RawFile& f) { f.kv_count = 4; }), "tensor name at offset 188 has length",
      "§10 #5");
  // One tensor too many: the 4th record is read from the zero padding at E: an empty name.
  add("tensor_count_one_too_many", ex([](RawFile& f) { f.tensor_count = 4; }),
      "tensor 3 at offset 298 has an empty name", "§10 #12");

  // ---- truncation (§10 #1; the full sweep is a separate test)
  add("truncated_in_tensor_name", ex_prefix(170), "unexpected end of file while reading tensor name at offset 169",
      "§10 #1");
  add("truncated_in_tensor_dims", ex_prefix(200), "unexpected end of file while reading tensor dimension at offset 194",
      "§10 #1");
  add("truncated_in_tensor_offset", ex_prefix(296),
      "unexpected end of file while reading tensor data offset at offset 290", "§10 #1");

  // ---- strings (§1, §10 #5)
  add("key_len_u64max", ex([](RawFile& f) { f.kvs[0].key_len = UINT64_MAX; }),
      "metadata key at offset 24 has length 18446744073709551615, above the limit of 1073741824 bytes", "§10 #5");
  add("key_len_over_1gib", ex([](RawFile& f) { f.kvs[0].key_len = (1ull << 30) + 1; }),
      "metadata key at offset 24 has length 1073741825, above the limit", "§10 #5");
  add("key_len_past_end", ex([](RawFile& f) { f.kvs[0].key_len = 577; }),
      "unexpected end of file while reading metadata key at offset 32 (need 577 bytes, 576 left)", "§10 #5");
  add("string_value_over_1gib", set_kv("general.architecture", kString, enc_str("test", (1ull << 30) + 1)),
      "string value at offset 56 has length 1073741825, above the limit", "§10 #5");
  add("string_value_past_end", set_kv("general.architecture", kString, enc_str("test", 1000)),
      "unexpected end of file while reading string value at offset 64", "§10 #5");
  add("string_array_elem_past_end",
      set_kv("tokenizer.ggml.tokens", kArray, enc_arr(kString, 2, concat({enc_str("a"), enc_str("<0x0A>", 10000)}))),
      "unexpected end of file while reading array string", "§9.4, §10 #5");

  // ---- keys and value types (§4, §10 #6-#10)
  add("empty_key", ex([](RawFile& f) { f.kvs[0].key = ""; }), "metadata key 0 at offset 24 is empty", "§10 #6");
  // gguf.md §11 negative variant: a second general.alignment.
  add("duplicate_key", add_kv({"general.alignment", kU32, enc<uint32_t>(32)}),
      "duplicate metadata key 'general.alignment' at offset 169", "§10 #7, §11");
  add("value_type_13", set_kv("general.architecture", 13, enc_str("test")),
      "key 'general.architecture' has invalid value type 13 at offset 52", "§10 #8");
  add("value_type_ffffffff", set_kv("general.architecture", 0xFFFFFFFF, enc_str("test")),
      "key 'general.architecture' has invalid value type 4294967295", "§10 #8");
  add("array_elem_type_13", add_kv({"x.arr", kArray, enc_arr(13, 1, {0, 0, 0, 0})}),
      "key 'x.arr' has invalid value type 13", "§10 #9");
  add("nested_array", add_kv({"x.nested", kArray, enc_arr(kArray, 1, enc_arr(kU8, 1, {7}))}),
      "key 'x.nested' is a nested array", "§4.2, §10 #9");
  add("array_count_over_2p30", add_kv({"x.arr", kArray, enc_arr(kU8, (1ull << 30) + 1)}),
      "key 'x.arr' array at offset 190 has 1073741825 elements, above the limit of 1073741824", "§10 #9");
  add("array_count_u64max", add_kv({"x.arr", kArray, enc_arr(kU32, UINT64_MAX)}),
      "has 18446744073709551615 elements, above the limit", "§10 #9");
  add("array_u32_exceeds_file", add_kv({"x.arr", kArray, enc_arr(kU32, 1000, enc<uint32_t>(1))}),
      "key 'x.arr' array of 1000 u32 elements at offset 190 exceeds the file", "§9.4, §10 #9");
  add("array_f64_exceeds_file", add_kv({"x.arr", kArray, enc_arr(kF64, 100)}), "key 'x.arr' array of 100 f64 elements",
      "§9.4, §10 #9");
  // 100 strings need >= 800 bytes; 462 are left after the count.
  add("string_array_count_exceeds_file", set_kv("tokenizer.ggml.tokens", kArray, enc_arr(kString, 100, enc_str("a"))),
      "key 'tokenizer.ggml.tokens' string array of 100 elements at offset 138 exceeds the file", "§9.4, §10 #9");
  add("bool_byte_2", add_kv({"x.flag", kBool, {2}}), "key 'x.flag' has bool byte 2 at offset 187 (must be 0 or 1)",
      "§10 #10");
  add("bool_byte_ff", add_kv({"x.flag", kBool, {0xFF}}), "key 'x.flag' has bool byte 255", "§10 #10");
  add("bool_array_byte_2", add_kv({"x.flags", kArray, enc_arr(kBool, 3, {0, 1, 2})}),
      "key 'x.flags' has bool byte 2 at offset 202", "§10 #10");

  // ---- keys the container interprets (§4.4, §10 #11)
  add("alignment_u64", set_kv("general.alignment", kU64, enc<uint64_t>(32)),
      "key 'general.alignment' must be of type u32 but is u64", "§4.4, §10 #11");
  add("alignment_i32", set_kv("general.alignment", kI32, enc<int32_t>(32)),
      "key 'general.alignment' must be of type u32 but is i32", "§10 #11");
  add("alignment_string", set_kv("general.alignment", kString, enc_str("32")),
      "key 'general.alignment' must be of type u32 but is string", "§10 #11");
  add("alignment_array", set_kv("general.alignment", kArray, enc_arr(kU32, 1, enc<uint32_t>(32))),
      "must be of type u32 but is array[u32,1]", "§10 #11");
  add("alignment_0", set_kv("general.alignment", kU32, enc<uint32_t>(0)),
      "key 'general.alignment' is 0, not a non-zero power of 2", "§10 #11");
  add("alignment_48", set_kv("general.alignment", kU32, enc<uint32_t>(48)),
      "key 'general.alignment' is 48, not a non-zero power of 2", "§10 #11");
  // A legal power of two, but the data section would start at 2^31.
  add("alignment_2p31", set_kv("general.alignment", kU32, enc<uint32_t>(1u << 31)),
      "data section would start at offset 2147483648, past the end of the 608-byte file", "§10 #11, #23");
  // Legal alignment 64, but the tensors were laid out for 32 (D = 320 is 64-aligned; t.q4_0 is not).
  add("alignment_64_offsets_for_32", set_kv("general.alignment", kU32, enc<uint32_t>(64)),
      "tensor 't.q4_0' has data offset 32, expected 64", "§6.3, §10 #21");
  add("architecture_u32", set_kv("general.architecture", kU32, enc<uint32_t>(3)),
      "key 'general.architecture' must be string but is u32", "§4.4, §10 #25");
  add("tokens_array_u32",
      set_kv("tokenizer.ggml.tokens", kArray, enc_arr(kU32, 2, concat({enc<uint32_t>(1), enc<uint32_t>(2)}))),
      "key 'tokenizer.ggml.tokens' must be array[string] but is array[u32,2]", "§10 #25, #27");
  add("scores_array_string", add_kv({"tokenizer.ggml.scores", kArray, enc_str_arr({"0"})}),
      "key 'tokenizer.ggml.scores' must be array[f32] but is array[string,1]", "§10 #27");
  add("quantization_version_string", add_kv({"general.quantization_version", kString, enc_str("2")}),
      "key 'general.quantization_version' must be an integer but is string", "§4.4");
  add("split_count_2", add_kv({"split.count", kU16, enc<uint16_t>(2)}),
      "this is one shard of a split GGUF (split.count = 2)", "§4.4");
  // A u64 split.count >= 2^63 must not wrap to a negative number and slip through.
  add("split_count_u64_2p63", add_kv({"split.count", kU64, enc<uint64_t>(k2p63)}),
      "this is one shard of a split GGUF (split.count = 9223372036854775808)", "§4.4");

  // ---- tensor info records (§5, §10 #12-#20)
  add("tensor_name_empty", ex([](RawFile& f) { f.tensors[1].name = ""; }), "tensor 1 at offset 214 has an empty name",
      "§10 #12");
  add("tensor_name_64_bytes", ex([](RawFile& f) { f.tensors[0].name = std::string(64, 'n'); }),
      "tensor 0 at offset 169: name is 64 bytes long, the limit is 63", "§5, §10 #12");
  add("tensor_name_len_over_1gib", ex([](RawFile& f) { f.tensors[0].name_len = 1ull << 40; }),
      "tensor name at offset 169 has length 1099511627776, above the limit", "§10 #5");
  add("tensor_name_len_past_end", ex([](RawFile& f) { f.tensors[2].name_len = 1000; }),
      "unexpected end of file while reading tensor name", "§10 #5");
  add("duplicate_tensor_name", ex([](RawFile& f) { f.tensors[1].name = "t.f32"; }),
      "duplicate tensor name 't.f32' (tensor 1)", "§10 #12");
  add("n_dims_0", set_q6k(0, {}), "tensor 't.q6_k' has 0 dimensions (must be 1 to 4)", "§5, §10 #13");
  add("n_dims_5", set_q6k(5, {256, 1, 1, 1, 1}), "tensor 't.q6_k' has 5 dimensions (must be 1 to 4)", "§10 #13");
  add("n_dims_u32max", set_q6k(0xFFFFFFFF, {256}), "has 4294967295 dimensions", "§10 #13");
  add("dim_zero", set_q6k(2, {256, 0}), "tensor 't.q6_k' has a zero-sized dimension 1", "§10 #15");
  add("dim_2p63", set_q6k(2, {256, k2p63}),
      "tensor 't.q6_k' dimension 1 has invalid size 9223372036854775808 (>= 2^63)", "§10 #14");
  add("dim_u64max", set_q6k(1, {UINT64_MAX}), "dimension 0 has invalid size 18446744073709551615", "§10 #14");
  // 2^32 * 2^32 wraps to 0 in 64 bits; 2^31 * 2^32 = 2^63 does not wrap but is >= INT64_MAX.
  add("elements_wrap_u64", set_q6k(2, {1ull << 32, 1ull << 32}, 0),
      "tensor 't.q6_k': total number of elements overflows at dimension 1", "§10 #16");
  add("elements_2p63", set_q6k(2, {1ull << 31, 1ull << 32}, 0),
      "tensor 't.q6_k': total number of elements overflows at dimension 1", "§10 #16");
  add("elements_overflow_dim3", set_q6k(4, {256, 1ull << 20, 1ull << 20, 1ull << 24}),
      "total number of elements overflows at dimension 3", "§10 #16");
  // F32 [2^62]: 2^62 elements is fine, but 2^62 * 4 bytes wraps to 0.
  add("bytes_overflow_row", set_q6k(1, {1ull << 62}, 0),
      "tensor 't.q6_k' with shape [4611686018427387904] has a byte size that overflows", "§10 #20");
  // F32 [2^40, 2^22]: a 2^42-byte row times 2^22 rows = 2^64.
  add("bytes_overflow_rows", set_q6k(2, {1ull << 40, 1ull << 22}, 0),
      "tensor 't.q6_k' with shape [1099511627776, 4194304] has a byte size that overflows", "§10 #20");
  add("type_4_removed", set_q6k(1, {256}, 4), "tensor 't.q6_k' has invalid ggml type 4 at offset 286",
      "§8, §10 #17, §11");
  add("type_31_removed", set_q6k(1, {256}, 31), "has invalid ggml type 31", "§8, §10 #17");
  add("type_43", set_q6k(1, {256}, 43), "has invalid ggml type 43", "§10 #17");
  add("type_99", set_q6k(1, {256}, 99), "tensor 't.q6_k' has invalid ggml type 99", "§10 #17");
  add("type_ffffffff", set_q6k(1, {256}, 0xFFFFFFFF), "has invalid ggml type 4294967295", "§10 #17");
  add("type_iq2_xxs_unsupported", set_q6k(1, {256}, 16),
      "tensor 't.q6_k' uses type 16 (iq2_xxs), which sluice does not support", "§8, §10 #18");
  add("type_q8_k_unsupported", set_q6k(1, {256}, 15), "uses type 15 (q8_K)", "§8, §10 #18");
  add("q4_0_row_33", ex([](RawFile& f) {
        f.tensors[1].ne = {33, 1};
      }),
      "tensor 't.q4_0' of type q4_0 has 33 elements per row, not a multiple of the block size 32", "§6.2, §10 #19");
  add("q6_k_row_128", set_q6k(1, {128}), "has 128 elements per row, not a multiple of the block size 256", "§10 #19");
  // The block-size check also applies to accepted unsupported types.
  add("iq2_xxs_row_100_allowed", set_q6k(1, {100}, 16), "iq2_xxs has 100 elements per row", "§10 #19",
      ReadOptions{.allow_unsupported_types = true});

  // ---- placement (§6, §10 #21-#24)
  add("offset_unaligned", ex([](RawFile& f) { f.tensors[1].offset = 16; }),
      "tensor 't.q4_0' has data offset 16, expected 32", "§6.3, §10 #21");
  add("offset_first_nonzero", ex([](RawFile& f) { f.tensors[0].offset = 32; }),
      "tensor 't.f32' has data offset 32, expected 0", "§6.3, §10 #21");
  // gguf.md §11 negative variant: a 32-byte hole before t.q6_k (aligned and in bounds).
  add("gap_32_bytes", ex([](RawFile& f) {
        f.tensors[2].offset = 96;
        f.data.insert(f.data.begin() + 64, 32, 0);
      }),
      "tensor 't.q6_k' has data offset 96, expected 64", "§6.3, §10 #21, §11");
  add("overlapping_tensors", ex([](RawFile& f) { f.tensors[1].offset = 0; }),
      "tensor 't.q4_0' has data offset 0, expected 32", "§6.3, §10 #21");
  add("out_of_order_offsets", ex([](RawFile& f) { std::swap(f.tensors[1].offset, f.tensors[2].offset); }),
      "tensor 't.q4_0' has data offset 64, expected 32", "§6.3, §10 #21");
  add("offset_u64max", ex([](RawFile& f) { f.tensors[2].offset = UINT64_MAX - 31; }),
      "tensor 't.q6_k' has data offset 18446744073709551584, expected 64", "§10 #21, #22");
  add("data_truncated", ex_prefix(500),
      "tensor 't.q6_k' data [64, +210) is not within the file (500 bytes): corrupted or truncated", "§6.3, §10 #24");
  add("data_truncated_one_byte", ex_prefix(593), "tensor 't.q6_k' data [64, +210) is not within the file (593 bytes)",
      "§10 #24");
  add("data_section_missing", ex_prefix(298),
      "data section would start at offset 320, past the end of the 298-byte file", "§6.1, §10 #23");
  add("data_section_in_padding", ex_prefix(319),
      "data section would start at offset 320, past the end of the 319-byte file", "§10 #23");
  add("data_section_empty", ex_prefix(320), "tensor 't.f32' data [0, +32) is not within the file (320 bytes)",
      "§10 #24");
  // F32 [2^40]: no overflow anywhere, just 4 TiB of data in a 608-byte file.
  add("tensor_bytes_exceed_file", set_q6k(1, {1ull << 40}, 0),
      "tensor 't.q6_k' data [64, +4398046511104) is not within the file", "§10 #24");
  return c;
}

}  // namespace

const std::vector<MalformedCase>& malformed_cases() {
  static const std::vector<MalformedCase> cases = build_cases();
  return cases;
}

// ---------------------------------------------------------------------------------------
// Valid seeds

std::vector<std::pair<std::string, Bytes>> valid_seed_files() {
  std::vector<std::pair<std::string, Bytes>> out;
  out.emplace_back("example", example_raw().bytes());
  {
    RawFile f = example_raw();
    f.version = 2;
    out.emplace_back("example_v2", f.bytes());
  }
  {
    GgufWriter w;
    w.add_string("general.architecture", "gemma3");
    w.add_u8("t.u8", 200);
    w.add_i8("t.i8", -100);
    w.add_u16("t.u16", 60000);
    w.add_i16("t.i16", -30000);
    w.add_u32("t.u32", 4000000000u);
    w.add_i32("t.i32", -2000000000);
    w.add_u64("t.u64", UINT64_MAX);
    w.add_i64("t.i64", INT64_MIN);
    w.add_f32("t.f32", 1.5f);
    w.add_f64("t.f64", -2.25);
    w.add_bool("t.bool", true);
    w.add_string("t.empty", "");
    w.add_array("t.arr_u32", ValueType::U32, std::vector<uint32_t>{1, 2, 3});
    w.add_array("t.arr_i16", ValueType::I16, std::vector<int16_t>{-1, 5});
    w.add_array("t.arr_f32", ValueType::F32, std::vector<float>{0.25f, -1.0f});
    w.add_array("t.arr_bool", ValueType::BOOL, std::vector<uint8_t>{0, 1, 1});
    w.add_array("t.arr_empty", ValueType::U64, std::vector<uint64_t>{});
    w.add_string_array("tokenizer.ggml.tokens", {"<pad>", "", "a", "bc"});
    w.add_tensor("w.f16", DType::F16, {8, 2}, Bytes(32, 0x3C));
    w.add_tensor("w.q8_0", DType::Q8_0, {32}, Bytes(34, 0x11));
    w.add_tensor("w.q4_k", DType::Q4_K, {256}, Bytes(144, 0x22));
    out.emplace_back("writer_all_types", w.to_bytes());
  }
  {
    GgufWriter w(64);
    w.add_tensor("a", DType::F32, {3}, Bytes(12, 1));
    w.add_tensor("b", DType::BF16, {5, 1, 1, 2}, Bytes(20, 2));
    out.emplace_back("writer_align64", w.to_bytes());
  }
  {
    GgufWriter w(1);
    w.add_tensor("a", DType::Q5_0, {32}, Bytes(22, 3));
    w.add_tensor("b", DType::F16, {3}, Bytes(6, 4));
    out.emplace_back("writer_align1", w.to_bytes());
  }
  {
    GgufWriter w;
    w.add_string("general.architecture", "none");
    out.emplace_back("writer_no_tensors", w.to_bytes());
  }
  return out;
}

size_t write_corpus(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("%s: cannot create directory: %s", dir.c_str(), ec.message().c_str());
  size_t n = 0;
  auto write = [&](const std::string& name, const Bytes& b) {
    const std::string path = dir + "/" + name + ".gguf";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!out) fail("%s: write failed", path.c_str());
    ++n;
  };
  for (const MalformedCase& mc : malformed_cases()) write(mc.name, mc.make());
  for (const auto& [name, b] : valid_seed_files()) write("valid_" + name, b);
  return n;
}

// ---------------------------------------------------------------------------------------
// Walkers

uint64_t touch_everything(const GgufFile& f) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  auto mix_str = [&](std::string_view s) {
    mix(s.size());
    for (char ch : s) mix(static_cast<uint8_t>(ch));
  };
  // Accessor calls whose failure is a legitimate answer for this value (out of range, ...).
  auto guarded = [&](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      mix_str(e.what());
    }
  };
  mix(f.version());
  mix(f.alignment());
  mix(f.data_offset());
  for (const KeyValue& kv : f.kvs()) {
    const std::string_view key = kv.key;
    mix_str(key);
    mix_str(kv.type_string());
    if (f.find(key) != &kv) mix(0xBAD);
    switch (kv.type) {
      case ValueType::STRING:
        mix_str(f.get_string(key));
        mix_str(f.get_string_or(key, "x"));
        break;
      case ValueType::BOOL:
        mix(f.get_bool(key));
        mix(f.get_bool_or(key, false));
        break;
      case ValueType::F32:
      case ValueType::F64:
        mix(std::bit_cast<uint64_t>(f.get_float(key)));
        mix(std::bit_cast<uint64_t>(f.get_float_or(key, 0.0)));
        break;
      case ValueType::ARRAY: {
        const KeyValue& a = f.get_array(key, kv.elem_type);
        for (uint64_t i = 0; i < a.count; ++i) {
          if (a.elem_type == ValueType::STRING) {
            mix_str(a.string_at(i));
          } else if (a.elem_type == ValueType::BOOL) {
            mix(*a.elem_ptr(i));
          } else {
            if (is_integer(a.elem_type)) guarded([&] { mix(f.array_uint(a, i)); });
            mix(std::bit_cast<uint64_t>(f.array_float(a, i)));
          }
        }
        guarded([&] { mix(f.array_uint(a, a.count)); });  // one past the end: an error
        guarded([&] { mix(f.get_uint_per_layer(key, a.count).size()); });
        break;
      }
      default:  // integers
        guarded([&] { mix(f.get_uint(key)); });
        guarded([&] { mix(f.get_uint(key, 1000)); });
        guarded([&] { mix(static_cast<uint64_t>(f.get_int(key))); });
        guarded([&] { mix(f.get_uint_or(key, 7)); });
        guarded([&] { mix(f.get_uint_per_layer(key, 3).size()); });
        break;
    }
    // Wrong-type paths build messages from the value's type string.
    if (kv.type != ValueType::STRING) guarded([&] { mix_str(f.get_string(key)); });
    if (kv.type != ValueType::ARRAY) guarded([&] { mix(f.get_array(key).count); });
    if (kv.type != ValueType::BOOL) guarded([&] { mix(f.get_bool(key)); });
  }
  for (const TensorInfo& t : f.tensors()) {
    mix_str(t.name);
    mix_str(t.shape_string());
    mix(t.n_elements());
    mix(t.rows());
    mix(t.row_bytes());
    if (f.find_tensor(t.name) != &t) mix(0xBAD);
    if (t.nbytes > 0) {
      mix(t.data[0]);
      mix(t.data[t.nbytes - 1]);
    }
  }
  return h;
}

std::string check_invariants(const GgufFile& f, std::span<const uint8_t> b) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(b.data()), hi = lo + b.size();
  auto inside = [&](const void* p, uint64_t n) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return a >= lo && a <= hi && n <= hi - a;
  };
  if (f.file_size() != b.size()) return "file_size() differs from the input size";
  if (f.version() != 2 && f.version() != 3) return strfmt("version %u accepted", f.version());
  const uint64_t a = f.alignment();
  if (a == 0 || (a & (a - 1)) != 0) return strfmt("alignment %llu accepted", static_cast<unsigned long long>(a));
  const uint64_t d = f.data_offset();
  if (d > b.size()) return "data offset past the end of the file";
  if (!f.tensors().empty() && d % a != 0) return "data offset not aligned";
  std::set<std::string_view> keys;
  for (const KeyValue& kv : f.kvs()) {
    const std::string k(kv.key);
    if (kv.key.empty() || !keys.insert(kv.key).second) return "empty or duplicate key '" + k + "'";
    if (!inside(kv.key.data(), kv.key.size())) return "key outside the file";
    if (static_cast<uint32_t>(kv.type) >= kValueTypeCount) return "bad type for '" + k + "'";
    if (kv.type == ValueType::STRING && !inside(kv.data, kv.str_len)) return "string outside the file: " + k;
    if (kv.type == ValueType::ARRAY) {
      if (kv.elem_type == ValueType::ARRAY || static_cast<uint32_t>(kv.elem_type) >= kValueTypeCount)
        return "bad element type for '" + k + "'";
      if (kv.elem_type == ValueType::STRING) {
        if (kv.str_offsets.size() != kv.count || kv.str_lens.size() != kv.count) return "string array index: " + k;
        for (uint64_t i = 0; i < kv.count; ++i)
          if (!inside(kv.string_at(i).data(), kv.str_lens[i])) return "array string outside the file: " + k;
      } else {
        const uint64_t es = value_type_size(kv.elem_type);
        if (kv.count > b.size() || !inside(kv.data, kv.count * es)) return "array outside the file: " + k;
        if (kv.elem_type == ValueType::BOOL)
          for (uint64_t i = 0; i < kv.count; ++i)
            if (kv.data[i] > 1) return "bool array element > 1: " + k;
      }
    } else if (kv.type != ValueType::STRING) {
      if (!inside(kv.data, value_type_size(kv.type))) return "scalar outside the file: " + k;
      if (kv.type == ValueType::BOOL && *kv.data > 1) return "bool > 1: " + k;
    }
  }
  std::set<std::string_view> names;
  uint64_t expected = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (t.name.empty() || t.name.size() > 63 || !names.insert(t.name).second) return "bad tensor name '" + t.name + "'";
    if (t.n_dims < 1 || t.n_dims > 4) return "n_dims of " + t.name;
    unsigned __int128 n_el = 1;
    for (uint32_t i = 0; i < 4; ++i) {
      if (t.ne[i] == 0 || (i >= t.n_dims && t.ne[i] != 1)) return "dims of " + t.name;
      n_el *= t.ne[i];
      if (n_el >= (static_cast<unsigned __int128>(1) << 63)) return "element count of " + t.name;
    }
    const DTypeInfo* info = dtype_info(static_cast<uint32_t>(t.type));
    if (info == nullptr || t.ne[0] % info->block_elems != 0) return "type/block of " + t.name;
    const unsigned __int128 nbytes = static_cast<unsigned __int128>(t.ne[0] / info->block_elems) * info->block_bytes *
                                     t.ne[1] * t.ne[2] * t.ne[3];
    if (nbytes != t.nbytes) return "nbytes of " + t.name;
    if (t.offset != expected || t.offset % a != 0) return "offset of " + t.name;
    if (t.offset > b.size() || d + t.offset > b.size() || t.nbytes > b.size() - d - t.offset)
      return "data of " + t.name + " outside the file";
    if (t.data != b.data() + d + t.offset) return "data pointer of " + t.name;
    expected += (t.nbytes + a - 1) / a * a;
  }
  return {};
}

}  // namespace sluice::gguf
