// sluice_quant_tool: file-level access to the reference (de)quantizers for tests/python.
//   sluice_quant_tool dequant TYPE IN.bin OUT.bin   raw blocks -> f32 LE
//   sluice_quant_tool quant   TYPE IN.bin OUT.bin   f32 LE -> raw blocks
// TYPE is ggml's name (q4_0, q6_K, bf16, ...). Exits 1 with a message on any error.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "quant/quant.h"

namespace {

using sluice::DType;
using sluice::fail;

DType parse_type(const std::string& name) {
  for (uint32_t id = 0; id < sluice::kDTypeIdCount; ++id) {
    const sluice::DTypeInfo* info = sluice::dtype_info(id);
    if (info != nullptr && info->name == name) return static_cast<DType>(id);
  }
  fail("unknown type '%s' (use ggml's name, e.g. q4_0, q6_K, bf16)", name.c_str());
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open '%s'", path.c_str());
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const void* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) fail("cannot write '%s'", path.c_str());
}

void dequant(DType t, const std::vector<char>& in, const std::string& out_path) {
  const sluice::DTypeInfo& info = sluice::dtype_info(t);
  if (in.size() % info.block_bytes != 0) {
    fail("input is %zu bytes, not a multiple of the %s block size (%u bytes)", in.size(),
         std::string(info.name).c_str(), info.block_bytes);
  }
  const int64_t n = static_cast<int64_t>(in.size() / info.block_bytes * info.block_elems);
  std::vector<float> out(static_cast<size_t>(n));
  sluice::quant::dequantize_ref(t, in.data(), out.data(), n);
  write_file(out_path, out.data(), out.size() * sizeof(float));
}

void quant(DType t, const std::vector<char>& in, const std::string& out_path) {
  const sluice::DTypeInfo& info = sluice::dtype_info(t);
  if (in.size() % sizeof(float) != 0) fail("input is %zu bytes, not a whole number of f32", in.size());
  std::vector<float> x(in.size() / sizeof(float));
  if (!in.empty()) std::memcpy(x.data(), in.data(), in.size());
  const int64_t n = static_cast<int64_t>(x.size());
  if (n % info.block_elems != 0) {
    fail("%lld values is not a multiple of the %s block size (%u)", static_cast<long long>(n),
         std::string(info.name).c_str(), info.block_elems);
  }
  std::vector<char> out(sluice::dtype_row_bytes(t, static_cast<uint64_t>(n)));
  sluice::quant::quantize_ref(t, x.data(), out.data(), n);
  write_file(out_path, out.data(), out.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s dequant|quant TYPE IN.bin OUT.bin\n", argv[0]);
    return 2;
  }
  try {
    const std::string mode = argv[1];
    const DType t = parse_type(argv[2]);
    const std::vector<char> in = read_file(argv[3]);
    if (mode == "dequant") {
      dequant(t, in, argv[4]);
    } else if (mode == "quant") {
      quant(t, in, argv[4]);
    } else {
      fail("unknown mode '%s' (dequant or quant)", mode.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice_quant_tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
