#include "api/engine.h"

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <pthread.h>

#include "base/error.h"

namespace sluice::api {

using Clock = std::chrono::steady_clock;

// One request's outputs on their way from the engine thread to the consumer.
struct StreamState {
  RequestId id = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<TokenOutput> q;
  bool done = false;  // the final output is in q (or was taken)
  Clock::time_point t_submit, t_last;
  bool got_token = false;  // engine thread only
};

// One run_between_steps call: the work, and the caller waiting for its end. The end is a
// message (empty: done), not an exception_ptr: an exception object thrown on one thread and
// released on another is shared through libstdc++'s reference count, which ThreadSanitizer
// cannot see (it reported the engine thread freeing what the caller had read).
struct SharedWorkEnd {
  std::string error;       // empty: done
  bool shut_down = false;  // the engine stopped before the work ended
};
struct SharedWorkSlot {
  BetweenSteps* work = nullptr;
  std::promise<SharedWorkEnd> done;
};

// Everything other threads hand to the engine thread.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<EngineRequest, std::shared_ptr<StreamState>>> adds;
  std::vector<RequestId> cancels;
  std::vector<std::shared_ptr<SharedWorkSlot>> shared;
  bool stop = false;
  RequestId next_id = 1;
  int32_t n_queued = 0;  // adds + scheduler's waiting, refreshed by the engine thread
};

RequestHandle::RequestHandle(std::shared_ptr<StreamState> s, std::shared_ptr<Inbox> inbox)
    : s_(std::move(s)), inbox_(std::move(inbox)) {}

RequestHandle::~RequestHandle() { cancel(); }

RequestId RequestHandle::id() const { return s_->id; }

bool RequestHandle::finished() const { return finished_; }

void RequestHandle::cancel() {
  {
    std::lock_guard<std::mutex> lk(s_->mu);
    if (s_->done) return;  // nothing left to stop
  }
  std::lock_guard<std::mutex> lk(inbox_->mu);
  inbox_->cancels.push_back(s_->id);
  inbox_->cv.notify_one();
}

std::vector<TokenOutput> RequestHandle::wait(std::chrono::milliseconds timeout) {
  std::vector<TokenOutput> out;
  std::unique_lock<std::mutex> lk(s_->mu);
  s_->cv.wait_for(lk, timeout, [&] { return !s_->q.empty(); });
  while (!s_->q.empty()) {
    out.push_back(std::move(s_->q.front()));
    s_->q.pop_front();
    if (out.back().finish) finished_ = true;
  }
  return out;
}

static std::vector<double> ttft_buckets() { return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}; }
static std::vector<double> itl_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
}

Engine::Engine(models::Model& model, KvCache& kv, const EngineOptions& opt)
    : opt_(opt),
      core_(model, kv, opt.core),
      inbox_(std::make_shared<Inbox>()),
      ttft_(ttft_buckets()),
      itl_(itl_buckets()),
      encoder_cache_(opt.encoder_cache_bytes) {
  if (opt.max_waiting < 0) fail("the waiting queue length must be >= 0");
  publish_stats();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sluice-engine");  // top -H, /proc/<pid>/task/*/comm
    loop();
  });
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> lk(inbox_->mu);
    inbox_->stop = true;
    inbox_->cv.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

std::optional<std::string> Engine::check_request(const EngineRequest& r) const {
  if (auto why = core_.check_admissible(static_cast<int32_t>(r.prompt.size()))) return why;
  if (r.max_tokens < 1) return std::string("max_tokens must be at least 1");
  try {
    Sampler::validate(r.sampling);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

SubmitResult Engine::submit(EngineRequest r) {
  std::vector<EngineRequest> one;
  one.push_back(std::move(r));
  SubmitGroupResult g = submit_group(std::move(one));
  SubmitResult res;
  res.status = g.status;
  res.error = std::move(g.error);
  if (!g.handles.empty()) res.handle = std::move(g.handles.front());
  return res;
}

SubmitGroupResult Engine::submit_group(std::vector<EngineRequest> rs) {
  SubmitGroupResult res;
  const auto k = static_cast<int32_t>(rs.size());
  if (k > capacity()) {
    res.status = SubmitStatus::kInvalid;
    res.error = strfmt(
        "%d requests at once can never be admitted: the engine holds at most %d (%d running + %d "
        "waiting)",
        k, capacity(), core_.config().sched.max_running, opt_.max_waiting);
    return res;
  }
  for (const EngineRequest& r : rs)
    if (auto why = check_request(r)) {
      res.status = SubmitStatus::kInvalid;
      res.error = *why;
      return res;
    }
  int32_t n_running = 0;
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    n_running = stats_.n_running;
  }
  std::lock_guard<std::mutex> lk(inbox_->mu);
  if (inbox_->stop) {
    res.status = SubmitStatus::kShuttingDown;
    return res;
  }
  // Free running slots count as queue room: a request that arrives while the batch has
  // space is never refused. The whole group must fit, or none of it is queued.
  if (inbox_->n_queued + k > opt_.max_waiting + std::max(0, opt_.core.sched.max_running - n_running)) {
    res.status = SubmitStatus::kQueueFull;
    return res;
  }
  const auto now = Clock::now();
  for (EngineRequest& r : rs) {
    auto st = std::make_shared<StreamState>();
    st->t_submit = now;
    r.id = inbox_->next_id++;
    st->id = r.id;
    ++inbox_->n_queued;
    inbox_->adds.emplace_back(std::move(r), st);
    res.handles.push_back(std::make_unique<RequestHandle>(st, inbox_));
  }
  inbox_->cv.notify_one();
  return res;
}

void Engine::dispatch(std::vector<TokenOutput>& outs) {
  const auto now = Clock::now();
  for (TokenOutput& o : outs) {
    auto it = streams_.find(o.id);
    if (it == streams_.end()) continue;
    StreamState& s = *it->second;
    if (o.token >= 0 && !o.is_stop_token) {
      if (!s.got_token) ttft_.observe(std::chrono::duration<double>(now - s.t_submit).count());
      else itl_.observe(std::chrono::duration<double>(now - s.t_last).count());
      s.got_token = true;
      s.t_last = now;
    }
    const bool last = o.finish.has_value();
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.q.push_back(std::move(o));
      if (last) s.done = true;
    }
    s.cv.notify_all();
    if (last) streams_.erase(it);
  }
  outs.clear();
}

