// GGUF reader and writer: the gguf.md §11 worked example byte for byte, writer -> reader
// round trips of every value type and of tensors of many types/shapes/alignments, and the
// success and error paths of every typed accessor.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "base/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "unit/gguf/gguf_corpus.h"

namespace sluice::gguf {
namespace {

// Expects `fn` to throw sluice::Error whose message contains every one of `parts`.
template <class Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string_view> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (std::string_view p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
  }
}

Bytes hex(std::initializer_list<const char*> rows) {
  Bytes out;
  for (const char* row : rows) {
    std::istringstream in(row);
    std::string tok;
    while (in >> tok) out.push_back(static_cast<uint8_t>(std::stoul(tok, nullptr, 16)));
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// gguf.md §11, transcribed from the spec's hex dump (row 0x180 onwards is elided in the
// dump: it is the quants.md §8.6 Q6_K block, then zero padding to 608).

Bytes example_from_hex_dump() {
  Bytes b = hex({
      "47 47 55 46 03 00 00 00 03 00 00 00 00 00 00 00",  // 0000
      "03 00 00 00 00 00 00 00 14 00 00 00 00 00 00 00",  // 0010
      "67 65 6e 65 72 61 6c 2e 61 72 63 68 69 74 65 63",  // 0020
      "74 75 72 65 08 00 00 00 04 00 00 00 00 00 00 00",  // 0030
      "74 65 73 74 11 00 00 00 00 00 00 00 67 65 6e 65",  // 0040
      "72 61 6c 2e 61 6c 69 67 6e 6d 65 6e 74 04 00 00",  // 0050
      "00 20 00 00 00 15 00 00 00 00 00 00 00 74 6f 6b",  // 0060
      "65 6e 69 7a 65 72 2e 67 67 6d 6c 2e 74 6f 6b 65",  // 0070
      "6e 73 09 00 00 00 08 00 00 00 02 00 00 00 00 00",  // 0080
      "00 00 01 00 00 00 00 00 00 00 61 06 00 00 00 00",  // 0090
      "00 00 00 3c 30 78 30 41 3e 05 00 00 00 00 00 00",  // 00a0
      "00 74 2e 66 33 32 02 00 00 00 04 00 00 00 00 00",  // 00b0
      "00 00 02 00 00 00 00 00 00 00 00 00 00 00 00 00",  // 00c0
      "00 00 00 00 00 00 06 00 00 00 00 00 00 00 74 2e",  // 00d0
      "71 34 5f 30 02 00 00 00 20 00 00 00 00 00 00 00",  // 00e0
      "01 00 00 00 00 00 00 00 02 00 00 00 20 00 00 00",  // 00f0
      "00 00 00 00 06 00 00 00 00 00 00 00 74 2e 71 36",  // 0100
      "5f 6b 01 00 00 00 00 01 00 00 00 00 00 00 0e 00",  // 0110
      "00 00 40 00 00 00 00 00 00 00 00 00 00 00 00 00",  // 0120
      "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",  // 0130
      "00 00 00 00 00 00 00 3f 00 00 80 3f 00 00 c0 3f",  // 0140
      "00 00 00 40 00 00 20 40 00 00 40 40 00 00 60 40",  // 0150
      "c0 b8 6d 6d 5c 5c 5b 4b 4b 3a 3a 39 29 28 18 18",  // 0160
      "07 07 00 00 00 00 00 00 00 00 00 00 00 00 00 00",  // 0170
  });
  EXPECT_EQ(b.size(), 0x180u);
  const Bytes q6k = q6_k_example_block();
  b.insert(b.end(), q6k.begin(), q6k.end());
  b.resize(608, 0);
  return b;
}

TEST(GgufExample, HexDumpParses) {
  const Bytes b = example_from_hex_dump();
  auto f = GgufFile::parse(b, "example.gguf");
  EXPECT_EQ(f->name(), "example.gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), 320u);
  EXPECT_EQ(f->file_size(), 608u);
  ASSERT_EQ(f->kvs().size(), 3u);
  EXPECT_EQ(f->kvs()[0].key, "general.architecture");
  EXPECT_EQ(f->kvs()[0].file_offset, 24u);
  EXPECT_EQ(f->get_string("general.architecture"), "test");
  EXPECT_EQ(f->get_uint("general.alignment"), 32u);
  const KeyValue& tok = f->get_array("tokenizer.ggml.tokens", ValueType::STRING);
  ASSERT_EQ(tok.count, 2u);
  EXPECT_EQ(tok.string_at(0), "a");
  EXPECT_EQ(tok.string_at(1), "<0x0A>");
  EXPECT_EQ(tok.type_string(), "array[string,2]");

  ASSERT_EQ(f->tensors().size(), 3u);
  const TensorInfo& tf = f->tensors()[0];
  const TensorInfo& tq4 = f->tensors()[1];
  const TensorInfo& tq6 = f->tensors()[2];
  EXPECT_EQ(tf.name, "t.f32");
  EXPECT_EQ(tq4.name, "t.q4_0");
  EXPECT_EQ(tq6.name, "t.q6_k");
  EXPECT_EQ(tf.offset, 0u);
  EXPECT_EQ(tq4.offset, 32u);
  EXPECT_EQ(tq6.offset, 64u);
  EXPECT_EQ(tf.info_offset, 169u);
  EXPECT_EQ(tf.type, DType::F32);
  EXPECT_EQ(tq4.type, DType::Q4_0);
  EXPECT_EQ(tq6.type, DType::Q6_K);
  EXPECT_EQ(tf.n_dims, 2u);
  EXPECT_EQ(tf.shape_string(), "[4, 2]");
  EXPECT_EQ(tq4.shape_string(), "[32, 1]");
  EXPECT_EQ(tq6.shape_string(), "[256]");
  EXPECT_EQ((std::array<uint64_t, 4>{256, 1, 1, 1}), tq6.ne);
  EXPECT_EQ(tf.nbytes, 32u);
  EXPECT_EQ(tq4.nbytes, 18u);
  EXPECT_EQ(tq6.nbytes, 210u);
  EXPECT_EQ(tf.row_bytes(), 16u);  // nb[1] = 16 (§7)
  EXPECT_EQ(tf.rows(), 2u);
  EXPECT_EQ(tf.n_elements(), 8u);
  EXPECT_EQ(tf.data, b.data() + 320);
  EXPECT_EQ(tq4.data, b.data() + 352);
  EXPECT_EQ(tq6.data, b.data() + 384);
  EXPECT_EQ(f->data_offset() + 288, f->file_size());  // every tensor padded, incl. the last
  for (int i = 0; i < 8; ++i) {
    float v;
    std::memcpy(&v, tf.data + 4 * i, 4);
    EXPECT_EQ(v, 0.5f * static_cast<float>(i)) << i;
  }
  float e01;  // element (i0 = 0, i1 = 1) is the 5th float (§7)
  std::memcpy(&e01, tf.data + 1 * tf.row_bytes(), 4);
  EXPECT_EQ(e01, 2.0f);
  EXPECT_EQ(Bytes(tq4.data, tq4.data + 18), q4_0_example_block());
  EXPECT_EQ(Bytes(tq6.data, tq6.data + 210), q6_k_example_block());
  EXPECT_EQ(check_invariants(*f, b), "");
}

TEST(GgufExample, RawBuilderReproducesTheHexDump) {
  EXPECT_EQ(example_raw().bytes(), example_from_hex_dump());
  EXPECT_EQ(example_raw().header_and_infos().size(), 298u);  // E = 0x12a
}

TEST(GgufExample, WriterProducesTheSame608Bytes) {
  GgufWriter w;  // alignment 32: the writer adds no key, so add it where §11 has it
  w.add_string("general.architecture", "test");
  w.add_u32("general.alignment", 32);
  w.add_string_array("tokenizer.ggml.tokens", {"a", "<0x0A>"});
  w.add_tensor("t.f32", DType::F32, {4, 2}, f32_example_data());
  w.add_tensor("t.q4_0", DType::Q4_0, {32, 1}, q4_0_example_block());
  w.add_tensor("t.q6_k", DType::Q6_K, {256}, q6_k_example_block());
  const Bytes out = w.to_bytes();
  const Bytes want = example_from_hex_dump();
  ASSERT_EQ(out.size(), 608u);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], want[i]) << "first difference at byte " << i;
}

TEST(GgufExample, Version2IsAccepted) {
  RawFile r = example_raw();
  r.version = 2;
  const Bytes b = r.bytes();
  EXPECT_EQ(GgufFile::parse(b, "v2.gguf")->version(), 2u);
}

// ---------------------------------------------------------------------------------------
// Metadata round trip

class GgufValues : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufWriter w;
    w.add_u8("v.u8", 255);
    w.add_i8("v.i8", -128);
    w.add_u16("v.u16", 65535);
    w.add_i16("v.i16", -32768);
    w.add_u32("v.u32", 0xFFFFFFFFu);
    w.add_i32("v.i32", INT32_MIN);
    w.add_u64("v.u64", UINT64_MAX);
    w.add_i64("v.i64", INT64_MIN);
    w.add_u64("v.u64_small", 12);
    w.add_i32("v.i32_pos", 7);
    w.add_i64("v.i64_max", INT64_MAX);
    w.add_f32("v.f32", 3.25f);
    w.add_f64("v.f64", -1e300);
    w.add_bool("v.true", true);
    w.add_bool("v.false", false);
    w.add_string("v.str", "hello");
    w.add_string("v.empty", "");
    w.add_string("v.utf8", "h\xC3\xA9llo \xE2\x9C\x93");
    w.add_array("a.u8", ValueType::U8, std::vector<uint8_t>{0, 7, 255});
    w.add_array("a.i8", ValueType::I8, std::vector<int8_t>{1, -1, 127});
    w.add_array("a.u16", ValueType::U16, std::vector<uint16_t>{1, 2, 65535});
    w.add_array("a.i16", ValueType::I16, std::vector<int16_t>{-32768, 0, 32767});
    w.add_array("a.u32", ValueType::U32, std::vector<uint32_t>{10, 20, 30});
    w.add_array("a.i32", ValueType::I32, std::vector<int32_t>{4, -5, 6});
    w.add_array("a.u64", ValueType::U64, std::vector<uint64_t>{0, 1ull << 40, UINT64_MAX});
    w.add_array("a.i64", ValueType::I64, std::vector<int64_t>{INT64_MIN, 0, INT64_MAX});
    w.add_array("a.f32", ValueType::F32, std::vector<float>{0.5f, -2.0f, 1e30f});
    w.add_array("a.f64", ValueType::F64, std::vector<double>{1e-300, 0.0, -3.5});
    w.add_array("a.bool", ValueType::BOOL, std::vector<uint8_t>{1, 0, 1});
    w.add_array("a.empty_u32", ValueType::U32, std::vector<uint32_t>{});
    w.add_array("a.empty_f64", ValueType::F64, std::vector<double>{});
    w.add_string_array("a.str", {"x", "", "\xC3\xBC"});
    w.add_string_array("a.empty_str", {});
    w.add_array("layers.u32", ValueType::U32, std::vector<uint32_t>{5, 6, 7, 8});
    w.add_array("layers.u64", ValueType::U64, std::vector<uint64_t>{1, 2, 3, 4});
    w.add_array("layers.i16", ValueType::I16, std::vector<int16_t>{1, 2, -3, 4});
    w.add_array("layers.big", ValueType::U32, std::vector<uint32_t>{1, 2, 3, 4000});
    w.add_array("layers.f32", ValueType::F32, std::vector<float>{1, 2, 3, 4});
    w.add_string_array("layers.str", {"a", "b", "c", "d"});
    bytes_ = w.to_bytes();
    f_ = GgufFile::parse(bytes_, "values.gguf");
  }
  Bytes bytes_;
  std::unique_ptr<GgufFile> f_;
};

