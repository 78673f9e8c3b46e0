// `sluice quantize IN OUT TYPE [--embd-type T]`: rewrites a GGUF with its float weight
// matrices (F32/F16/BF16) quantized to TYPE (q4_0, q8_0, q6_k, ...) with the reference
// quantizers (byte-identical to ggml / gguf-py). Embedding tables (token_embd,
// per_layer_token_embd) get --embd-type (default TYPE); 1-D tensors (norms, scales), matrices
// whose rows are not a multiple of the block size and already-quantized tensors are copied.
// Tensors are converted row by row while the output is written, so memory stays small.
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdio>
#include <memory>
#include <ostream>

#include "apps/sluice/commands.h"
#include "base/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "quant/quant.h"

namespace sluice::app {

namespace {
struct QuantizeArgs {
  std::string in, out, type, embd_type;
};

DType parse_dtype(std::string name) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (uint32_t id = 0; id < kDTypeIdCount; ++id) {
    const DTypeInfo* i = dtype_info(id);
    if (!i) continue;
    std::string n(i->name);
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == name) {
      if (!quant::can_quantize(static_cast<DType>(id))) fail("sluice cannot quantize to %s", i->name.data());
      return static_cast<DType>(id);
    }
  }
  fail("unknown type '%s' (e.g. q4_0, q8_0, q6_k, f16, bf16)", name.c_str());
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
}  // namespace

CommandFn add_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "quantize a GGUF's float weight matrices");
  cmd->add_option("input", args->in, "GGUF file to read")->required();
  cmd->add_option("output", args->out, "GGUF file to write")->required();
  cmd->add_option("type", args->type, "target type for weight matrices (q4_0, q8_0, q6_k, f16, bf16, ...)")->required();
  cmd->add_option("--embd-type", args->embd_type, "type for token_embd / per_layer_token_embd (default: type)");
  return [args]() {
    const DType type = parse_dtype(args->type);
    const DType embd = args->embd_type.empty() ? type : parse_dtype(args->embd_type);
    if (args->in == args->out) fail("input and output must differ");
    auto f = gguf::GgufFile::open(args->in);
    gguf::GgufWriter w(f->alignment());
    for (const gguf::KeyValue& kv : f->kvs())
      if (kv.key != "general.alignment" && kv.key != "general.quantization_version") w.add_kv(kv);
    w.add_u32("general.quantization_version", 2);
    uint64_t in_bytes = 0, out_bytes = 0;
    int converted = 0;
    for (const gguf::TensorInfo& t : f->tensors()) {
      std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
      const bool is_embd = t.name == "token_embd.weight" || t.name == "per_layer_token_embd.weight";
      const DType want = is_embd ? embd : type;
      const bool convert = t.n_dims == 2 && is_float(t.type) && want != t.type &&
                           t.ne[0] % dtype_info(want).block_elems == 0;
      in_bytes += t.nbytes;
      if (!convert) {
        w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
        out_bytes += t.nbytes;
        continue;
      }
      ++converted;
      out_bytes += gguf::GgufWriter::tensor_nbytes(want, ne);
      const gguf::TensorInfo* src = &t;
      w.add_tensor(t.name, want, ne, [src, want](std::ostream& out) {
        const int64_t n = static_cast<int64_t>(src->ne[0]);
        const uint64_t out_row = dtype_row_bytes(want, src->ne[0]);
        std::vector<float> row(n);
        std::vector<uint8_t> q(out_row);
        for (uint64_t r = 0; r < src->rows(); ++r) {
          quant::dequantize_ref(src->type, src->data + r * src->row_bytes(), row.data(), n);
          quant::quantize_ref(want, row.data(), q.data(), n);
          out.write(reinterpret_cast<const char*>(q.data()), static_cast<std::streamsize>(out_row));
        }
      });
    }
    w.write_file(args->out);
    std::fprintf(stderr, "%s -> %s: %d tensors converted, %.1f MiB -> %.1f MiB of tensor data\n", args->in.c_str(),
                 args->out.c_str(), converted, in_bytes / 1048576.0, out_bytes / 1048576.0);
    return 0;
  };
}

}  // namespace sluice::app
