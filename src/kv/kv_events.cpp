#include "kv/kv_events.h"

#include <utility>

namespace sluice {

KvEventLog::KvEventLog(int32_t block_tokens) : block_tokens_(block_tokens) { pending_.push_back(KvEvent{}); }

void KvEventLog::push(KvEvent e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending_.push_back(std::move(e));
  }
  cv_.notify_one();
}

std::vector<KvEvent> KvEventLog::take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return closed_ || !pending_.empty(); });
  std::vector<KvEvent> out;
  out.swap(pending_);
  return out;
}

void KvEventLog::close() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

}  // namespace sluice