TEST_F(GgufValues, FileShape) {
  const GgufFile& f = *f_;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_FALSE(f.has("general.alignment"));  // the default is not written
  EXPECT_TRUE(f.tensors().empty());
  // No tensors: no padding, the data section starts (and the file ends) after the KVs.
  EXPECT_EQ(f.data_offset(), f.file_size());
  EXPECT_EQ(f.kvs().size(), 39u);
  EXPECT_EQ(f.kvs().front().key, "v.u8");  // file order kept
  EXPECT_EQ(f.kvs().back().key, "layers.str");
  EXPECT_EQ(f.kvs()[0].file_offset, 24u);
  EXPECT_EQ(check_invariants(f, bytes_), "");
  touch_everything(f);
}

TEST_F(GgufValues, ScalarsRoundTrip) {
  const GgufFile& f = *f_;
  EXPECT_EQ(f.get_uint("v.u8"), 255u);
  EXPECT_EQ(f.get_int("v.u8"), 255);
  EXPECT_EQ(f.get_int("v.i8"), -128);
  EXPECT_EQ(f.get_uint("v.u16"), 65535u);
  EXPECT_EQ(f.get_int("v.i16"), -32768);
  EXPECT_EQ(f.get_uint("v.u32"), 0xFFFFFFFFu);
  EXPECT_EQ(f.get_int("v.u32"), 0xFFFFFFFFll);
  EXPECT_EQ(f.get_int("v.i32"), INT32_MIN);
  EXPECT_EQ(f.get_uint("v.u64"), UINT64_MAX);
  EXPECT_EQ(f.get_int("v.i64"), INT64_MIN);
  EXPECT_EQ(f.get_int("v.i64_max"), INT64_MAX);
  EXPECT_EQ(f.get_uint("v.i64_max"), uint64_t(INT64_MAX));
  EXPECT_EQ(f.get_int("v.u64_small"), 12);
  EXPECT_EQ(f.get_uint("v.i32_pos", 7), 7u);  // max is inclusive
  EXPECT_EQ(f.get_float("v.f32"), 3.25);
  EXPECT_EQ(f.get_float("v.f64"), -1e300);
  EXPECT_TRUE(f.get_bool("v.true"));
  EXPECT_FALSE(f.get_bool("v.false"));
  EXPECT_EQ(f.get_string("v.str"), "hello");
  EXPECT_EQ(f.get_string("v.empty"), "");
  EXPECT_EQ(f.get_string("v.utf8"), "h\xC3\xA9llo \xE2\x9C\x93");
  EXPECT_EQ(f.find("v.str")->type, ValueType::STRING);
  EXPECT_EQ(f.find("v.str")->type_string(), "string");
  EXPECT_EQ(f.find("v.i16")->type_string(), "i16");
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_FALSE(f.has("v.st"));  // exact, byte-wise lookup (§4.3)
  // *_or: default when absent, the value when present.
  EXPECT_EQ(f.get_string_or("nope", "dflt"), "dflt");
  EXPECT_EQ(f.get_string_or("v.str", "dflt"), "hello");
  EXPECT_EQ(f.get_uint_or("nope", 9), 9u);
  EXPECT_EQ(f.get_uint_or("v.u16", 9), 65535u);
  EXPECT_EQ(f.get_float_or("nope", 0.5), 0.5);
  EXPECT_EQ(f.get_float_or("v.f32", 0.5), 3.25);
  EXPECT_TRUE(f.get_bool_or("nope", true));
  EXPECT_FALSE(f.get_bool_or("v.false", true));
}

