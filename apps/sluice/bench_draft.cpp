#include "apps/sluice/bench_draft.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "base/error.h"
#include "kv/sequence_kv.h"
#include "models/gemma4/assistant.h"

namespace sluice::app {

namespace {

double median_ms(int n, const std::function<void()>& fn) {
  std::vector<double> ms;
  fn();  // warm-up
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

DraftStepCost measure_draft_step(EngineSession& sess, const std::string& draft_path, int depth, int n_steps) {
  if (depth < 1) fail("--draft: the draft step needs a KV depth >= 1");
  auto file = models::open_gemma4_assistant_file(draft_path);
  models::LoadOptions lo;
  lo.pool = &sess.pool();
  auto asst = models::load_gemma4_assistant(*file, lo);
  asst->bind_target(sess.file(), sess.spec());
  // A cache of its own: `depth` random positions, then the draft / decode position.
  const auto& spec = sess.spec();
  const int32_t bt = 16, blocks = (depth + 1) / bt + 2;
  KvCache kv(spec.kv_groups, bt, std::vector<int32_t>(spec.kv_groups.size(), blocks), KvType::F16);
  SequenceKv seq(kv);
  if (!seq.reserve(depth + 1)) fail("draft bench: cannot reserve %d positions", depth + 1);
  std::mt19937_64 rng(7);
  std::vector<int32_t> ids(static_cast<size_t>(depth + 1));
  const int32_t id0 = spec.n_vocab > 2000 ? 1000 : 0;  // past the special tokens of real vocabularies
  for (int32_t& t : ids) t = id0 + static_cast<int32_t>(rng() % static_cast<uint64_t>(spec.n_vocab - id0));
  std::vector<float> logits(static_cast<size_t>(spec.n_vocab)), h(static_cast<size_t>(spec.n_embd));
  auto forward = [&](int32_t pos0, int32_t n) {
    models::ForwardBatch b;
    models::SeqSlice s;
    s.tokens = std::span<const int32_t>(ids.data() + pos0, static_cast<size_t>(n));
    s.pos0 = pos0;
    for (int g = 0; g < kv.n_groups(); ++g) s.block_tables[g] = seq.table(g);
    b.seqs.push_back(s);
    b.hidden = h.data();
    sess.model().forward(b, kv, logits.data());
  };
  forward(0, depth);
  DraftStepCost c;
  c.depth = depth;
  c.target_ms = median_ms(n_steps, [&] { forward(depth, 1); });
  models::DraftRow row;
  row.token = ids[depth];
  row.hidden = h.data();
  row.pos = depth;
  for (int g = 0; g < kv.n_groups(); ++g) row.block_tables[g] = seq.table(g);
  models::DraftStepOut out;
  if (asst->spec().n_centroids > 0)
    c.centroid_ms = median_ms(n_steps, [&] { asst->step({&row, 1}, kv, models::DraftHead::kCentroid, out); });
  c.full_ms = median_ms(n_steps, [&] { asst->step({&row, 1}, kv, models::DraftHead::kFull, out); });
  // The same on the calling thread alone: a step of small matmuls pays a pool hand-off each.
  ThreadPool one(1);
  lo.pool = &one;
  auto inline_asst = models::load_gemma4_assistant(*file, lo);
  inline_asst->bind_target(sess.file(), sess.spec());
  if (asst->spec().n_centroids > 0)
    c.centroid_1t_ms = median_ms(n_steps, [&] { inline_asst->step({&row, 1}, kv, models::DraftHead::kCentroid, out); });
  return c;
}

void print_draft_step(const DraftStepCost& c) {
  std::printf("\ndraft step (assistant) at depth %d: target decode step %.3f ms\n", c.depth, c.target_ms);
  if (c.centroid_ms > 0)
    std::printf("  centroid head %.3f ms (%.1f%% of a target step)\n", c.centroid_ms,
                100 * c.centroid_ms / c.target_ms);
  std::printf("  full head     %.3f ms (%.1f%% of a target step)\n", c.full_ms, 100 * c.full_ms / c.target_ms);
  if (c.centroid_1t_ms > 0)
    std::printf("  centroid head on the calling thread alone %.3f ms (%.1f%%)\n", c.centroid_1t_ms,
                100 * c.centroid_1t_ms / c.target_ms);
}

}  // namespace sluice::app
