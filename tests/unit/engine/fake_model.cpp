#include "fake_model.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace sluice::test {

namespace {
uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}
}  // namespace

FakeModel::FakeModel(int32_t n_vocab, std::vector<KvGroupSpec> groups, int32_t n_ctx) {
  spec_.arch = "fake";
  spec_.name = "fake";
  spec_.n_vocab = n_vocab;
  spec_.n_ctx_train = n_ctx;
  spec_.kv_groups = std::move(groups);
}

int64_t FakeModel::tokens_computed() const {
  int64_t n = 0;
  for (int64_t t : tokens_per_call) n += t;
  return n;
}

void FakeModel::fill_row(int32_t target, float* row) const {
  // A clear peak at `target`, falling off with the distance: greedy picks target; sampling
  // at temperature 1 still has many candidates.
  const int32_t V = spec_.n_vocab;
  for (int32_t v = 0; v < V; ++v) {
    const int32_t d = std::min((v - target + V) % V, (target - v + V) % V);
    row[v] = -0.5f * static_cast<float>(d);
  }
}

int32_t FakeModel::reference_next(const std::vector<int32_t>& tokens) const {
  const int32_t q = static_cast<int32_t>(tokens.size()) - 1;
  uint64_t h = 1;
  for (size_t g = 0; g < spec_.kv_groups.size(); ++g) {
    const int32_t w = spec_.kv_groups[g].window;
    for (int32_t j = w > 0 ? std::max(0, q - w + 1) : 0; j <= q; ++j)
      h = mix(h, (g << 40) ^ (uint64_t(j) << 20) ^ uint64_t(tokens[j]));
  }
  return static_cast<int32_t>(h % static_cast<uint64_t>(spec_.n_vocab));
}

std::vector<float> FakeModel::reference_logits(const std::vector<int32_t>& tokens) const {
  std::vector<float> row(spec_.n_vocab);
  fill_row(reference_next(tokens), row.data());
  return row;
}

std::vector<int32_t> FakeModel::reference_greedy(std::vector<int32_t> prompt, int n) const {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(reference_next(prompt));
    prompt.push_back(out.back());
  }
  return out;
}

void FakeModel::forward(const models::ForwardBatch& batch, KvCache& kv, float* logits) {
  if (delay.count() > 0 || delay_per_token.count() > 0)
    std::this_thread::sleep_for(delay + delay_per_token * batch.n_tokens());
  if (static_cast<int64_t>(tokens_per_call.size()) == throw_on_call) {
    tokens_per_call.push_back(0);  // counted, so the next call goes through
    seqs_per_call.push_back(0);
    throw std::runtime_error("fake model: forward failed");
  }
  tokens_per_call.push_back(batch.n_tokens());
  seqs_per_call.push_back(static_cast<int64_t>(batch.seqs.size()));
  const int32_t bt = kv.block_tokens();
  // 1. Write K/V of every new token (a real model does this per layer before attention).
  for (const models::SeqSlice& s : batch.seqs) {
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      const int32_t p = s.pos0 + static_cast<int32_t>(i);
      for (int32_t g = 0; g < kv.n_groups(); ++g) {
        const auto& t = s.block_tables[g];
        if (static_cast<size_t>(p / bt) >= t.size() || t[p / bt] == kNoBlock) {
          ++errors;
          continue;
        }
        std::vector<float> k(kv.group(g).row_elems(), 0.0f), v(kv.group(g).row_elems(), 0.0f);
        k[0] = static_cast<float>(s.tokens[i]);
        k[1] = static_cast<float>(p);
        kv.store(g, 0, t[p / bt], p % bt, k.data(), v.data());
      }
    }
  }
  // 2. Attention stand-in: read back what each query sees.
  float* out = logits;
  for (const models::SeqSlice& s : batch.seqs) {
    const int32_t n = static_cast<int32_t>(s.tokens.size());
    const int32_t first = s.logits == models::LogitsWanted::kAll ? 0 : n - 1;
    if (s.logits == models::LogitsWanted::kNone) continue;
    for (int32_t i = first; i < n; ++i) {
      const int32_t q = s.pos0 + i;
      uint64_t h = 1;
      for (int32_t g = 0; g < kv.n_groups(); ++g) {
        const int32_t w = kv.group(g).window;
        std::vector<float> k(kv.group(g).row_elems());
        for (int32_t j = w > 0 ? std::max(0, q - w + 1) : 0; j <= q; ++j) {
          const auto& t = s.block_tables[g];
          if (static_cast<size_t>(j / bt) >= t.size() || t[j / bt] == kNoBlock) {
            ++errors;
            continue;
          }
          kv.load_k(g, 0, t[j / bt], j % bt, k.data());
          if (static_cast<int32_t>(k[1]) != j) ++errors;
          h = mix(h, (uint64_t(g) << 40) ^ (uint64_t(j) << 20) ^ uint64_t(static_cast<int32_t>(k[0])));
        }
      }
      fill_row(static_cast<int32_t>(h % static_cast<uint64_t>(spec_.n_vocab)), out);
      out += spec_.n_vocab;
    }
  }
}

std::vector<int32_t> make_prompt(int n, int32_t n_vocab, uint64_t seed) {
  std::vector<int32_t> p;
  uint64_t h = seed * 7919 + 1;
  for (int i = 0; i < n; ++i) {
    h = mix(h, static_cast<uint64_t>(i));
    p.push_back(static_cast<int32_t>(h % static_cast<uint64_t>(n_vocab)));
  }
  return p;
}

}  // namespace sluice::test