void Engine::publish_stats() {
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_ = core_.stats();
}

EngineSnapshot Engine::snapshot() const {
  EngineSnapshot s;
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    s.stats = stats_;
    s.shared = shared_stats_;
  }
  {
    std::lock_guard<std::mutex> lk(inbox_->mu);
    s.n_queued = inbox_->n_queued;
  }
  s.ttft = ttft_.snapshot();
  s.itl = itl_.snapshot();
  s.encoder_cache = encoder_cache_.stats();
  return s;
}

void Engine::run_between_steps(BetweenSteps& work) {
  auto slot = std::make_shared<SharedWorkSlot>();
  slot->work = &work;
  std::future<SharedWorkEnd> done = slot->done.get_future();
  {
    std::lock_guard<std::mutex> lk(inbox_->mu);
    if (inbox_->stop) throw ShuttingDown("the engine is shutting down");
    inbox_->shared.push_back(std::move(slot));
    inbox_->cv.notify_one();
  }
  const SharedWorkEnd end = done.get();
  if (end.shut_down) throw ShuttingDown(end.error);
  if (!end.error.empty()) throw Error(end.error);
}

// One turn of the shared work: about one step's time while requests run (then the next step
// comes), kIdleTurn when none does (then the inbox is looked at again).
void Engine::run_shared_work(bool between_steps) {
  using std::chrono::nanoseconds;
  if (shared_.empty()) return;
  const nanoseconds budget = between_steps
                                 ? std::max<nanoseconds>(
                                       kMinTurn,
                                       nanoseconds(static_cast<int64_t>(decode_ns_ > 0 ? decode_ns_ : step_ns_)))
                                 : nanoseconds(kIdleTurn);
  const auto t0 = Clock::now();
  SharedWorkStats add;
  std::vector<std::pair<std::shared_ptr<SharedWorkSlot>, std::string>> ended;
  while (!shared_.empty()) {  // at least one turn, however late this thread got here
    const nanoseconds left = budget - (Clock::now() - t0);
    if (left.count() <= 0 && add.turns > 0) break;
    bool done = false;
    std::string error;
    try {
      done = shared_.front()->work->run_for(left);
    } catch (const std::exception& e) {
      error = *e.what() ? e.what() : "the work between steps failed";
      done = true;
    } catch (...) {
      error = "the work between steps failed";
      done = true;
    }
    ++add.turns;
    add.turns_between += between_steps ? 1 : 0;
    if (done) {
      ++add.jobs;
      ended.emplace_back(std::move(shared_.front()), error);
      shared_.pop_front();
    }
  }
  add.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    shared_stats_.jobs += add.jobs;
    shared_stats_.turns += add.turns;
    shared_stats_.turns_between += add.turns_between;
    shared_stats_.seconds += add.seconds;
  }
  for (auto& [slot, error] : ended)
    slot->done.set_value({error, false});  // after the stats: a caller that wakes sees its work counted
}

void Engine::fail_shared_work(const char* why) {
  {
    std::lock_guard<std::mutex> lk(inbox_->mu);
    for (auto& slot : inbox_->shared) shared_.push_back(std::move(slot));
    inbox_->shared.clear();
  }
  for (auto& slot : shared_) slot->done.set_value({why, true});
  shared_.clear();
}

void Engine::take_inbox(std::vector<std::pair<EngineRequest, std::shared_ptr<StreamState>>>& adds,
                        std::vector<RequestId>& cancels) {
  adds.swap(inbox_->adds);
  cancels.swap(inbox_->cancels);
  for (auto& slot : inbox_->shared) shared_.push_back(std::move(slot));
  inbox_->shared.clear();
}

