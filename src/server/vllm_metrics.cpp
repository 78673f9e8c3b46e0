#include "server/vllm_metrics.h"

namespace sluice::server {

namespace {

// Writes families whose every sample carries the same label set, {model_name="..."}.
class Writer {
 public:
  Writer(std::ostringstream& o, const std::string& model) : o_(o), labels_("model_name=\"" + escape(model) + "\"") {}

  void gauge(const char* name, const char* help, double v) { sample(name, "gauge", help, v); }
  void counter(const char* name, const char* help, double v) { sample(name, "counter", help, v); }

  void info(const char* name, const char* help, const std::string& extra) {
    head(name, "gauge", help);
    o_ << name << '{' << labels_ << ',' << extra << "} 1\n";
  }

  void histogram(const char* name, const char* help, const api::LatencySnapshot& h) {
    head(name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cum += h.counts[i];
      o_ << name << "_bucket{" << labels_ << ",le=\"" << h.bounds[i] << "\"} " << cum << '\n';
    }
    cum += h.counts.empty() ? 0 : h.counts.back();
    o_ << name << "_bucket{" << labels_ << ",le=\"+Inf\"} " << cum << '\n';
    o_ << name << "_sum{" << labels_ << "} " << h.sum << '\n'
       << name << "_count{" << labels_ << "} " << h.count << '\n';
  }

  // A label value in the exposition format: backslash, quote and newline escaped.
  static std::string escape(const std::string& v) {
    std::string out;
    for (char c : v) {
      if (c == '\\' || c == '"') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    return out;
  }

 private:
  void head(const char* name, const char* type, const char* help) {
    o_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const char* name, const char* type, const char* help, double v) {
    head(name, type, help);
    o_ << name << '{' << labels_ << "} " << v << '\n';
  }

  std::ostringstream& o_;
  std::string labels_;
};

}  // namespace

void render_vllm_metrics(std::ostringstream& o, const api::EngineSnapshot& s, const VllmCacheInfo& info,
                         const TokenTotals& tokens) {
  Writer w(o, info.model_name);
  const auto& st = s.stats;
  const double kv = st.kv_blocks_total > 0 ? static_cast<double>(st.kv_blocks_used) / st.kv_blocks_total : 0.0;
  w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", st.n_running);
  w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.n_queued);
  w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv);
  w.gauge("vllm:gpu_cache_usage_perc", "KV-cache usage (the name before vLLM 0.10). 1 means 100 percent usage.", kv);
  w.info("vllm:cache_config_info", "Information of the engine's cache configuration.",
         "block_size=\"" + std::to_string(info.block_size) + "\",num_gpu_blocks=\"" + std::to_string(info.num_blocks) +
             "\",enable_prefix_caching=\"" + (info.prefix_caching ? "True" : "False") + "\",cache_dtype=\"" +
             Writer::escape(info.cache_dtype) + "\"");
  w.counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
            static_cast<double>(st.prefix.query_tokens));
  w.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
            static_cast<double>(st.prefix.hit_tokens));
  w.counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.",
            static_cast<double>(st.preemptions));
  w.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed (finished requests).",
            static_cast<double>(tokens.prompt));
  w.counter("vllm:generation_tokens_total", "Number of generation tokens processed (finished requests).",
            static_cast<double>(tokens.generation));
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft);
  w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", s.itl);
}

}  // namespace sluice::server
