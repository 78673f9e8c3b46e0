#include "golden_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "kv/kv_cache.h"
#include "kv/sequence_kv.h"
#include "threading/thread_pool.h"

namespace sluice::golden {

const std::string kDir = std::string(SLUICE_SOURCE_DIR) + "/tests/data/golden/";

std::unique_ptr<gguf::GgufFile> open_fixture(const std::string& name) {
  if (!std::filesystem::exists(kDir + name))
    throw std::runtime_error(kDir + name + " is missing: run `make fixtures` first");
  return gguf::GgufFile::open(kDir + name);
}

nlohmann::json manifest() {
  std::ifstream in(kDir + "manifest.json");
  if (!in) throw std::runtime_error("missing " + kDir + "manifest.json");
  return nlohmann::json::parse(in);
}

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto n = static_cast<size_t>(in.tellg());
  std::vector<float> v(n / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n));
  return v;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing " + path + " (run `make fixtures`)");
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::map<std::string, std::vector<float>> read_taps(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing " + path);
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t off = 0;
  auto take = [&](void* dst, size_t n) {
    if (off + n > raw.size()) throw std::runtime_error(path + ": truncated");
    std::memcpy(dst, raw.data() + off, n);
    off += n;
  };
  char magic[4];
  uint32_t version = 0, n = 0;
  take(magic, 4);
  take(&version, 4);
  take(&n, 4);
  if (std::memcmp(magic, "SLTP", 4) != 0 || version != 1) throw std::runtime_error(path + ": not a SLTP v1 file");
  std::map<std::string, std::vector<float>> out;
  for (uint32_t r = 0; r < n; ++r) {
    uint32_t len = 0, nd = 0;
    take(&len, 4);
    std::string name(len, '\0');
    take(name.data(), len);
    take(&nd, 4);
    uint64_t count = 1;
    for (uint32_t i = 0; i < nd; ++i) {
      uint64_t dim = 0;
      take(&dim, 8);
      count *= dim;
    }
    std::vector<float> v(count);
    take(v.data(), 4 * count);
    out[name] = std::move(v);
  }
  return out;
}

std::vector<float> run(const gguf::GgufFile& f, const std::vector<int32_t>& ids, size_t chunk,
                       std::function<void(models::ModelSpec&)> adjust, models::Tap tap) {
  ThreadPool pool(2);
  models::LoadOptions lo;
  lo.pool = &pool;
  lo.adjust_spec = std::move(adjust);
  auto m = models::load_model(f, lo);
  m->set_tap(std::move(tap));
  return run_with_soft_tokens(*m, ids, std::vector<const float*>(ids.size()), chunk);
}

std::vector<float> run_with_soft_tokens(models::Model& m, const std::vector<int32_t>& ids,
                                        const std::vector<const float*>& embd, size_t chunk, bool blocks) {
  const auto& groups = m.spec().kv_groups;
  KvCache kv(groups, 16, std::vector<int32_t>(groups.size(), 16), KvType::F32);
  SequenceKv seq(kv);
  const int64_t V = m.spec().n_vocab;
  std::vector<float> all(ids.size() * V);
  for (size_t pos = 0; pos < ids.size(); pos += chunk) {
    const size_t n = std::min(chunk, ids.size() - pos);
    seq.release_outside_window(static_cast<int32_t>(pos));
    EXPECT_TRUE(seq.reserve(static_cast<int32_t>(pos + n)));
    models::ForwardBatch b;
    models::SeqSlice s;
    s.tokens = {ids.data() + pos, n};
    s.embd = {embd.data() + pos, n};
    s.embd_blocks = blocks;
    s.pos0 = static_cast<int32_t>(pos);
    for (int g = 0; g < kv.n_groups(); ++g) s.block_tables[g] = seq.table(g);
    s.logits = models::LogitsWanted::kAll;
    b.seqs.push_back(s);
    m.forward(b, kv, all.data() + pos * V);
  }
  return all;
}

}  // namespace sluice::golden
