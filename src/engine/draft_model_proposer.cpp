#include "engine/draft_model_proposer.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace sluice::engine {

// One sequence's draft K/V: its blocks in the draft's cache and the tokens they hold.
class DraftModelProposer::SeqKv final : public ProposerState {
 public:
  SeqKv(SeqStates<SeqKv>& registry, const Sequence& s, BlockManager& b) : registry_(registry), seq_(&s), blocks_(b) {
    registry_.add(seq_, this);
  }
  ~SeqKv() override {
    blocks_.free(kv);
    registry_.remove(seq_);
  }
  void reset() override {  // preemption: the K/V goes with the target's
    blocks_.free(kv);
    kv_tokens.clear();
  }

  SeqBlocks kv;
  std::vector<int32_t> kv_tokens;  // the tokens at positions [0, size) of kv, drafts included

 private:
  SeqStates<SeqKv>& registry_;
  const Sequence* seq_;
  BlockManager& blocks_;
};

DraftModelProposer::DraftModelProposer(models::Model& draft, KvCache& kv, int32_t target_n_vocab,
                                       const DraftModelConfig& cfg)
    : model_(draft), blocks_(kv, /*prefix_caching=*/false), cfg_(cfg) {
  if (draft.spec().n_vocab != target_n_vocab)
    fail("draft model: vocabulary of %d tokens, the target has %d", draft.spec().n_vocab, target_n_vocab);
  if (kv.n_groups() > models::kMaxKvGroups)
    fail("draft model: %d KV groups, at most %d", kv.n_groups(), models::kMaxKvGroups);
  if (cfg.chunk < 1) fail("draft model: chunk must be >= 1");
  if (!(cfg.p_min >= 0.0f && cfg.p_min <= 1.0f)) fail("--draft-p-min must be in [0, 1], got %g", cfg.p_min);
}

DraftModelProposer::~DraftModelProposer() = default;

std::unique_ptr<ProposerState> DraftModelProposer::make_state(const Sequence& s) {
  return std::make_unique<SeqKv>(states_, s, blocks_);
}

void DraftModelProposer::sync(Active& a) {
  SeqKv& st = *a.st;
  // Keep the longest common prefix with the final tokens, short of the last one (its row
  // gives d1). Everything beyond was a rejected draft or a trimmed token.
  const std::vector<int32_t>& t = a.seq->tokens;
  const size_t limit = std::min(st.kv_tokens.size(), t.size() - 1);
  size_t keep = 0;
  while (keep < limit && st.kv_tokens[keep] == t[keep]) ++keep;
  if (keep == st.kv_tokens.size()) return;
  const int32_t k = static_cast<int32_t>(keep);
  if (k > 0 && blocks_.can_resume(st.kv, k)) {
    st.kv_tokens.resize(static_cast<size_t>(blocks_.truncate(st.kv, k)));
  } else {
    blocks_.free(st.kv);
    st.kv_tokens.clear();
  }
}

void DraftModelProposer::run_forward() {
  const size_t V = static_cast<size_t>(model_.spec().n_vocab);
  logits_.resize(static_cast<size_t>(std::max<int64_t>(fb_.n_logit_rows(), 1)) * V);
  model_.forward(fb_, blocks_.kv(), logits_.data());
  ++stats_.forwards;
  stats_.tokens_computed += fb_.n_tokens();
}

// The draft's next token after a row: argmax (ties: the lower id), unless p_min rules it out.
void DraftModelProposer::take(Active& a, const float* row) {
  const int32_t V = model_.spec().n_vocab;
  int32_t best = 0;
  for (int32_t i = 1; i < V; ++i)
    if (row[i] > row[best]) best = i;
  if (cfg_.p_min > 0.0f) {
    double sum = 0;  // p(best) = 1 / Σ exp(l − l_best)
    for (int32_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(row[i]) - row[best]);
    if (!(1.0 / sum >= cfg_.p_min)) {
      a.k_max = static_cast<int32_t>(a.seq->proposal.tokens.size());  // stop drafting this sequence
      return;
    }
  }
  a.seq->proposal.tokens.push_back(best);
  ++stats_.proposed;
}