TEST_F(GgufValues, ArraysRoundTrip) {
  const GgufFile& f = *f_;
  struct Want {
    const char* key;
    ValueType elem;
    std::vector<double> values;
  };
  const Want wants[] = {
      {"a.u8", ValueType::U8, {0, 7, 255}},
      {"a.i8", ValueType::I8, {1, -1, 127}},
      {"a.u16", ValueType::U16, {1, 2, 65535}},
      {"a.i16", ValueType::I16, {-32768, 0, 32767}},
      {"a.u32", ValueType::U32, {10, 20, 30}},
      {"a.i32", ValueType::I32, {4, -5, 6}},
      {"a.f32", ValueType::F32, {0.5, -2.0, double(1e30f)}},
      {"a.f64", ValueType::F64, {1e-300, 0.0, -3.5}},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.key);
    const KeyValue& a = f.get_array(w.key, w.elem);
    EXPECT_EQ(a.elem_type, w.elem);
    ASSERT_EQ(a.count, 3u);
    EXPECT_EQ(a.type_string(), "array[" + std::string(value_type_name(w.elem)) + ",3]");
    for (uint64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(f.array_float(a, i), w.values[i]) << i;
      if (is_integer(w.elem) && w.values[i] >= 0) {
        EXPECT_EQ(f.array_uint(a, i), static_cast<uint64_t>(w.values[i]));
      }
    }
  }
  const KeyValue& u64 = f.get_array("a.u64", ValueType::U64);
  EXPECT_EQ(f.array_uint(u64, 1), 1ull << 40);
  EXPECT_EQ(f.array_uint(u64, 2), UINT64_MAX);
  const KeyValue& i64 = f.get_array("a.i64", ValueType::I64);
  EXPECT_EQ(load_int(ValueType::I64, i64.elem_ptr(0)), INT64_MIN);
  EXPECT_EQ(f.array_uint(i64, 2), uint64_t(INT64_MAX));
  const KeyValue& bools = f.get_array("a.bool", ValueType::BOOL);
  EXPECT_EQ(bools.elem_ptr(0)[0], 1);
  EXPECT_EQ(bools.elem_ptr(1)[0], 0);
  EXPECT_EQ(bools.elem_ptr(2)[0], 1);
  // Raw element bytes are the written ones.
  const KeyValue& u16 = f.get_array("a.u16");
  uint16_t raw[3];
  std::memcpy(raw, u16.data, sizeof raw);
  EXPECT_EQ(raw[2], 65535);
  const KeyValue& s = f.get_array("a.str", ValueType::STRING);
  ASSERT_EQ(s.count, 3u);
  EXPECT_EQ(s.string_at(0), "x");
  EXPECT_EQ(s.string_at(1), "");
  EXPECT_EQ(s.string_at(2), "\xC3\xBC");
  EXPECT_EQ(f.get_array("a.empty_u32", ValueType::U32).count, 0u);
  EXPECT_EQ(f.get_array("a.empty_f64").count, 0u);
  EXPECT_EQ(f.get_array("a.empty_str", ValueType::STRING).count, 0u);
  EXPECT_EQ(f.get_array("a.empty_str").type_string(), "array[string,0]");
}