// The work between steps gets its turn after a step's tokens went out. A long prefill step is
// already the longest gap a decoding stream sees; a turn right after it would lengthen exactly
// that gap, so it waits one step — but never two in a row, so prefills cannot starve the work.
void Engine::share_turn() {
  const bool skip = core_.has_work() && long_step_ && !skipped_turn_ && !shared_.empty();
  skipped_turn_ = skip;
  if (skip) {
    std::lock_guard<std::mutex> lk(stats_mu_);
    ++shared_stats_.turns_skipped;
  } else {
    run_shared_work(core_.has_work());
  }
}

// One engine step (or, idle, the outputs already due) into `outs`, timing it for the turns of
// the work between steps.
void Engine::step(std::vector<TokenOutput>& outs) {
  try {
    const bool stepping = core_.has_work();
    const int64_t prompt0 = core_.scheduler().counters().prompt_tokens_computed;
    const auto t0 = Clock::now();
    std::vector<TokenOutput> step_out = stepping ? core_.step() : core_.take_outputs();
    long_step_ = false;
    if (stepping) {  // the shared work's turn: about one step (moving averages of the last few)
      const double ns = static_cast<double>(std::chrono::nanoseconds(Clock::now() - t0).count());
      step_ns_ = step_ns_ > 0 ? 0.75 * step_ns_ + 0.25 * ns : ns;
      // Steps that prefilled nothing: a long prefill chunk would stretch the turns after it,
      // and a decoding stream would wait that much longer for its next token.
      const bool prefilled = core_.scheduler().counters().prompt_tokens_computed != prompt0;
      long_step_ = prefilled && decode_ns_ > 0 && ns > kLongStep * decode_ns_;
      if (!prefilled) decode_ns_ = decode_ns_ > 0 ? 0.75 * decode_ns_ + 0.25 * ns : ns;
    }
    outs.insert(outs.end(), std::make_move_iterator(step_out.begin()), std::make_move_iterator(step_out.end()));
  } catch (const std::exception& e) {
    // A failed step must not take the server down: end every request, keep serving.
    std::fprintf(stderr, "sluice: engine step failed: %s; ending all requests\n", e.what());
    core_.abort_all(FinishReason::kError);
    std::vector<TokenOutput> rest = core_.take_outputs();
    for (TokenOutput& o : rest)
      if (o.finish == FinishReason::kError && o.error.empty()) o.error = std::string("engine step failed: ") + e.what();
    outs.insert(outs.end(), rest.begin(), rest.end());
  }
}

void Engine::loop() {
  std::vector<std::pair<EngineRequest, std::shared_ptr<StreamState>>> adds;
  std::vector<RequestId> cancels;
  std::vector<TokenOutput> outs;
  bool was_busy = false;
  for (;;) {
    const bool busy = core_.has_work() || !shared_.empty();
    if (was_busy && !busy) {
      // Going idle: hand freed heap pages back to the OS, so a server's resident memory
      // after a burst of requests returns to where it was (glibc keeps them per arena).
#if defined(__GLIBC__)
      malloc_trim(0);
#endif
    }
    was_busy = busy;
    {
      std::unique_lock<std::mutex> lk(inbox_->mu);
      inbox_->cv.wait(lk, [&] {
        return inbox_->stop || !inbox_->adds.empty() || !inbox_->cancels.empty() || !inbox_->shared.empty() ||
               core_.has_work() || !shared_.empty();
      });
      if (inbox_->stop) break;
      take_inbox(adds, cancels);
    }
    for (auto& [req, st] : adds) {
      const RequestId id = req.id;
      streams_.emplace(id, st);
      try {
        core_.add(std::move(req));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sluice: request %llu rejected by the engine: %s\n", static_cast<unsigned long long>(id),
                     e.what());
        TokenOutput o;
        o.id = id;
        o.finish = FinishReason::kError;
        o.error = std::string("rejected by the engine: ") + e.what();
        outs.push_back(o);
      }
    }
    adds.clear();
    for (RequestId id : cancels) core_.abort(id);
    cancels.clear();
    step(outs);
    // The stats first: a client that reads /metrics as soon as its request ended sees it ended.
    publish_stats();
    dispatch(outs);
    {
      std::lock_guard<std::mutex> lk(inbox_->mu);
      inbox_->n_queued = core_.scheduler().n_waiting() + static_cast<int32_t>(inbox_->adds.size());
    }
    share_turn();  // after the step's tokens went out
  }
  fail_shared_work("the engine shut down before the work was done");
  core_.abort_all(FinishReason::kAbort);
  outs = core_.take_outputs();
  // Requests submitted but never picked up end too.
  {
    std::lock_guard<std::mutex> lk(inbox_->mu);
    for (auto& [req, st] : inbox_->adds) {
      streams_.emplace(req.id, st);
      TokenOutput o;
      o.id = req.id;
      o.finish = FinishReason::kAbort;
      outs.push_back(o);
    }
    inbox_->adds.clear();
    inbox_->n_queued = 0;
  }
  dispatch(outs);
  publish_stats();
}

}  // namespace sluice::api
