// One loaded model with a thread pool and a KV cache, for the single-user commands
// (logits, run, chat, perplexity). The server's engine owns these pieces itself.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kv/kv_cache.h"
#include "kv/sequence_kv.h"
#include "models/model.h"
#include "threading/thread_pool.h"

namespace sluice::app {

struct SessionOptions {
  std::string model_path;
  int threads = 0;          // 0: ThreadPool::default_threads()
  int ctx_size = 4096;      // positions one sequence may use
  std::string kv_type = "f16";   // half of f32's memory and bandwidth; llama.cpp's default too
  std::string lm_head = "packed";   // packed | int8 | q4_0 (models::LmHeadFormat)
  int block_tokens = 16;
  int n_seqs = 1;           // sequences with their own KV (sluice bench --batch)
};

class ModelSession {
 public:
  explicit ModelSession(const SessionOptions& opt);

  const models::ModelSpec& spec() const { return model_->spec(); }
  models::Model& model() { return *model_; }
  ThreadPool& pool() { return *pool_; }
  const gguf::GgufFile& file() const { return *file_; }
  int ctx_size() const { return ctx_size_; }
  uint64_t kv_bytes() const { return kv_->bytes(); }
  int threads() const { return pool_->size(); }
  void print_summary() const;   // memory and threads, to stderr

  // Feeds tokens at positions pos .. pos + n - 1 of sequence `seq`; writes the logits asked
  // for (n rows for kAll, 1 for kLast) to `logits`. Throws when the context is full.
  void eval(std::span<const int32_t> tokens, int32_t pos, models::LogitsWanted want, std::vector<float>& logits,
            int seq = 0);
  // One step decoding tokens[i] at position pos of every sequence i (tokens.size() ==
  // n_seqs): a batched decode. logits gets one row per sequence.
  void eval_each(std::span<const int32_t> tokens, int32_t pos, std::vector<float>& logits);
  void reset();   // forget every sequence (frees their KV blocks)
  // Whether sequence 0 can continue from position `pos` (<= what was evaluated) reusing its
  // cached K/V for [0, pos); false when needed blocks already left the window.
  bool can_resume_at(int32_t pos) const { return seqs_[0]->can_resume_at(pos); }

 private:
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<KvCache> kv_;
  std::vector<std::unique_ptr<SequenceKv>> seqs_;
  void reserve(int seq, int32_t pos, int64_t end);
  models::ForwardBatch batch_;   // reused: a decode step allocates nothing
  int ctx_size_;
  double load_ms_ = 0;
};

}  // namespace sluice::app
