#include "apps/sluice/engine_session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "apps/sluice/assistant_parts.h"
#include "apps/sluice/audio_tower.h"
#include "apps/sluice/image_tower.h"
#include "base/error.h"
#include "engine/kv_budget.h"
#include "tokenizer/same_vocabulary.h"

namespace sluice::app {

namespace {

// Loads --draft when opt.spec is "draft" (else returns empty parts). Checks the vocabulary
// against the target's (same token texts, else an Error naming the first differing id). The
// draft's blocks are sized like the target's from `budget`; with a memory budget the two
// share it by bytes per token (engine::draft_kv_share), and budget.memory_bytes becomes the
// target's part.
DraftParts load_draft(const SessionOptions& opt, const gguf::GgufFile& target_file, const models::ModelSpec& target,
                      ThreadPool& pool, engine::KvBudget& budget);

// Sets cfg's proposer and draft length from --spec / --draft-max (and the draft model's hook
// for --spec draft), and the policy's step-cost curve (--spec-cost, else `measured` when the
// tuning cache has one); a bad value is an Error.
void apply_spec_options(const SessionOptions& opt, engine::EngineConfig& cfg, const DraftParts& draft,
                        const spec::StepCostCurve* measured);

}  // namespace

EngineStack::EngineStack(const SessionOptions& opt) : ctx_size_(opt.ctx_size) {
  const auto t0 = std::chrono::steady_clock::now();
  std::fprintf(stderr, "loading %s ...\n", opt.model_path.c_str());
  file_ = gguf::GgufFile::open(opt.model_path);
  pool_ = std::make_unique<ThreadPool>(opt.threads > 0 ? opt.threads : ThreadPool::default_threads());
  models::LoadOptions lo;
  lo.pool = pool_.get();
  lo.lm_head = models::parse_lm_head_format(opt.lm_head);
  model_ = models::load_model(*file_, lo);
  if (!opt.mmproj.empty()) {  // before the KV cache and tuning: a wrong mmproj fails fast
    std::fprintf(stderr, "loading %s ...\n", opt.mmproj.c_str());
    if (opt.mmproj_vision) images_ = std::make_unique<ImageTower>(opt.mmproj, model_->spec(), *pool_);
    if (opt.mmproj_audio) audio_ = std::make_unique<AudioTower>(opt.mmproj, model_->spec(), pool_->size());
  }
  if (ctx_size_ < 2) fail("--ctx-size must be at least 2");
  const int n_seqs = std::max(1, opt.n_seqs);
  const int64_t budget = opt.token_budget > 0 ? opt.token_budget : static_cast<int64_t>(ctx_size_) * n_seqs;
  if (budget > (1 << 30)) fail("--ctx-size %d is too large", ctx_size_);
  // Blocks for --ctx-size × n_seqs positions, or --kv-memory bytes.
  engine::KvBudget kb;
  kb.ctx_size = ctx_size_;
  kb.parallel = n_seqs;
  kb.block_tokens = opt.block_tokens;
  kb.chunk = static_cast<int32_t>(budget);
  kb.memory_bytes = opt.kv_memory;
  kb.type = parse_kv_type(opt.kv_type);
  kb.window_margin = spec_window_margin(opt);
  const auto& spec = model_->spec();
  draft_ = load_draft(opt, *file_, spec, *pool_, kb);
  kv_ = std::make_unique<KvCache>(spec.kv_groups, opt.block_tokens, engine::kv_blocks_per_group(spec.kv_groups, kb),
                                  kb.type);
  tuning_ = apply_tuning(opt.retune ? TuneMode::kForce : tune_mode(opt.no_tune), *model_, *kv_, *pool_, *file_,
                         ctx_size_);
  config_.sample_pool = pool_.get();
  config_.sched.max_running = n_seqs;
  config_.sched.token_budget = static_cast<int32_t>(budget);
  config_.sched.ctx_size = ctx_size_;
  config_.prefix_caching = opt.prefix_caching;
  if (opt.kv_events) kv_events_ = std::make_unique<KvEventLog>(opt.block_tokens);
  config_.kv_events = kv_events_.get();
  apply_spec_options(opt, config_, draft_, &tuning_.record.curve);
  assistant_ = make_assistant(opt, *pool_, *file_, *model_, *kv_, config_);
  if (opt.draft_hook) {
    config_.sched.draft_hook = opt.draft_hook;
    config_.sched.draft_max = opt.draft_max;
  }
  load_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (tuning_.source == "calibrated") load_ms_ -= tuning_.record.calibration_s * 1e3;  // reported on its own
  loaded_memory_ = process_memory();
}

EngineStack::~EngineStack() = default;

EngineSession::EngineSession(const SessionOptions& opt)
    : stack_(opt), core_(std::make_unique<engine::EngineCore>(stack_.model(), stack_.kv(), stack_.config())) {}

EngineSession::~EngineSession() = default;

namespace {

DraftParts load_draft(const SessionOptions& opt, const gguf::GgufFile& target_file, const models::ModelSpec& target,
                      ThreadPool& pool, engine::KvBudget& budget) {
  DraftParts d;
  if (opt.spec != "draft") return d;
  if (opt.draft_path.empty()) fail("--spec draft needs --draft FILE (a model with the target's vocabulary)");
  std::fprintf(stderr, "loading draft %s ...\n", opt.draft_path.c_str());
  d.file = gguf::GgufFile::open(opt.draft_path);
  tok::check_same_vocabulary(target_file, *d.file);
  models::LoadOptions lo;
  lo.pool = &pool;
  lo.lm_head = models::parse_lm_head_format(opt.lm_head);
  d.model = models::load_model(*d.file, lo);
  const auto& ds = d.model->spec();
  engine::KvBudget db = budget;
  if (budget.memory_bytes > 0) {
    db.memory_bytes = engine::draft_kv_share(budget.memory_bytes, target.kv_groups, ds.kv_groups, budget.type);
    budget.memory_bytes -= db.memory_bytes;
  }
  d.kv = std::make_unique<KvCache>(ds.kv_groups, db.block_tokens, engine::kv_blocks_per_group(ds.kv_groups, db),
                                   db.type);
  engine::DraftModelConfig dc;
  dc.chunk = budget.chunk;
  dc.p_min = opt.draft_p_min;
  d.proposer = std::make_unique<engine::DraftModelProposer>(*d.model, *d.kv, target.n_vocab, dc);
  return d;
}

void apply_spec_options(const SessionOptions& opt, engine::EngineConfig& cfg, const DraftParts& draft,
                        const spec::StepCostCurve* measured) {
  if (opt.spec == "none") {
    cfg.spec = engine::SpecMethod::kNone;
    cfg.sched.draft_max = 0;
    return;
  }
  if (opt.spec != "ngram" && opt.spec != "draft" && opt.spec != "assistant")
    fail("--spec '%s': expected none, ngram, draft or assistant", opt.spec.c_str());
  if (opt.draft_max < 1 || opt.draft_max > 64) fail("--draft-max must be in [1, 64], got %d", opt.draft_max);
  cfg.sched.draft_max = opt.draft_max;
  if (opt.spec_policy != "adaptive" && opt.spec_policy != "fixed")
    fail("--spec-policy '%s': expected adaptive or fixed", opt.spec_policy.c_str());
  cfg.sched.policy.adaptive = opt.spec_policy == "adaptive";
  cfg.sched.policy.margin = opt.spec_margin;
  // One calibration for both: unless --spec-cost names a curve, the policy prices steps with
  // this host's measured one (sluice tune), else its built-in one.
  if (!opt.spec_cost.empty()) cfg.sched.policy.curve = spec::StepCostCurve::parse(opt.spec_cost);
  else if (measured && !measured->points.empty()) cfg.sched.policy.curve = *measured;
  if (opt.spec == "ngram") {
    cfg.spec = engine::SpecMethod::kNgram;
    return;
  }
  cfg.spec = engine::SpecMethod::kModel;
  if (opt.spec == "assistant") return;  // make_assistant sets cfg.model_proposer
  if (!draft.proposer) fail("--spec draft: the draft model is not loaded");
  cfg.model_proposer = draft.proposer.get();
}

}  // namespace

void print_draft_summary(const DraftParts& d) {
  if (!d.model) return;
  const auto& s = d.model->spec();
  std::fprintf(stderr, "draft %s: %s (%s), %d layers | weights %.1f MiB mapped | KV cache %.1f MiB (%s)\n",
               d.file->name().c_str(), s.name.c_str(), s.arch.c_str(), s.n_layer, d.file->file_size() / 1048576.0,
               d.kv->bytes() / 1048576.0, kv_type_name(d.kv->type()));
}

engine::RequestId EngineSession::add_scoring(std::vector<int32_t> prompt,
                                             std::shared_ptr<const engine::SoftTokens> soft) {
  engine::EngineRequest req;
  const engine::RequestId id = req.id = next_id();
  req.prompt = std::move(prompt);
  req.soft = std::move(soft);
  req.sampling.temperature = 0;
  req.all_logits = true;
  core_->add(std::move(req));
  return id;
}

void EngineSession::drive(engine::RequestId id, const std::function<void(engine::TokenOutput&)>& on,
                          const std::atomic<bool>* interrupt) {
  bool aborted = false;
  for (;;) {
    if (interrupt && interrupt->load() && !aborted) {
      core_->abort(id);
      aborted = true;
    }
    std::vector<engine::TokenOutput> outs = core_->has_work() ? core_->step() : core_->take_outputs();
    bool done = false;
    for (engine::TokenOutput& o : outs) {
      if (o.id != id) continue;
      on(o);
      done = done || o.finish.has_value();
    }
    if (done) return;
    if (!core_->has_work() && outs.empty())
      fail("the engine stopped before request %llu finished", static_cast<unsigned long long>(id));
  }
}

void EngineStack::print_summary() const {
  const auto& s = model_->spec();
  std::fprintf(
      stderr,
      "%s: %s (%s), %d layers, vocab %d | file %.1f MiB | KV cache %.1f MiB (%s, %d positions) | %d threads | loaded in %.0f ms\n",
      file_->name().c_str(), s.name.c_str(), s.arch.c_str(), s.n_layer, s.n_vocab, file_->file_size() / 1048576.0,
      kv_->bytes() / 1048576.0, kv_type_name(kv_->type()), ctx_size_, pool_->size(), load_ms_);
  if (loaded_memory_.known)
    std::fprintf(stderr, "resident after load %.1f MiB, peak %.1f MiB (%.2fx / %.2fx the file)\n",
                 loaded_memory_.rss / 1048576.0, loaded_memory_.peak_rss / 1048576.0,
                 loaded_memory_.rss / double(file_->file_size()), loaded_memory_.peak_rss / double(file_->file_size()));
  print_draft_summary(draft_);
  std::fprintf(stderr, "%s\n", describe_outcome(tuning_).c_str());
}

}  // namespace sluice::app