void DraftModelProposer::catch_up() {
  for (;;) {
    fb_.seqs.clear();
    in_batch_.clear();
    for (Active& a : active_) {
      SeqKv& st = *a.st;
      const std::vector<int32_t>& t = a.seq->tokens;
      const int32_t pos0 = static_cast<int32_t>(st.kv_tokens.size());
      const int32_t n = std::min(static_cast<int32_t>(t.size()) - pos0, cfg_.chunk);
      if (n <= 0 || a.k_max == 0) continue;
      // Blocks no query from here on can see: positions before pos0 are final tokens, so no
      // later rollback reaches below it.
      blocks_.release_outside_window(st.kv, pos0);
      if (!blocks_.reserve(st.kv, pos0, pos0 + n)) {
        ++stats_.no_room;
        a.k_max = 0;  // no drafts this step; its K/V so far stays
        continue;
      }
      models::SeqSlice sl;
      sl.tokens = std::span<const int32_t>(t.data() + pos0, static_cast<size_t>(n));
      sl.pos0 = pos0;
      for (int32_t g = 0; g < blocks_.n_groups(); ++g) sl.block_tables[g] = st.kv.tables[g];
      sl.logits = pos0 + n == static_cast<int32_t>(t.size()) ? models::LogitsWanted::kLast
                                                             : models::LogitsWanted::kNone;
      fb_.seqs.push_back(sl);
      in_batch_.push_back(&a);
    }
    if (fb_.seqs.empty()) return;
    run_forward();
    const size_t V = static_cast<size_t>(model_.spec().n_vocab);
    size_t row = 0;
    for (size_t i = 0; i < fb_.seqs.size(); ++i) {
      Active& a = *in_batch_[i];
      a.st->kv_tokens.insert(a.st->kv_tokens.end(), fb_.seqs[i].tokens.begin(), fb_.seqs[i].tokens.end());
      if (fb_.seqs[i].logits == models::LogitsWanted::kLast) take(a, logits_.data() + row++ * V);
    }
  }
}

void DraftModelProposer::extend(int32_t k_step) {
  fb_.seqs.clear();
  in_batch_.clear();
  for (Active& a : active_) {
    SeqKv& st = *a.st;
    const std::vector<int32_t>& drafts = a.seq->proposal.tokens;
    if (static_cast<int32_t>(drafts.size()) != k_step || k_step >= a.k_max) continue;
    const int32_t pos = static_cast<int32_t>(st.kv_tokens.size());  // where d_k_step goes
    if (!blocks_.reserve(st.kv, pos, pos + 1)) {
      ++stats_.no_room;
      continue;
    }
    st.kv_tokens.push_back(drafts.back());
    models::SeqSlice sl;
    sl.tokens = std::span<const int32_t>(st.kv_tokens.data() + pos, 1);
    sl.pos0 = pos;
    for (int32_t g = 0; g < blocks_.n_groups(); ++g) sl.block_tables[g] = st.kv.tables[g];
    sl.logits = models::LogitsWanted::kLast;
    fb_.seqs.push_back(sl);
    in_batch_.push_back(&a);
  }
  if (fb_.seqs.empty()) return;
  run_forward();
  const size_t V = static_cast<size_t>(model_.spec().n_vocab);
  for (size_t i = 0; i < in_batch_.size(); ++i) take(*in_batch_[i], logits_.data() + i * V);
}

void DraftModelProposer::propose(std::span<const ProposeSlot> slots) {
  active_.clear();
  for (const ProposeSlot& slot : slots) {
    slot.seq->proposal.clear();
    slot.seq->proposal.for_n_tokens = slot.seq->n_tokens();
    SeqKv* st = states_.find(slot.seq);
    if (!st || slot.k_max < 1) continue;
    active_.push_back({slot.seq, st, slot.k_max});
    sync(active_.back());
  }
  if (active_.empty()) return;
  catch_up();
  int32_t k_top = 0;
  for (const Active& a : active_) k_top = std::max(k_top, a.k_max);
  for (int32_t k = 1; k < k_top; ++k) extend(k);
}

}  // namespace sluice::engine
