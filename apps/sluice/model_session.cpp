#include "apps/sluice/model_session.h"

#include <chrono>
#include <cstdio>

#include "base/error.h"

namespace sluice::app {

ModelSession::ModelSession(const SessionOptions& opt) : ctx_size_(opt.ctx_size) {
  const auto t0 = std::chrono::steady_clock::now();
  std::fprintf(stderr, "loading %s ...\n", opt.model_path.c_str());
  file_ = gguf::GgufFile::open(opt.model_path);
  pool_ = std::make_unique<ThreadPool>(opt.threads > 0 ? opt.threads : ThreadPool::default_threads());
  models::LoadOptions lo;
  lo.pool = pool_.get();
  lo.lm_head = models::parse_lm_head_format(opt.lm_head);
  model_ = models::load_model(*file_, lo);
  if (ctx_size_ <= 0) fail("--ctx-size must be positive");
  const auto& spec = model_->spec();
  // Blocks per group: the whole context for global groups; the window plus one step's
  // worth of tokens for sliding groups (their old blocks return to the pool).
  std::vector<int32_t> blocks;
  for (const KvGroupSpec& g : spec.kv_groups) {
    const int32_t span = g.window > 0 ? std::min(ctx_size_, g.window + ctx_size_) : ctx_size_;
    blocks.push_back(((span + opt.block_tokens - 1) / opt.block_tokens + 1) * std::max(1, opt.n_seqs));
  }
  kv_ = std::make_unique<KvCache>(spec.kv_groups, opt.block_tokens, blocks, parse_kv_type(opt.kv_type));
  for (int i = 0; i < std::max(1, opt.n_seqs); ++i) seqs_.push_back(std::make_unique<SequenceKv>(*kv_));
  load_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void ModelSession::reserve(int seq, int32_t pos, int64_t end) {
  if (seq < 0 || seq >= static_cast<int>(seqs_.size())) fail("no sequence %d", seq);
  if (end > ctx_size_) fail("context is full: %lld positions needed, --ctx-size is %d", static_cast<long long>(end), ctx_size_);
  seqs_[seq]->release_outside_window(pos);
  if (!seqs_[seq]->reserve(static_cast<int32_t>(end))) fail("KV cache exhausted at position %lld", static_cast<long long>(end));
}

void ModelSession::eval(std::span<const int32_t> tokens, int32_t pos, models::LogitsWanted want,
                        std::vector<float>& logits, int seq) {
  reserve(seq, pos, static_cast<int64_t>(pos) + static_cast<int64_t>(tokens.size()));
  batch_.seqs.resize(1);
  models::SeqSlice& s = batch_.seqs[0];
  s.tokens = tokens;
  s.pos0 = pos;
  for (int32_t g = 0; g < kv_->n_groups(); ++g) s.block_tables[g] = seqs_[seq]->table(g);
  s.logits = want;
  logits.resize(static_cast<size_t>(batch_.n_logit_rows()) * model_->spec().n_vocab);
  model_->forward(batch_, *kv_, logits.data());
}

void ModelSession::eval_each(std::span<const int32_t> tokens, int32_t pos, std::vector<float>& logits) {
  if (tokens.size() != seqs_.size()) fail("eval_each: %zu tokens for %zu sequences", tokens.size(), seqs_.size());
  batch_.seqs.resize(seqs_.size());
  for (size_t i = 0; i < seqs_.size(); ++i) {
    reserve(static_cast<int>(i), pos, static_cast<int64_t>(pos) + 1);
    models::SeqSlice& s = batch_.seqs[i];
    s.tokens = tokens.subspan(i, 1);
    s.pos0 = pos;
    for (int32_t g = 0; g < kv_->n_groups(); ++g) s.block_tables[g] = seqs_[i]->table(g);
    s.logits = models::LogitsWanted::kLast;
  }
  logits.resize(static_cast<size_t>(batch_.n_logit_rows()) * model_->spec().n_vocab);
  model_->forward(batch_, *kv_, logits.data());
}

void ModelSession::print_summary() const {
  const auto& s = model_->spec();
  std::fprintf(stderr, "%s: %s (%s), %d layers, vocab %d | weights %.1f MiB mapped | KV cache %.1f MiB (%s, %d positions) | %d threads | loaded in %.0f ms\n",
               file_->name().c_str(), s.name.c_str(), s.arch.c_str(), s.n_layer, s.n_vocab, file_->file_size() / 1048576.0,
               kv_->bytes() / 1048576.0, kv_type_name(kv_->type()), ctx_size_, pool_->size(), load_ms_);
}

void ModelSession::reset() {
  for (auto& s : seqs_) s->clear();
}

}  // namespace sluice::app
