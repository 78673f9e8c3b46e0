// The Gemma 4 vision tower and projector against transformers, layer by layer: the tiny
// towers of python/tiny_vision.py (E2B-shaped with clamps that bite, 26B-shaped with
// standardisation) on two patch grids; taps from python/make_vision_golden.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/engine_core.h"
#include "gguf/reader.h"
#include "kv/kv_cache.h"
#include "kv/sequence_kv.h"
#include "models/encoder.h"
#include "threading/thread_pool.h"
#include "unit/media/media_util.h"
#include "unit/models/golden_util.h"

namespace sluice::models {
namespace {

nlohmann::json vision_manifest() {
  std::ifstream in(golden::kDir + "vision/manifest.json");
  return nlohmann::json::parse(in);
}

// make_vision_golden.patch_grid: pattern(16·cols, 16·rows)/255 as [rows·cols][16][16][3].
std::vector<float> patch_grid(int32_t cols, int32_t rows) {
  const media::RgbImage img = media::testing::pattern(cols * 16, rows * 16);
  std::vector<float> p(static_cast<size_t>(cols) * rows * 768);
  const float inv255 = static_cast<float>(1.0 / 255.0);
  size_t o = 0;
  for (int32_t gy = 0; gy < rows; ++gy)
    for (int32_t gx = 0; gx < cols; ++gx)
      for (int py = 0; py < 16; ++py)
        for (int k = 0; k < 48; ++k) p[o++] = static_cast<float>(img.row(gy * 16 + py)[gx * 48 + k]) * inv255;
  return p;
}

// Largest |a − b| relative to max(1, |b|), over all elements.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(double{a[i]} - b[i]) / std::max(1.0, std::fabs(double{b[i]})));
  return m;
}

std::map<std::string, std::vector<float>> encode_with_taps(ImageEncoder& enc, int32_t cols, int32_t rows, int k,
                                                           std::vector<float>* soft) {
  std::map<std::string, std::vector<float>> got;
  enc.set_tap([&](const TapView& t) {
    std::string name = "img" + std::to_string(k) + ".";
    if (std::string(t.name) == "v_embd") name += "embd";
    if (std::string(t.name) == "v_l_out") name += "l_out." + std::to_string(t.layer);
    if (std::string(t.name) == "v_pooled") name += "pooled";
    if (std::string(t.name) == "v_soft") name += "soft";
    got[name].assign(t.data, t.data + t.rows * t.width);
  });
  const std::vector<float> patches = patch_grid(cols, rows);
  soft->assign(static_cast<size_t>(cols / 3) * (rows / 3) * enc.text_width(), 0.0f);
  enc.encode(patches.data(), cols, rows, soft->data());
  enc.set_tap({});
  return got;
}

// A manifest tower's mmproj and its encoder (the file outlives the encoder that reads it).
struct Tower {
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<ImageEncoder> enc;
};

Tower load_tower(const nlohmann::json& t, ThreadPool& pool) {
  Tower tw;
  tw.file = golden::open_fixture(t["gguf"].get<std::string>());
  LoadOptions opt;
  opt.pool = &pool;
  tw.enc = load_image_encoder(*tw.file, opt);
  return tw;
}

TEST(VisionGolden, EveryLayerMatchesTransformers) {
  const nlohmann::json m = vision_manifest();
  ASSERT_EQ(m["towers"].size(), 2u);
  ThreadPool pool(2);
  for (const auto& t : m["towers"]) {
    SCOPED_TRACE(t["id"].get<std::string>());
    const Tower tower = load_tower(t, pool);
    ImageEncoder* enc = tower.enc.get();
    EXPECT_EQ(enc->text_width(), t["options"]["text_hidden"].get<int>());
    const auto want = golden::read_taps(golden::kDir + "vision/towers/" + t["id"].get<std::string>() + ".taps.bin");
    int k = 0, compared = 0;
    double worst = 0;
    for (const auto& g : t["grids"]) {
      std::vector<float> soft;
      const auto got = encode_with_taps(*enc, g[0].get<int>(), g[1].get<int>(), k, &soft);
      for (const auto& [name, ref] : want) {
        if (name.rfind("img" + std::to_string(k) + ".", 0) != 0) continue;
        ASSERT_TRUE(got.count(name)) << name;
        ASSERT_EQ(got.at(name).size(), ref.size()) << name;
        const double diff = max_rel_diff(got.at(name), ref);
        EXPECT_LE(diff, 1e-4) << name;
        worst = std::max(worst, diff);
        ++compared;
      }
      EXPECT_EQ(soft, got.at("img" + std::to_string(k) + ".soft"));
      ++k;
    }
    EXPECT_EQ(compared, static_cast<int>(want.size()));
    std::printf("%s: %d taps, largest relative difference %.2e\n", t["id"].get<std::string>().c_str(), compared, worst);
  }
}

// One e2e manifest entry loaded: the text model, the tower, the prompt and its soft tokens
// (both grids encoded, one row per image placeholder, in order).
struct E2e {
  ThreadPool pool{2};
  std::unique_ptr<gguf::GgufFile> text_file, mm_file;
  std::unique_ptr<Model> model;
  std::unique_ptr<ImageEncoder> enc;
  std::vector<int32_t> ids;
  std::shared_ptr<engine::SoftTokens> soft = std::make_shared<engine::SoftTokens>();
};

std::unique_ptr<E2e> load_e2e(const nlohmann::json& e) {
  auto f = std::make_unique<E2e>();
  LoadOptions opt;
  opt.pool = &f->pool;
  f->text_file = golden::open_fixture(e["text"].get<std::string>() + ".f32.gguf");
  f->mm_file = golden::open_fixture(e["tower"].get<std::string>() + ".mmproj.f32.gguf");
  f->model = load_model(*f->text_file, opt);
  f->enc = load_image_encoder(*f->mm_file, opt);
  f->ids = e["token_ids"].get<std::vector<int32_t>>();
  engine::SoftTokens& soft = *f->soft;
  soft.width = f->enc->text_width();
  soft.blocks = e["bidirectional"].get<bool>();
  for (const auto& g : e["grids"]) {
    const int32_t cols = g[0], rows = g[1];
    const size_t at = soft.rows.size();
    soft.rows.resize(at + static_cast<size_t>(cols / 3) * (rows / 3) * soft.width);
    f->enc->encode(patch_grid(cols, rows).data(), cols, rows, soft.rows.data() + at);
  }
  int64_t row = 0;
  for (int32_t t : f->ids)
    soft.at.push_back(t == e["image_token_id"].get<int32_t>() ? soft.rows.data() + soft.width * row++ : nullptr);
  EXPECT_EQ(row * soft.width, static_cast<int64_t>(soft.rows.size()));
  return f;
}

void two_image_prompt(const nlohmann::json& e);

// tiny-gemma4 + tiny-vision-e on a prompt with two images (<|image> n x <|image|> <image|>):
// soft tokens replace the placeholders unscaled, the per-layer inputs read the pad row there,
// causal attention throughout — logits within 1e-4 of transformers' Gemma4ForConditionalGeneration,
// whole or in chunks that split the images.
// And the 31B-shaped text fixture with the large tower: each image a bidirectional block on
// the sliding layers (whole prompt only: a block may not be split between slices).
TEST(VisionGolden, TwoImagePromptMatchesTransformers) {
  const nlohmann::json m = vision_manifest();
  ASSERT_EQ(m["e2e"].size(), 2u);
  for (const nlohmann::json& e : m["e2e"]) {
    SCOPED_TRACE(e["id"].get<std::string>());
    two_image_prompt(e);
  }
}

void two_image_prompt(const nlohmann::json& e) {
  const auto f = load_e2e(e);
  check_encoder_fits(*f->enc, f->model->spec(), "mmproj");
  const bool blocks = e["bidirectional"].get<bool>();
  EXPECT_EQ(f->enc->bidirectional_images(), blocks);
  Model& model = *f->model;
  const std::vector<int32_t>& ids = f->ids;
  const std::vector<const float*>& embd = f->soft->at;
  const std::vector<float> want = golden::read_f32(golden::kDir + "vision/" + e["logits"].get<std::string>());
  for (size_t chunk : {ids.size(), size_t{5}}) {
    if (blocks && chunk != ids.size()) continue;
    const std::vector<float> got = golden::run_with_soft_tokens(model, ids, embd, chunk, blocks);
    ASSERT_EQ(got.size(), want.size());
    const double diff = max_rel_diff(got, want);
    EXPECT_LE(diff, 1e-4) << "chunk " << chunk;
    std::printf("two-image prompt, chunks of %zu: largest relative logit difference %.2e\n", chunk, diff);
  }
  // Without the images (placeholders embedded as themselves) the logits are far off: the test sees them.
  const std::vector<float> plain = golden::run_with_soft_tokens(model, ids, std::vector<const float*>(ids.size()),
                                                                ids.size());
  EXPECT_GT(max_rel_diff(plain, want), 1e-2);
  if (blocks) {  // and causal image tokens are not what transformers computes for this family
    EXPECT_GT(max_rel_diff(golden::run_with_soft_tokens(model, ids, embd, ids.size(), false), want), 1e-3);
  }
}

// The same prompt through the engine (engine::EngineRequest::soft): chunked by a small token
// budget, batched with a text-only request of the same ids, and never served from the prefix
// cache that request filled.
void engine_requests(const nlohmann::json& e);

TEST(VisionGolden, EngineRequestsWithImages) {
  const nlohmann::json m = vision_manifest();
  ASSERT_EQ(m["e2e"].size(), 2u);
  for (const nlohmann::json& e : m["e2e"]) {
    SCOPED_TRACE(e["id"].get<std::string>());
    engine_requests(e);
  }
}

void engine_requests(const nlohmann::json& e) {
  const auto f = load_e2e(e);
  const auto& model = f->model;
  const std::vector<int32_t>& ids = f->ids;
  const std::shared_ptr<const engine::SoftTokens> soft = f->soft;
  const auto& groups = model->spec().kv_groups;
  KvCache kv(groups, 16, std::vector<int32_t>(groups.size(), 32), KvType::F32);
  engine::EngineConfig cfg;
  cfg.sched.token_budget = 7;  // the images span chunks
  cfg.sched.ctx_size = 256;
  engine::EngineCore core(*model, kv, cfg);
  auto request = [&](engine::RequestId id, bool images, bool all_logits) {
    engine::EngineRequest r;
    r.id = id, r.prompt = ids, r.max_tokens = 2, r.all_logits = all_logits;
    r.sampling.temperature = 0;
    if (images) r.soft = soft;
    core.add(std::move(r));
  };
  request(1, false, false);  // text only: publishes its full blocks
  request(2, true, true);    // scoring with images, in the same steps
  std::vector<float> logits;
  std::map<engine::RequestId, int32_t> cached, first;
  for (int step = 0; step < 100 && (core.stats().n_running + core.stats().n_waiting) > 0; ++step) {
    for (engine::TokenOutput& o : core.step()) {
      if (o.id == 2) logits.insert(logits.end(), o.logits.begin(), o.logits.end());
      if (!cached.count(o.id)) cached[o.id] = o.n_cached;
      if (o.token >= 0 && !first.count(o.id)) first[o.id] = o.token;
    }
    if (step == 0) request(3, true, false);  // images again, after request 1 published blocks
  }
  const std::vector<float> want = golden::read_f32(golden::kDir + "vision/" + e["logits"].get<std::string>());
  ASSERT_GE(logits.size(), want.size());
  logits.resize(want.size());
  EXPECT_LE(max_rel_diff(logits, want), 1e-4);
  // Request 3 may take request 2's blocks (the same images: engine/media_keys.h) but never
  // request 1's, whose placeholders stood for no image; a hit never ends inside a
  // bidirectional image (the first image spans positions 5-10, inside block 0).
  EXPECT_EQ(cached[3] % 16, 0);
  if (soft->blocks) EXPECT_TRUE(cached[3] == 0 || cached[3] >= 16);
  const int64_t V = e["n_vocab"].get<int64_t>();
  const auto last = want.begin() + static_cast<std::ptrdiff_t>((ids.size() - 1) * V);
  EXPECT_EQ(first[3], static_cast<int32_t>(std::max_element(last, last + V) - last));
}

// Prompt B shares prompt A's first image and the text after it up to position 12, then
// differs. With 8-token blocks, B's cache hit after A ends at position 8, inside the image
// (positions 5-10): a causal model keeps it, a bidirectional one is cut back to the image's
// start (5) and computes the image whole. Either way B answers exactly as on a fresh engine.
struct CacheRun {
  int32_t n_cached = -1;
  std::vector<engine::TokenLogprob> top;
};

CacheRun run_b(const E2e& f, bool after_a) {
  const auto& groups = f.model->spec().kv_groups;
  KvCache kv(groups, 8, std::vector<int32_t>(groups.size(), 32), KvType::F32);
  engine::EngineConfig cfg;
  cfg.sched.ctx_size = 256;
  engine::EngineCore core(*f.model, kv, cfg);
  std::vector<int32_t> b(f.ids.begin(), f.ids.begin() + 13);
  for (int32_t t : {77, 88, 99, 66, 55}) b.push_back(t);
  auto soft_b = std::make_shared<engine::SoftTokens>(*f.soft);
  soft_b->at.assign(f.soft->at.begin(), f.soft->at.begin() + 13);
  soft_b->at.resize(b.size(), nullptr);
  for (size_t i = 0; i < soft_b->at.size(); ++i)  // rows of the copy, same values
    if (soft_b->at[i]) soft_b->at[i] = soft_b->rows.data() + (f.soft->at[i] - f.soft->rows.data());
  auto add = [&](engine::RequestId id, std::vector<int32_t> prompt, std::shared_ptr<const engine::SoftTokens> soft) {
    engine::EngineRequest r;
    r.id = id, r.prompt = std::move(prompt), r.max_tokens = 1, r.top_logprobs = 5, r.soft = std::move(soft);
    r.sampling.temperature = 0;
    core.add(std::move(r));
  };
  auto drain = [&](engine::RequestId id, CacheRun* out) {
    for (int step = 0; step < 100 && (core.stats().n_running + core.stats().n_waiting) > 0; ++step)
      for (engine::TokenOutput& o : core.step())
        if (o.id == id && out && o.token >= 0) out->n_cached = o.n_cached, out->top = o.top;
  };
  if (after_a) {
    add(1, f.ids, f.soft);
    drain(1, nullptr);
  }
  CacheRun run;
  add(2, b, soft_b);
  drain(2, &run);
  return run;
}

TEST(VisionGolden, CacheHitEndingInsideAnImage) {
  const nlohmann::json m = vision_manifest();
  ASSERT_EQ(m["e2e"].size(), 2u);
  for (const nlohmann::json& e : m["e2e"]) {
    SCOPED_TRACE(e["id"].get<std::string>());
    const auto f = load_e2e(e);
    const CacheRun fresh = run_b(*f, false), cached = run_b(*f, true);
    EXPECT_EQ(fresh.n_cached, 0);
    EXPECT_EQ(cached.n_cached, e["bidirectional"].get<bool>() ? 5 : 8);
    ASSERT_EQ(cached.top.size(), fresh.top.size());
    ASSERT_FALSE(fresh.top.empty());
    for (size_t i = 0; i < fresh.top.size(); ++i) {
      EXPECT_EQ(cached.top[i].token, fresh.top[i].token);
      EXPECT_NEAR(cached.top[i].logprob, fresh.top[i].logprob, 1e-5);
    }
  }
}

// The encode cut into pieces (EncodeJob, run between engine steps by `sluice serve`) gives the
// bits of the whole encode, however it is cut: one row at a time, odd sizes that end mid-stage,
// time budgets; on both towers, a grid whose patch count is not a multiple of the attention's
// query block, with another thread count than the whole encode's.
TEST(VisionSlices, AnyCutGivesTheSameBits) {
  const nlohmann::json m = vision_manifest();
  ThreadPool pool(2), other(1);
  for (const auto& t : m["towers"]) {
    SCOPED_TRACE(t["id"].get<std::string>());
    const Tower tower = load_tower(t, pool);
    ImageEncoder* enc = tower.enc.get();
    const int32_t cols = 21, rows = 9;  // 189 patches: 31 blocks of 6 and a short one
    const std::vector<float> patches = patch_grid(cols, rows);
    std::vector<float> whole(static_cast<size_t>(cols / 3) * (rows / 3) * enc->text_width());
    enc->encode(patches.data(), cols, rows, whole.data());
    for (int64_t piece : {1, 5, 7, 64, 1000}) {
      SCOPED_TRACE(piece);
      std::vector<float> cut(whole.size(), -1.0f);
      const auto job = enc->start_encode(patches.data(), cols, rows, cut.data(), piece % 2 ? other : pool);
      while (!job->run_piece(piece)) {
      }
      EXPECT_EQ(cut, whole);
      if (piece < 189) EXPECT_GT(job->pieces(), 2 + 2 * 2 + 189 / piece);  // really cut
    }
    std::vector<float> timed(whole.size(), -1.0f);
    const auto job = enc->start_encode(patches.data(), cols, rows, timed.data(), pool);
    int calls = 0;
    while (!job->run_for(std::chrono::microseconds(50))) ++calls;
    EXPECT_EQ(timed, whole);
    EXPECT_GT(calls, 3);
  }
}

TEST(VisionErrors, BadFilesAndGrids) {
  ThreadPool pool(1);
  LoadOptions opt;
  opt.pool = &pool;
  // A text model is not an mmproj.
  const auto text = golden::open_fixture("tiny-gemma4.f32.gguf");
  try {
    load_image_encoder(*text, opt);
    FAIL() << "a text model loaded as an mmproj";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an mmproj file"), std::string::npos) << e.what();
  }
  const auto file = golden::open_fixture("tiny-vision-e.mmproj.f32.gguf");
  const auto enc = load_image_encoder(*file, opt);
  std::vector<float> patches(768 * 9 * 66), out(1 << 16);
  EXPECT_THROW(enc->encode(patches.data(), 4, 3, out.data()), Error);   // not a multiple of 3
  EXPECT_THROW(enc->encode(patches.data(), 66, 9, out.data()), Error);  // wider than the position table (64)
  // A mismatched text model: width 64 fits tiny-gemma4, a 32-wide one does not; gemma3 never.
  ModelSpec spec;
  spec.arch = "gemma4", spec.n_embd = 64;
  EXPECT_NO_THROW(check_encoder_fits(*enc, spec, "mmproj"));
  spec.n_embd = 32;
  EXPECT_THROW(check_encoder_fits(*enc, spec, "mmproj"), Error);
  spec.arch = "gemma3", spec.n_embd = 64;
  EXPECT_THROW(check_encoder_fits(*enc, spec, "mmproj"), Error);
}

}  // namespace
}  // namespace sluice::models
