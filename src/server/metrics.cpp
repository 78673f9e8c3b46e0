#include "server/metrics.h"

#include <sstream>

namespace sluice::server {

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::add_tokens(int64_t prompt, int64_t completion) {
  prompt_tokens_ += prompt;
  completion_tokens_ += completion;
}

// The # HELP and # TYPE lines of a metric family.
static void header(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

static void histogram(std::ostringstream& o, const char* name, const char* help, const api::LatencySnapshot& h) {
  header(o, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cum += h.counts[i];
    o << name << "_bucket{le=\"" << h.bounds[i] << "\"} " << cum << '\n';
  }
  cum += h.counts.empty() ? 0 : h.counts.back();
  o << name << "_bucket{le=\"+Inf\"} " << cum << '\n'
    << name << "_sum " << h.sum << '\n'
    << name << "_count " << h.count << '\n';
}

static void metric(std::ostringstream& o, const char* name, const char* type, const char* help, double v) {
  header(o, name, type, help);
  o << name << ' ' << v << '\n';
}

static void counter(std::ostringstream& o, const char* name, const char* help, int64_t v) {
  metric(o, name, "counter", help, static_cast<double>(v));
}

// One counter per draft position i = 1 .. --draft-max, labelled position="i".
static void per_position(std::ostringstream& o, const char* name, const char* help, const std::vector<int64_t>& v) {
  header(o, name, "counter", help);
  for (size_t i = 0; i < v.size(); ++i) o << name << "{position=\"" << i + 1 << "\"} " << v[i] << '\n';
}

std::string Metrics::render(const api::EngineSnapshot& s, int32_t parallel) const {
  std::ostringstream o;
  header(o, "sluice_requests_total", "counter", "HTTP requests answered, by endpoint and status code");
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [k, n] : requests_)
      o << "sluice_requests_total{endpoint=\"" << k.first << "\",status=\"" << k.second << "\"} " << n << '\n';
  }
  counter(o, "sluice_prompt_tokens_total", "prompt tokens of finished requests", prompt_tokens_.load());
  counter(o, "sluice_generation_tokens_total", "tokens generated for finished requests", completion_tokens_.load());
  metric(o, "sluice_requests_running", "gauge", "sequences in the running batch", s.stats.n_running);
  metric(o, "sluice_requests_waiting", "gauge", "requests in the waiting queue (queue depth)", s.n_queued);
  metric(o, "sluice_parallel_max", "gauge", "largest running batch (--parallel)", parallel);
  metric(o, "sluice_side_requests_running", "gauge",
         "tokenize, detokenize, apply-template and render requests admitted (reading their body or at work)",
         side_running_.load());
  metric(o, "sluice_kv_blocks_used", "gauge", "KV blocks in use, all layer groups", s.stats.kv_blocks_used);
  metric(o, "sluice_kv_blocks_total", "gauge", "KV blocks, all layer groups", s.stats.kv_blocks_total);
  metric(o, "sluice_kv_usage_ratio", "gauge", "fraction of KV blocks in use",
         s.stats.kv_blocks_total > 0 ? static_cast<double>(s.stats.kv_blocks_used) / s.stats.kv_blocks_total : 0.0);
  counter(o, "sluice_engine_steps_total", "engine steps (one forward each)", s.stats.steps);
  counter(o, "sluice_preemptions_total", "sequences preempted for lack of KV blocks", s.stats.preemptions);
  counter(o, "sluice_prompt_tokens_computed_total", "prompt positions computed (cache hits excluded)",
          s.stats.prompt_tokens_computed);
  counter(o, "sluice_prefix_cache_queries_total", "prompt positions looked up in the prefix cache",
          s.stats.prefix.query_tokens);
  counter(o, "sluice_prefix_cache_hits_total", "prompt positions served from the prefix cache",
          s.stats.prefix.hit_tokens);
  metric(o, "sluice_prefix_cache_blocks", "gauge", "findable prefix-cache blocks (the KV events' group)",
         s.stats.prefix_cached_blocks);
  counter(o, "sluice_spec_drafted_tokens_total", "drafted tokens verified (--spec)", s.stats.drafted_tokens);
  counter(o, "sluice_spec_accepted_tokens_total", "drafted tokens the model agreed with and kept",
          s.stats.accepted_tokens);
  counter(o, "sluice_spec_prompt_copy_drafted_tokens_total", "drafts n-gram lookup copied from the prompt",
          s.stats.drafted_prompt);
  counter(o, "sluice_spec_prompt_copy_accepted_tokens_total", "of those, accepted", s.stats.accepted_prompt);
  counter(o, "sluice_spec_output_copy_drafted_tokens_total", "drafts n-gram lookup copied from the output",
          s.stats.drafted_output);
  counter(o, "sluice_spec_output_copy_accepted_tokens_total", "of those, accepted", s.stats.accepted_output);
  per_position(o, "sluice_spec_drafted_position_total", "verifications with a draft at this position (1 = first)",
               s.stats.drafted_at);
  per_position(o, "sluice_spec_accepted_position_total", "drafts accepted at this position (1 = first)",
               s.stats.accepted_at);
  counter(o, "sluice_encoder_cache_hits_total", "media encodes skipped: the same input's encoder output was cached",
          static_cast<int64_t>(s.encoder_cache.hits));
  counter(o, "sluice_encoder_cache_misses_total", "media inputs not in the encoder cache (then encoded)",
          static_cast<int64_t>(s.encoder_cache.misses));
  metric(o, "sluice_encoder_cache_bytes", "gauge", "encoder outputs held (--encoder-cache bounds it)",
         static_cast<double>(s.encoder_cache.bytes));
  counter(o, "sluice_between_steps_jobs_total", "work the engine thread ran between steps (image encodes)",
          static_cast<int64_t>(s.shared.jobs));
  metric(o, "sluice_between_steps_seconds_total", "counter", "engine-thread time spent on that work", s.shared.seconds);
  counter(o, "sluice_between_steps_turns_skipped_total",
          "turns of that work left out right after a long prefill step (never two in a row)",
          static_cast<int64_t>(s.shared.turns_skipped));
  histogram(o, "sluice_time_to_first_token_seconds", "from submission to the first generated token", s.ttft);
  histogram(o, "sluice_inter_token_latency_seconds", "between consecutive tokens of a request", s.itl);
  if (vllm_) render_vllm_metrics(o, s, *vllm_, TokenTotals{prompt_tokens_.load(), completion_tokens_.load()});
  return o.str();
}

}  // namespace sluice::server