TEST_F(GgufValues, AccessorErrorsNameFileAndKey) {
  const GgufFile& f = *f_;
  // missing key
  expect_error([&] { f.get_string("no.such"); }, {"values.gguf: ", "missing required key 'no.such'"});
  expect_error([&] { f.get_uint("no.such"); }, {"values.gguf: ", "'no.such'"});
  expect_error([&] { f.get_int("no.such"); }, {"values.gguf: ", "'no.such'"});
  expect_error([&] { f.get_float("no.such"); }, {"values.gguf: ", "'no.such'"});
  expect_error([&] { f.get_bool("no.such"); }, {"values.gguf: ", "'no.such'"});
  expect_error([&] { f.get_array("no.such"); }, {"values.gguf: ", "'no.such'"});
  expect_error([&] { f.get_uint_per_layer("no.such", 4); }, {"values.gguf: ", "missing required key 'no.such'"});
  expect_error([&] { f.tensor("no.tensor"); }, {"values.gguf: ", "missing tensor 'no.tensor'"});
  // wrong type
  expect_error([&] { f.get_string("v.u32"); },
               {"values.gguf: ", "key 'v.u32' (u32) has the wrong type, expected string"});
  expect_error([&] { f.get_uint("v.str"); },
               {"values.gguf: ", "key 'v.str' (string) has the wrong type, expected an integer"});
  expect_error([&] { f.get_uint("v.f32"); }, {"values.gguf: ", "key 'v.f32' (f32)", "expected an integer"});
  expect_error([&] { f.get_uint("v.true"); }, {"key 'v.true' (bool)", "expected an integer"});
  expect_error([&] { f.get_uint("a.u32"); }, {"key 'a.u32' (array[u32,3])", "expected an integer"});
  expect_error([&] { f.get_int("v.f64"); },
               {"values.gguf: ", "key 'v.f64' (f64) has the wrong type, expected an integer"});
  expect_error([&] { f.get_float("v.u32"); },
               {"values.gguf: ", "key 'v.u32' (u32) has the wrong type, expected f32 or f64"});
  expect_error([&] { f.get_bool("v.u8"); }, {"values.gguf: ", "key 'v.u8' (u8) has the wrong type, expected bool"});
  expect_error([&] { f.get_array("v.str"); },
               {"values.gguf: ", "key 'v.str' (string) has the wrong type, expected an array"});
  expect_error([&] { f.get_array("a.u32", ValueType::I32); },
               {"values.gguf: ", "key 'a.u32' (array[u32,3]) has the wrong element type, expected i32"});
  expect_error([&] { f.get_array("a.str", ValueType::U8); }, {"key 'a.str'", "expected u8"});
  // *_or: present with a bad type is still an error
  expect_error([&] { f.get_string_or("v.u32", "d"); }, {"values.gguf: ", "key 'v.u32'"});
  expect_error([&] { f.get_uint_or("v.str", 1); }, {"values.gguf: ", "key 'v.str'"});
  expect_error([&] { f.get_uint_or("v.u32", 1, 10); }, {"key 'v.u32'", "out of range [0, 10]"});
  expect_error([&] { f.get_float_or("v.str", 1); }, {"values.gguf: ", "key 'v.str'"});
  expect_error([&] { f.get_bool_or("v.str", true); }, {"values.gguf: ", "key 'v.str'"});
  // out of range / negative
  expect_error([&] { f.get_uint("v.u32", 100); }, {"values.gguf: ", "key 'v.u32' (u32) is out of range [0, 100]"});
  expect_error([&] { f.get_uint("v.u64", UINT64_MAX - 1); }, {"key 'v.u64'", "out of range [0, 18446744073709551614]"});
  expect_error([&] { f.get_uint("v.i32_pos", 6); }, {"key 'v.i32_pos'", "out of range [0, 6]"});
  expect_error([&] { f.get_uint("v.i8"); }, {"values.gguf: ", "key 'v.i8' (i8) is out of range"});
  expect_error([&] { f.get_uint("v.i16"); }, {"key 'v.i16' (i16) is out of range"});
  expect_error([&] { f.get_uint("v.i32"); }, {"key 'v.i32' (i32) is out of range"});
  expect_error([&] { f.get_uint("v.i64"); }, {"key 'v.i64' (i64) is out of range"});
  expect_error([&] { f.get_int("v.u64"); }, {"values.gguf: ", "key 'v.u64' (u64) does not fit in int64"});
  // array element accessors
  const KeyValue& i8 = f.get_array("a.i8");
  expect_error([&] { f.array_uint(i8, 1); }, {"values.gguf: ", "key 'a.i8'", "element 1 is not an integer in [0, "});
  expect_error([&] { f.array_uint(i8, 2, 100); }, {"key 'a.i8'", "element 2 is not an integer in [0, 100]"});
  expect_error([&] { f.array_uint(i8, 3); }, {"values.gguf: ", "key 'a.i8'", "index out of range"});
  expect_error([&] { f.array_float(i8, 3); }, {"key 'a.i8'", "index out of range"});
  expect_error([&] { f.array_uint(f.get_array("a.f32"), 0); }, {"key 'a.f32'", "element 0 is not an integer"});
  expect_error([&] { f.array_uint(f.get_array("a.str"), 0); }, {"key 'a.str'", "element 0 is not an integer"});
  expect_error([&] { f.array_float(f.get_array("a.str"), 0); }, {"key 'a.str'", "is not a numeric array"});
  expect_error([&] { f.array_float(f.get_array("a.bool"), 0); }, {"key 'a.bool'", "is not a numeric array"});
  expect_error([&] { f.array_uint(f.get_array("a.empty_u32"), 0); }, {"key 'a.empty_u32'", "index out of range"});
  expect_error([&] { f.array_uint(*f.find("v.u32"), 0); }, {"key 'v.u32'", "index out of range"});
}

