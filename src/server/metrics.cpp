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

static void histogram(std::ostringstream& o, const char* name, const char* help, const api::LatencySnapshot& h) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
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
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << v << '\n';
}

// One counter per draft position i = 1 .. --draft-max, labelled position="i".
static void per_position(std::ostringstream& o, const char* name, const char* help, const std::vector<int64_t>& v) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n";
  for (size_t i = 0; i < v.size(); ++i) o << name << "{position=\"" << i + 1 << "\"} " << v[i] << '\n';
}

std::string Metrics::render(const api::EngineSnapshot& s, int32_t parallel) const {
  std::ostringstream o;
  o << "# HELP sluice_requests_total HTTP requests answered, by endpoint and status code\n"
       "# TYPE sluice_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [k, n] : requests_)
      o << "sluice_requests_total{endpoint=\"" << k.first << "\",status=\"" << k.second << "\"} " << n << '\n';
  }
  metric(o, "sluice_prompt_tokens_total", "counter", "prompt tokens of finished requests",
         static_cast<double>(prompt_tokens_.load()));
  metric(o, "sluice_generation_tokens_total", "counter", "tokens generated for finished requests",
         static_cast<double>(completion_tokens_.load()));
  metric(o, "sluice_requests_running", "gauge", "sequences in the running batch", s.stats.n_running);
  metric(o, "sluice_requests_waiting", "gauge", "requests in the waiting queue (queue depth)", s.n_queued);
  metric(o, "sluice_parallel_max", "gauge", "largest running batch (--parallel)", parallel);
  metric(o, "sluice_kv_blocks_used", "gauge", "KV blocks in use, all layer groups", s.stats.kv_blocks_used);
  metric(o, "sluice_kv_blocks_total", "gauge", "KV blocks, all layer groups", s.stats.kv_blocks_total);
  metric(o, "sluice_kv_usage_ratio", "gauge", "fraction of KV blocks in use",
         s.stats.kv_blocks_total > 0 ? static_cast<double>(s.stats.kv_blocks_used) / s.stats.kv_blocks_total : 0.0);
  metric(o, "sluice_engine_steps_total", "counter", "engine steps (one forward each)",
         static_cast<double>(s.stats.steps));
  metric(o, "sluice_preemptions_total", "counter", "sequences preempted for lack of KV blocks",
         static_cast<double>(s.stats.preemptions));
  metric(o, "sluice_prompt_tokens_computed_total", "counter", "prompt positions computed (cache hits excluded)",
         static_cast<double>(s.stats.prompt_tokens_computed));
  metric(o, "sluice_prefix_cache_queries_total", "counter", "prompt positions looked up in the prefix cache",
         static_cast<double>(s.stats.prefix_query_tokens));
  metric(o, "sluice_prefix_cache_hits_total", "counter", "prompt positions served from the prefix cache",
         static_cast<double>(s.stats.prefix_hit_tokens));
  metric(o, "sluice_spec_drafted_tokens_total", "counter", "drafted tokens verified (--spec)",
         static_cast<double>(s.stats.drafted_tokens));
  metric(o, "sluice_spec_accepted_tokens_total", "counter", "drafted tokens the model agreed with and kept",
         static_cast<double>(s.stats.accepted_tokens));
  per_position(o, "sluice_spec_drafted_position_total", "verifications with a draft at this position (1 = first)",
               s.stats.drafted_at);
  per_position(o, "sluice_spec_accepted_position_total", "drafts accepted at this position (1 = first)",
               s.stats.accepted_at);
  histogram(o, "sluice_time_to_first_token_seconds", "from submission to the first generated token", s.ttft);
  histogram(o, "sluice_inter_token_latency_seconds", "between consecutive tokens of a request", s.itl);
  return o.str();
}

}  // namespace sluice::server
