// `sluice inspect FILE [--json] [--load]`: everything a GGUF file says, and what one decoded
// token must stream; with --load, the model is loaded (repacked) too and the process's resident
// memory after the load and its peak are reported beside the file's size. Exit 0 for a valid
// file; 1 with the reader's (or the loader's) error on stderr otherwise.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "apps/sluice/commands.h"
#include "base/process_memory.h"
#include "gguf/reader.h"
#include "models/model.h"
#include "models/weight_accounting.h"
#include "threading/thread_pool.h"

namespace sluice::app {

namespace {

using gguf::GgufFile;
using gguf::KeyValue;
using gguf::ValueType;
using nlohmann::json;

struct InspectArgs {
  std::string path;
  bool json = false;
  bool no_tensors = false;
  bool load = false;
  int threads = 0;
};

json scalar_json(ValueType t, const uint8_t* p) {
  switch (t) {
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64: return gguf::load_uint(t, p);
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: return gguf::load_int(t, p);
    case ValueType::F32:
    case ValueType::F64: {
      const double v = gguf::load_float(t, p);
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      return v;
    }
    case ValueType::BOOL: return *p != 0;
    default: return nullptr;
  }
}

json value_json(const KeyValue& kv) {
  if (kv.type == ValueType::STRING) return std::string(kv.as_string());
  if (kv.type != ValueType::ARRAY) return scalar_json(kv.type, kv.data);
  json arr = json::array();
  for (uint64_t i = 0; i < kv.count; ++i)
    arr.push_back(kv.elem_type == ValueType::STRING ? json(std::string(kv.string_at(i)))
                                                    : scalar_json(kv.elem_type, kv.elem_ptr(i)));
  return arr;
}

// Short text for a value: arrays show their first elements only.
std::string value_text(const KeyValue& kv) {
  auto one = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  if (kv.type != ValueType::ARRAY) return one(value_json(kv));
  std::string s = "[";
  const uint64_t shown = kv.count < 6 ? kv.count : 6;
  for (uint64_t i = 0; i < shown; ++i) {
    if (i) s += ", ";
    s += one(kv.elem_type == ValueType::STRING ? json(std::string(kv.string_at(i)))
                                               : scalar_json(kv.elem_type, kv.elem_ptr(i)));
  }
  if (shown < kv.count) s += ", ...";
  return s + "]";
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / double(1ull << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

json tokenizer_summary(const GgufFile& f) {
  json t = json::object();
  if (!f.has("tokenizer.ggml.model")) return t;
  t["model"] = std::string(f.get_string("tokenizer.ggml.model"));
  t["pre"] = std::string(f.get_string_or("tokenizer.ggml.pre", ""));
  t["n_tokens"] = f.has("tokenizer.ggml.tokens") ? f.get_array("tokenizer.ggml.tokens").count : 0;
  t["n_merges"] = f.has("tokenizer.ggml.merges") ? f.get_array("tokenizer.ggml.merges").count : 0;
  for (const char* id : {"bos", "eos", "eot", "unknown", "padding", "eom", "sep", "mask"}) {
    const std::string key = std::string("tokenizer.ggml.") + id + "_token_id";
    if (f.has(key)) t[std::string(id) + "_id"] = f.get_uint(key);
  }
  for (const char* flag : {"add_bos_token", "add_eos_token", "add_space_prefix"}) {
    const std::string key = std::string("tokenizer.ggml.") + flag;
    if (f.has(key)) t[flag] = f.get_bool(key);
  }
  t["chat_template_bytes"] = f.has("tokenizer.chat_template") ? f.get_string("tokenizer.chat_template").size() : 0;
  return t;
}

json inspect_json(const GgufFile& f, const models::StreamAccount& acc, bool with_tensors) {
  json j;
  j["file"] = f.name();
  j["file_size"] = f.file_size();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["architecture"] = std::string(f.get_string_or("general.architecture", ""));
  j["name"] = std::string(f.get_string_or("general.name", ""));
  json meta = json::array();
  for (const KeyValue& kv : f.kvs()) {
    json m{{"key", std::string(kv.key)}, {"type", std::string(gguf::value_type_name(kv.type))}};
    if (kv.type == ValueType::ARRAY) {
      m["elem_type"] = std::string(gguf::value_type_name(kv.elem_type));
      m["count"] = kv.count;
    }
    m["value"] = value_json(kv);
    meta.push_back(std::move(m));
  }
  j["metadata"] = std::move(meta);
  j["tokenizer"] = tokenizer_summary(f);
  std::map<std::string, std::pair<uint64_t, uint64_t>> per_type;
  json tensors = json::array();
  for (const auto& t : f.tensors()) {
    auto& pt = per_type[std::string(dtype_name(t.type))];
    pt.first += 1;
    pt.second += t.nbytes;
    if (!with_tensors) continue;
    json shape = json::array();
    for (uint32_t d = 0; d < t.n_dims; ++d) shape.push_back(t.ne[d]);
    tensors.push_back({{"name", t.name},
                       {"type", std::string(dtype_name(t.type))},
                       {"type_id", static_cast<uint32_t>(t.type)},
                       {"shape", shape},
                       {"offset", t.offset},
                       {"bytes", t.nbytes}});
  }
  if (with_tensors) j["tensors"] = std::move(tensors);
  j["tensor_count"] = f.tensors().size();
  json bpt = json::object();
  for (const auto& [name, v] : per_type) bpt[name] = {{"tensors", v.first}, {"bytes", v.second}};
  j["bytes_per_type"] = std::move(bpt);
  json groups = json::object();
  for (auto g : {models::WeightGroup::kAttnQKV, models::WeightGroup::kAttnOutput, models::WeightGroup::kFfnGateUp,
                 models::WeightGroup::kFfnDown, models::WeightGroup::kFfnExperts, models::WeightGroup::kLmHead,
                 models::WeightGroup::kEmbeddingRows, models::WeightGroup::kPle, models::WeightGroup::kSmall})
    groups[models::weight_group_name(g)] = acc.group_bytes(g);
  uint64_t unused = 0;
  for (const auto& t : acc.tensors)
    if (t.group == models::WeightGroup::kUnused) unused += t.file_bytes;
  j["decode_stream"] = {
      {"bytes_per_token", acc.streamed_bytes}, {"groups", std::move(groups)}, {"unused_tensor_bytes", unused}};
  if (acc.expert_count > 0)
    j["decode_stream"]["moe"] = {{"expert_count", acc.expert_count},
                                 {"expert_used_count", acc.expert_used},
                                 {"expert_tensor_bytes", acc.expert_file_bytes},
                                 {"expert_bytes_per_token", acc.group_bytes(models::WeightGroup::kFfnExperts)}};
  return j;
}

void print_text(const GgufFile& f, const models::StreamAccount& acc, const json& j, bool with_tensors) {
  std::printf("file          %s\n", f.name().c_str());
  std::printf("size          %llu bytes (%s), GGUF v%u, alignment %u, data at offset %llu\n",
              static_cast<unsigned long long>(f.file_size()), human_bytes(f.file_size()).c_str(), f.version(),
              f.alignment(), static_cast<unsigned long long>(f.data_offset()));
  const std::string arch = j["architecture"];
  std::printf("architecture  %s\nname          %s\n", arch.empty() ? "(none)" : arch.c_str(),
              j["name"].get<std::string>().c_str());

  std::printf("\nhyper-parameters\n");
  for (const KeyValue& kv : f.kvs())
    if (!arch.empty() && kv.key.starts_with(arch + "."))
      std::printf("  %-50s %-16s %s\n", std::string(kv.key).c_str(), kv.type_string().c_str(), value_text(kv).c_str());

  const json& tok = j["tokenizer"];
  std::printf("\ntokenizer\n");
  if (tok.empty()) std::printf("  (none)\n");
  for (auto it = tok.begin(); it != tok.end(); ++it)
    std::printf("  %-24s %s\n", it.key().c_str(), it.value().dump().c_str());

  std::printf("\nother metadata\n");
  for (const KeyValue& kv : f.kvs()) {
    if (!arch.empty() && kv.key.starts_with(arch + ".")) continue;
    std::string v = value_text(kv);
    if (v.size() > 100) v = v.substr(0, 97) + "...";
    std::printf("  %-50s %-22s %s\n", std::string(kv.key).c_str(), kv.type_string().c_str(), v.c_str());
  }

  if (with_tensors) {
    std::printf("\ntensors (%zu)\n  %-40s %-8s %-20s %14s  %s\n", f.tensors().size(), "name", "type", "shape", "bytes",
                "decode");
    for (const auto& t : acc.tensors) {
      const auto* info = f.find_tensor(t.name);
      std::printf("  %-40s %-8s %-20s %14llu  %s\n", t.name.c_str(), std::string(dtype_name(t.type)).c_str(),
                  info->shape_string().c_str(), static_cast<unsigned long long>(t.file_bytes),
                  models::weight_group_name(t.group));
    }
  }
  std::printf("\nbytes per type\n");
  for (auto it = j["bytes_per_type"].begin(); it != j["bytes_per_type"].end(); ++it) {
    const uint64_t b = it.value()["bytes"];
    std::printf("  %-8s %5llu tensors %14llu bytes  %10s  %5.1f%%\n", it.key().c_str(),
                static_cast<unsigned long long>(it.value()["tensors"].get<uint64_t>()),
                static_cast<unsigned long long>(b), human_bytes(b).c_str(), 100.0 * b / double(f.file_size()));
  }
  std::printf("\ndecode stream (weight bytes one decoded token reads; floor = this / DRAM bandwidth)\n");
  for (auto it = j["decode_stream"]["groups"].begin(); it != j["decode_stream"]["groups"].end(); ++it) {
    const uint64_t b = it.value();
    if (b)
      std::printf("  %-22s %14llu bytes  %10s\n", it.key().c_str(), static_cast<unsigned long long>(b),
                  human_bytes(b).c_str());
  }
  const uint64_t unused = j["decode_stream"]["unused_tensor_bytes"];
  if (unused)
    std::printf("  %-22s %14llu bytes  (present in the file, never read)\n", "unused",
                static_cast<unsigned long long>(unused));
  if (acc.expert_count > 0)
    std::printf(
        "  mixture of experts: the expert tensors (%s in the file) count %llu/%llu of their bytes, the\n"
        "  experts one token's router picks; a batch routed to different experts reads more\n",
        human_bytes(acc.expert_file_bytes).c_str(), static_cast<unsigned long long>(acc.expert_used),
        static_cast<unsigned long long>(acc.expert_count));
  std::printf("  %-22s %14llu bytes  %10s  -> %.1f ms/token at 30 GB/s\n", "total per token",
              static_cast<unsigned long long>(acc.streamed_bytes), human_bytes(acc.streamed_bytes).c_str(),
              acc.streamed_bytes / 30e9 * 1e3);
}

// Loads the model as every command does and measures the process around it. The model is
// dropped before returning: what stays is the measurement.
json load_json(const GgufFile& f, int threads) {
  const ProcessMemory before = process_memory();
  ThreadPool pool(threads > 0 ? threads : ThreadPool::default_threads());
  models::LoadOptions lo;
  lo.pool = &pool;
  const auto t0 = std::chrono::steady_clock::now();
  const std::unique_ptr<models::Model> m = models::load_model(f, lo);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const ProcessMemory after = process_memory();
  json j{{"ms", ms}, {"threads", pool.size()}, {"weights", m->describe_weights()}};
  if (after.known)
    j["memory"] = {{"file_bytes", f.file_size()},
                   {"rss_before", before.rss},
                   {"rss_after_load", after.rss},
                   {"peak_rss", after.peak_rss}};
  return j;
}

void print_load(const json& l, uint64_t file_size) {
  std::printf("\nload          %.0f ms, %d threads", l["ms"].get<double>(), l["threads"].get<int>());
  if (l.contains("memory")) {
    const json& m = l["memory"];
    const double rss = m["rss_after_load"].get<double>(), peak = m["peak_rss"].get<double>();
    std::printf(" | resident after load %s (%.2fx the file), peak %s (%.2fx)",
                human_bytes(static_cast<uint64_t>(rss)).c_str(), rss / file_size,
                human_bytes(static_cast<uint64_t>(peak)).c_str(), peak / file_size);
  }
  std::printf("\n");
}

}  // namespace

CommandFn add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "show a GGUF file's metadata, tensors and per-token byte accounting");
  cmd->add_option("file", args->path, "GGUF file")->required();
  cmd->add_flag("--json", args->json, "machine-readable output with every metadata value in full");
  cmd->add_flag("--no-tensors", args->no_tensors, "omit the tensor table");
  cmd->add_flag("--load", args->load, "also load (repack) the model and report resident memory and its peak");
  cmd->add_option("-t,--threads", args->threads, "threads for --load (default: the machine's)");
  return [args]() {
    gguf::ReadOptions opt;
    opt.allow_unsupported_types = true;  // show files we cannot run too
    auto f = GgufFile::open(args->path, opt);
    // Loaded first, so the peak it reports is the load's and not the JSON's.
    const json load = args->load ? load_json(*f, args->threads) : json();
    const models::StreamAccount acc = models::account_decode_stream(*f);
    json j = inspect_json(*f, acc, !args->no_tensors);
    if (args->load) j["load"] = load;
    if (args->json) {
      std::printf("%s\n", j.dump(1, ' ', false, json::error_handler_t::replace).c_str());
    } else {
      print_text(*f, acc, j, !args->no_tensors);
      if (args->load) print_load(load, f->file_size());
    }
    return 0;
  };
}

}  // namespace sluice::app