TEST_F(GgufValues, UintPerLayer) {
  const GgufFile& f = *f_;
  // a scalar of any integer type is repeated
  EXPECT_EQ(f.get_uint_per_layer("v.u16", 3), (std::vector<uint64_t>{65535, 65535, 65535}));
  EXPECT_EQ(f.get_uint_per_layer("v.i32_pos", 2, 7), (std::vector<uint64_t>{7, 7}));
  EXPECT_EQ(f.get_uint_per_layer("v.u8", 0), std::vector<uint64_t>{});
  // an integer array of exactly n
  EXPECT_EQ(f.get_uint_per_layer("layers.u32", 4), (std::vector<uint64_t>{5, 6, 7, 8}));
  EXPECT_EQ(f.get_uint_per_layer("layers.u64", 4, 4), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(f.get_uint_per_layer("a.empty_u32", 0), std::vector<uint64_t>{});
  // errors
  expect_error([&] { f.get_uint_per_layer("layers.u32", 3); },
               {"values.gguf: ", "key 'layers.u32' (array[u32,4]) has 4 elements, expected one per layer (3)"});
  expect_error([&] { f.get_uint_per_layer("layers.u32", 5); },
               {"key 'layers.u32'", "has 4 elements, expected one per layer (5)"});
  expect_error([&] { f.get_uint_per_layer("layers.i16", 4); },
               {"values.gguf: ", "key 'layers.i16'", "element 2 is not an integer"});
  expect_error([&] { f.get_uint_per_layer("layers.big", 4, 1000); },
               {"key 'layers.big'", "element 3 is not an integer in [0, 1000]"});
  expect_error([&] { f.get_uint_per_layer("layers.f32", 4); }, {"key 'layers.f32'", "element 0 is not an integer"});
  expect_error([&] { f.get_uint_per_layer("layers.str", 4); }, {"key 'layers.str'", "element 0 is not an integer"});
  expect_error([&] { f.get_uint_per_layer("v.u32", 4, 10); }, {"values.gguf: ", "key 'v.u32'", "out of range [0, 10]"});
  expect_error([&] { f.get_uint_per_layer("v.i8", 4); }, {"key 'v.i8'", "out of range"});
  expect_error([&] { f.get_uint_per_layer("v.str", 4); }, {"values.gguf: ", "key 'v.str'", "expected an integer"});
  expect_error([&] { f.get_uint_per_layer("v.f32", 4); }, {"key 'v.f32'", "expected an integer"});
}

// bool bytes other than 0/1 are rejected (stricter than ggml, gguf.md §10 #10).
TEST(GgufBool, OnlyZeroAndOneAreAccepted) {
  for (int v = 0; v < 256; ++v) {
    RawFile scalar;
    scalar.kvs = {{"x.flag", kBool, {static_cast<uint8_t>(v)}}};
    RawFile array;
    array.kvs = {{"x.flags", kArray, enc_arr(kBool, 4, {0, 1, static_cast<uint8_t>(v), 1})}};
    for (const RawFile* r : {&scalar, &array}) {
      const Bytes b = r->bytes();
      if (v <= 1) {
        auto f = GgufFile::parse(b, "bool.gguf");
        if (r == &scalar) {
          EXPECT_EQ(f->get_bool("x.flag"), v == 1);
        } else {
          EXPECT_EQ(f->get_array("x.flags", ValueType::BOOL).elem_ptr(2)[0], v);
        }
      } else {
        expect_error([&] { GgufFile::parse(b, "bool.gguf"); },
                     {"bool.gguf: ", "has bool byte " + std::to_string(v) + " at offset"});
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Tensor round trip

struct TensorSpec {
  std::string name;
  DType type;
  std::vector<uint64_t> ne;
};

const std::vector<TensorSpec>& tensor_specs() {
  static const std::vector<TensorSpec> specs = {
      {"f32.1d", DType::F32, {7}},
      {"f16.2d", DType::F16, {5, 3}},
      {"bf16.3d", DType::BF16, {4, 3, 2}},
      {"f32.4d", DType::F32, {2, 3, 1, 2}},
      {"q4_0", DType::Q4_0, {64, 3}},
      {"q4_1", DType::Q4_1, {32, 2}},
      {"q5_0", DType::Q5_0, {32}},
      {"q5_1", DType::Q5_1, {96, 1}},
      {"q8_0", DType::Q8_0, {32, 5}},
      {"q2_k", DType::Q2_K, {256, 2}},
      {"q3_k", DType::Q3_K, {256}},
      {"q4_k", DType::Q4_K, {512, 1, 2}},
      {"q5_k", DType::Q5_K, {256}},
      {"q6_k", DType::Q6_K, {256, 3}},
      {"iq4_nl", DType::IQ4_NL, {32, 3}},
      {"iq4_xs", DType::IQ4_XS, {256}},
      {"x", DType::F16, {1}},                   // a 2-byte tensor: padding longer than the data
      {std::string(63, 'n'), DType::F32, {1}},  // a 63-byte name: the longest allowed (§5)
  };
  return specs;
}

class GgufTensors : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufTensors, RoundTrip) {
  const uint32_t align = GetParam();
  std::mt19937 rng(align);
  GgufWriter w(align);
  w.add_string("general.architecture", "roundtrip");
  std::vector<Bytes> datas;
  for (const TensorSpec& s : tensor_specs()) {
    Bytes d(GgufWriter::tensor_nbytes(s.type, s.ne));
    for (uint8_t& x : d) x = static_cast<uint8_t>(rng());
    datas.push_back(d);
    w.add_tensor(s.name, s.type, s.ne, d);
  }
  // One tensor produced at write time.
  w.add_tensor("produced", DType::F32, {3, 2}, [](std::ostream& out) {
    for (int i = 0; i < 6; ++i) {
      const float v = static_cast<float>(i) - 2.5f;
      out.write(reinterpret_cast<const char*>(&v), 4);
    }
  });
  const Bytes b = w.to_bytes();
  auto f = GgufFile::parse(b, "tensors.gguf");
  EXPECT_EQ(check_invariants(*f, b), "");
  EXPECT_EQ(f->alignment(), align);
  if (align == 32) {
    EXPECT_FALSE(f->has("general.alignment"));
  } else {
    EXPECT_EQ(f->find("general.alignment")->type, ValueType::U32);
    EXPECT_EQ(f->get_uint("general.alignment"), align);
  }
  EXPECT_EQ(f->data_offset() % align, 0u);
  ASSERT_EQ(f->tensors().size(), tensor_specs().size() + 1);
  uint64_t expected_offset = 0;
  for (size_t i = 0; i < tensor_specs().size(); ++i) {
    const TensorSpec& s = tensor_specs()[i];
    const TensorInfo& t = f->tensors()[i];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(t.name, s.name);
    EXPECT_EQ(&f->tensor(s.name), &t);
    EXPECT_EQ(t.type, s.type);
    EXPECT_EQ(t.n_dims, s.ne.size());
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.ne[d], d < s.ne.size() ? s.ne[d] : 1u) << d;
    const DTypeInfo& info = dtype_info(s.type);
    EXPECT_EQ(t.row_bytes(), s.ne[0] / info.block_elems * info.block_bytes);
    EXPECT_EQ(t.nbytes, t.row_bytes() * t.rows());
    EXPECT_EQ(t.nbytes, datas[i].size());
    EXPECT_EQ(t.offset, expected_offset);
    EXPECT_EQ(t.offset % align, 0u);
    EXPECT_EQ(static_cast<uint64_t>(t.data - b.data()) % align, 0u);
    EXPECT_EQ(Bytes(t.data, t.data + t.nbytes), datas[i]);
    expected_offset += (t.nbytes + align - 1) / align * align;
  }
  const TensorInfo& p = f->tensor("produced");
  EXPECT_EQ(p.offset, expected_offset);
  float v5;
  std::memcpy(&v5, p.data + 5 * 4, 4);
  EXPECT_EQ(v5, 2.5f);
  // Every tensor padded, including the last one.
  EXPECT_EQ(f->file_size(), f->data_offset() + expected_offset + (24 + align - 1) / align * align);
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufTensors, ::testing::Values(1u, 2u, 8u, 32u, 64u, 256u),
                         [](const ::testing::TestParamInfo<uint32_t>& i) { return "align" + std::to_string(i.param); });

TEST(GgufTensors, ZeroTensorFileHasNoPadding) {
  for (uint32_t align : {32u, 64u, 1u}) {
    GgufWriter w(align);
    w.add_string("general.architecture", "empty");
    const Bytes b = w.to_bytes();
    // header + (alignment key if written) + architecture key: the end of the infos.
    const uint64_t end = 24 + (align != 32 ? 8 + 17 + 4 + 4 : 0) + 8 + 20 + 4 + 8 + 5;
    EXPECT_EQ(b.size(), end);
    auto f = GgufFile::parse(b, "empty.gguf");
    EXPECT_EQ(f->data_offset(), end);
    EXPECT_EQ(f->file_size(), end);
    EXPECT_TRUE(f->tensors().empty());
    EXPECT_EQ(f->find_tensor("x"), nullptr);
    EXPECT_EQ(f->alignment(), align);
  }
  // The smallest file: a bare header.
  GgufWriter w;
  const Bytes b = w.to_bytes();
  ASSERT_EQ(b.size(), 24u);
  auto f = GgufFile::parse(b, "header.gguf");
  EXPECT_EQ(f->data_offset(), 24u);
  EXPECT_TRUE(f->kvs().empty());
}

TEST(GgufTensors, Alignment1PacksTensorsBackToBack) {
  GgufWriter w(1);
  w.add_tensor("a", DType::F16, {3}, Bytes(6, 1));
  w.add_tensor("b", DType::Q4_0, {32}, Bytes(18, 2));
  w.add_tensor("c", DType::F32, {1}, Bytes(4, 3));
  const Bytes b = w.to_bytes();
  auto f = GgufFile::parse(b, "a1.gguf");
  EXPECT_EQ(f->tensors()[1].offset, 6u);
  EXPECT_EQ(f->tensors()[2].offset, 24u);
  EXPECT_EQ(f->file_size(), f->data_offset() + 28);
  EXPECT_EQ(check_invariants(*f, b), "");
}

// More tensors than the reader reserves up front (4096): the name index must survive the
// tensor vector growing, and duplicates are still found after the growth.
TEST(GgufTensors, ManyTensorsIndexSurvivesGrowth) {
  constexpr int kN = 5000;
  auto tname = [](int i) {  // (not "t" + to_string: GCC 12 -Wrestrict false positive)
    std::string n = "t";
    n += std::to_string(i);
    return n;
  };
  GgufWriter w(1);
  for (int i = 0; i < kN; ++i) w.add_tensor(tname(i), DType::F32, {1}, enc<float>(float(i)));
  const Bytes b = w.to_bytes();
  auto f = GgufFile::parse(b, "many.gguf");
  ASSERT_EQ(f->tensors().size(), size_t(kN));
  for (int i = 0; i < kN; i += 7) {
    const TensorInfo* t = f->find_tensor(tname(i));
    ASSERT_NE(t, nullptr) << i;
    EXPECT_EQ(t, &f->tensors()[size_t(i)]);
    float v;
    std::memcpy(&v, t->data, 4);
    EXPECT_EQ(v, float(i));
  }
  EXPECT_EQ(check_invariants(*f, b), "");
  RawFile r;
  r.pad_to = 32;
  for (int i = 0; i < kN; ++i) r.tensors.push_back({tname(i), 1, {8}, 0, uint64_t(32) * i});
  r.tensors.push_back({"t4321", 1, {8}, 0, uint64_t(32) * kN});
  r.data.resize(32 * (kN + 1));
  expect_error([&] { GgufFile::parse(r.bytes(), "dup.gguf"); },
               {"dup.gguf: ", "duplicate tensor name 't4321' (tensor 5000)"});
  r.tensors.pop_back();
  r.data.resize(32 * kN);
  EXPECT_EQ(GgufFile::parse(r.bytes(), "ok.gguf")->tensors().size(), size_t(kN));
}

TEST(GgufWriter, RejectsBadInput) {
  expect_error([] { GgufWriter w(48); }, {"alignment 48 is not a power of 2"});
  expect_error([] { GgufWriter w(0); }, {"alignment 0"});
  GgufWriter w;
  expect_error([&] { w.add_tensor("t", DType::F32, {4}, Bytes(15)); }, {"tensor 't' needs 16 bytes, got 15"});
  expect_error([&] { w.add_tensor("t", DType::Q4_0, {33}, Bytes(18)); }, {"bad tensor type or shape"});
  expect_error([&] { w.add_tensor("t", DType::F32, {}, Bytes()); }, {"bad tensor type or shape"});
  expect_error([&] { w.add_tensor("t", DType::F32, {1, 1, 1, 1, 1}, Bytes(4)); }, {"bad tensor type or shape"});
  expect_error([&] { w.add_array("a", ValueType::U32, 3, Bytes(11)); }, {"array 'a' of u32 needs 12 bytes, got 11"});
  expect_error([&] { w.add_array("a", ValueType::STRING, 1, Bytes(8)); }, {"array 'a' of string"});
  GgufWriter bad;
  bad.add_tensor("short", DType::F32, {2}, [](std::ostream& out) { out.write("abc", 3); });
  expect_error([&] { bad.to_bytes(); }, {"tensor 'short' produced 3 bytes, expected 8"});
}

TEST(GgufWriter, WriteFileThenOpen) {
  const auto dir = std::filesystem::temp_directory_path() / ("sluice_gguf_rt_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.gguf").string();
  GgufWriter w(64);
  w.add_string("general.architecture", "file");
  w.add_tensor("w", DType::Q8_0, {64, 2}, Bytes(136, 0x5A));
  w.write_file(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->name(), path);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(f->tensor("w").data[135], 0x5A);
  expect_error([&] { f->get_string("nope"); }, {path + ": missing required key 'nope'"});
  expect_error([&] { GgufFile::open((dir / "absent.gguf").string()); }, {"absent.gguf: cannot open"});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::gguf
