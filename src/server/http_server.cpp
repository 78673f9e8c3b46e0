#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/thread_priority.h"
#include "server/drainer.h"
#include "server/metrics.h"
#include "server/openai_service.h"
#include "server/origin_guard.h"
#include "server/props.h"
#include "server/routes.h"
#include "server/ui_assets.h"

namespace sluice::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// ---- routes (the table: routes.h) --------------------------------------------------------

bool method_allowed(const RouteMatch& m, http::verb v) {
  if (std::string_view(m.allow) == "POST") return v == http::verb::post;
  return v == http::verb::get || v == http::verb::head;
}

std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

// X-Session-ID as the reply echoes and the log shows it: up to 128 visible ASCII characters,
// else none (a value that could forge a header or a log line is dropped, not repaired).
std::string session_id(const http::request<http::string_body>& req) {
  const std::string_view v = sv(req["X-Session-ID"]);
  if (v.empty() || v.size() > 128) return {};
  for (char c : v)
    if (c < 0x21 || c > 0x7e) return {};
  return std::string(v);
}

// ---- request framing (RFC 9112): what a proxy in front and this server must read alike -----

// An absolute-form target ("http://host:port/path?q", which servers must accept) as its
// origin form ("/path?q"); any other target as it is.
std::string_view origin_form(std::string_view target) {
  const size_t scheme = target.find("://");
  if (target.empty() || target[0] == '/' || scheme == std::string_view::npos) return target;
  for (char c : target.substr(0, scheme))
    if (!std::isalpha(static_cast<unsigned char>(c))) return target;
  const size_t path = target.find_first_of("/?", scheme + 3);
  return path == std::string_view::npos ? std::string_view("/") : target.substr(path);
}

// The status and message for a request whose framing this server refuses, or 0: HTTP/1.1
// without Host (400), and a transfer coding other than plain "chunked" (501), which a proxy
// that decodes it would frame differently (request smuggling).
std::pair<int, std::string> framing_refusal(const http::request_header<>& req) {
  if (req.version() >= 11 && req.find(http::field::host) == req.end())
    return {400, "an HTTP/1.1 request needs a Host header"};
  const auto te = req.find(http::field::transfer_encoding);
  if (te != req.end() && !boost::beast::iequals(te->value(), "chunked"))
    return {501, "Transfer-Encoding '" + std::string(sv(te->value())) + "' is not supported (only chunked)"};
  return {0, {}};
}

// ---- response bytes -----------------------------------------------------------------------

enum class Framing { kLength, kChunked, kClose };

struct Exchange {
  unsigned version = 11;  // 10 or 11, as the request said
  bool keep_alive = true;
  bool head = false;  // HEAD: headers only
};

// How a request is answered: its HTTP version, keep-alive, HEAD.
Exchange exchange_of(const http::request<http::string_body>& r) {
  return {r.version(), r.keep_alive(), r.method() == http::verb::head};
}

std::string head_bytes(const Reply& r, const Exchange& x, Framing f, size_t body_size) {
  http::response<http::empty_body> res{static_cast<http::status>(r.status), x.version};
  res.set(http::field::server, "sluice");
  res.set(http::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) res.set(k, v);
  if (f == Framing::kLength && r.status != 304) res.content_length(body_size);  // a 304 has no body
  if (f == Framing::kChunked) res.chunked(true);
  if (r.stream) {  // SSE through proxies: nginx passes it unbuffered, nobody caches it
    res.set(http::field::cache_control, "no-cache");
    res.set("X-Accel-Buffering", "no");
  }
  res.keep_alive(x.keep_alive && f != Framing::kClose);
  std::ostringstream o;
  o << res.base();
  return o.str();
}

std::string chunk(std::string_view bytes) {
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  std::string out;
  out.reserve(bytes.size() + static_cast<size_t>(n) + 2);
  out.append(size, static_cast<size_t>(n)).append(bytes).append("\r\n");
  return out;
}

constexpr size_t kTrimAfterBody = 1u << 20;
constexpr const char* kBusy = "the server is busy: no room for this request's work; retry later";

// One of the side_workers places of the side routes (tokenize, detokenize, templates), taken
// when a request's headers are read and held until its reply is made: reading the body and the
// work. So past the cap a request is refused before any of its body is read, however many
// arrive at once (their bodies in flight would otherwise all be read, up to --max-body each,
// and only then refused). Released by its destructor wherever the request ends.
class SideSlot {
 public:
  static std::unique_ptr<SideSlot> take(std::atomic<int>& running, int cap) {
    if (running.fetch_add(1) >= cap) {
      running.fetch_sub(1);
      return nullptr;
    }
    return std::unique_ptr<SideSlot>(new SideSlot(running));
  }
  ~SideSlot() { running_.fetch_sub(1); }
  SideSlot(const SideSlot&) = delete;
  SideSlot& operator=(const SideSlot&) = delete;

 private:
  explicit SideSlot(std::atomic<int>& running) : running_(running) {}
  std::atomic<int>& running_;
};

// ---- the worker pool ----------------------------------------------------------------------

class WorkerPool {
 public:
  enum class Priority { kNormal, kLow };
  // At most `max_waiting` tasks wait for a worker; more are refused (submit returns false).
  // `name` names the threads (top -H, /proc/<pid>/task/<tid>/comm; at most 15 characters); kLow
  // lowers them below the engine's (base/thread_priority.h).
  WorkerPool(int n, size_t max_waiting, const char* name, Priority priority) : max_waiting_(max_waiting) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this, name, priority] {
        pthread_setname_np(pthread_self(), name);
        if (priority == Priority::kLow) lower_this_thread_priority(Below::kIdle);
        loop();
      });
  }
  ~WorkerPool() {
    if (abandoned_) {  // stop() gave up on a busy handler: its thread cannot be joined
      for (auto& t : threads_) t.detach();
      return;
    }
    stop(std::chrono::steady_clock::time_point::max());
  }

  bool submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_ || tasks_.size() >= max_waiting_) return false;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }

  // Tasks not started yet are dropped (their connections are closed by then). Running ones
  // get until `deadline`: true once every worker has returned, false when some handler is
  // still busy then (its thread is left running; the caller ends the process).
  bool stop(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lk(mu_);
    stop_ = true;
    tasks_.clear();
    cv_.notify_all();
    if (!idle_.wait_until(lk, deadline, [&] { return busy_ == 0; })) {
      abandoned_ = true;
      return false;
    }
    lk.unlock();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    return true;
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !tasks_.empty(); });
        if (stop_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        ++busy_;
      }
      task();
      std::lock_guard<std::mutex> lk(mu_);
      --busy_;
      if (busy_ == 0) idle_.notify_all();
    }
  }

  const size_t max_waiting_;
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int busy_ = 0;
  bool stop_ = false, abandoned_ = false;
};

class Conn;

}  // namespace

// ---- the server ---------------------------------------------------------------------------

struct HttpServer::Impl {
  Impl(OpenAiService& s, Metrics& m, const HttpOptions& o)
      : svc(s),
        metrics(m),
        opt(o),
        pool(o.workers, static_cast<size_t>(o.workers), "sluice-http", WorkerPool::Priority::kNormal),
        // A slot is freed just before its worker is: the next holder may wait that long.
        side_pool(o.side_workers, static_cast<size_t>(o.side_workers), "sluice-side", WorkerPool::Priority::kLow) {
    if (o.ui) ui.emplace();
  }

  void accept();
  void on_accept(const error_code& ec, tcp::socket sock);
  void begin_stop();
  void poll_stop(std::chrono::steady_clock::time_point deadline);
  bool add(const std::shared_ptr<Conn>& c, const std::string& client);  // false: over a cap
  void forget(const Conn* c);
  size_t client_share() const;
  template <class Fn>
  void each_conn(Fn&& fn);
  Reply call(const RouteMatch& m, const http::request<http::string_body>& req);  // never throws
  Reply route(const RouteMatch& m, const http::request<http::string_body>& req);

  OpenAiService& svc;
  Metrics& metrics;
  HttpOptions opt;
  net::io_context ioc;  // declared before every object using it: destroyed after them
  tcp::acceptor acceptor{ioc};
  net::steady_timer retry_timer{ioc}, stop_timer{ioc};
  std::atomic<bool> stopping{false};
  std::mutex conns_mu;
  struct Held {
    std::weak_ptr<Conn> conn;
    std::string client;  // the peer's address
    bool counted;        // false: refused (503, closing), not held against the caps
  };
  std::unordered_map<const Conn*, Held> conns;
  size_t n_counted = 0;                                // connections admitted and open
  std::unordered_map<std::string, size_t> per_client;  // the same, by peer address
  std::chrono::steady_clock::time_point stop_deadline = std::chrono::steady_clock::time_point::max();
  WorkerPool pool;
  // The side routes' work (tokenize, detokenize, templates: parsing the body too) on
  // side_workers threads below the engine's priority, so a crowd of them takes the CPU the
  // engine leaves, not the engine's cores. Each request holds a SideSlot, so none waits here.
  WorkerPool side_pool;
  std::optional<UiAssets> ui;  // the chat page's files; empty with --no-ui
  Drainer drainer{1024};       // lingering closes, at SCHED_IDLE (beyond 1024 at once: on the strands)
  int port = -1;
};

namespace {

// One connection. Reading, timers and socket writes run on its strand; a worker running a
// handler hands its bytes over through `pending_` (the only state shared with workers, under
// `mu_`), waiting while more than stream_buffer_bytes are unsent.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(tcp::socket s, HttpServer::Impl& srv)
      : socket_(std::move(s)),
        read_timer_{net::steady_timer(socket_.get_executor())},
        write_timer_{net::steady_timer(socket_.get_executor())},
        srv_(srv) {}

  void start() { next_request(); }
  void refuse();
  void soft_stop();  // on the strand: close unless a handler is at work
  void close();      // on the strand

  template <class Fn>
  void on_strand(Fn&& fn) {
    net::post(socket_.get_executor(), [self = shared_from_this(), fn = std::forward<Fn>(fn)]() mutable { fn(*self); });
  }

 private:
  enum class Phase { kIdle, kReading, kBusy };
  // A timer whose expiry is acted on only if it was not re-armed or cancelled since: an
  // expiry already queued when the timer is cancelled must not fire.
  struct Timer {
    net::steady_timer t;
    uint64_t armed = 0;
    void cancel() {
      ++armed;
      t.cancel();
    }
  };
  using Parser = http::request_parser<http::string_body>;

  void next_request();
  void read_header();
  void on_header();
  void read_body_on_side(const RouteMatch& m);
  error_code read_body_here(int fd);  // on a side thread: blocking reads until the body is whole
  void fail_read(const error_code& ec);
  bool request_line_unfinished() const;
  void reject(int status, const std::string& message, const char* endpoint, bool keep_alive);
  void dispatch(const RouteMatch& m);
  using Request = http::request<http::string_body>;
  std::shared_ptr<Request> take_request();
  void work(const RouteMatch& m, std::shared_ptr<Request> req, const Exchange& x, std::shared_ptr<SideSlot> slot);
  void busy(const RouteMatch& m, const Exchange& x);  // 429: no room for the request's work
  void respond(Reply r, const Exchange& x);           // any thread; may block while a stream runs
  bool push(std::string bytes, bool wait_for_room);
  void write_some();
  void finish(bool keep_alive);
  void after_flush();
  void linger_close();
  void drain(size_t drained);
  size_t max_drain() const;
  void arm(Timer& t, int seconds, void (*fn)(Conn&));

  tcp::socket socket_;
  Timer read_timer_, write_timer_;
  HttpServer::Impl& srv_;
  boost::beast::flat_buffer buf_;
  std::optional<Parser> parser_;
  Phase phase_ = Phase::kIdle;
  bool timed_out_ = false, sock_closed_ = false;
  std::chrono::steady_clock::time_point read_deadline_;  // headers and body, from read_header
  enum class Then { kNothing, kRead, kClose } then_ = Then::kNothing;
  std::string inflight_;
  std::unique_ptr<SideSlot> side_slot_;  // a side route's place, from its headers to its dispatch

  std::mutex mu_;
  std::condition_variable room_;
  std::string pending_;
  bool writing_ = false, closed_ = false;
};

void Conn::arm(Timer& t, int seconds, void (*fn)(Conn&)) {
  const uint64_t id = ++t.armed;
  t.t.expires_after(std::chrono::seconds(seconds));
  t.t.async_wait([self = shared_from_this(), fn, &t, id](const error_code& ec) {
    if (!ec && t.armed == id) fn(*self);
  });
}

void Conn::next_request() {
  phase_ = Phase::kIdle;
  if (srv_.stopping || sock_closed_) return close();
  if (buf_.size() > 0) return read_header();  // pipelined: the next request is here already
  arm(read_timer_, srv_.opt.keep_alive_s, [](Conn& c) { c.close(); });
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
    if (ec || self->sock_closed_) return self->close();
    self->read_header();
  });
}

void Conn::read_header() {
  phase_ = Phase::kReading;
  timed_out_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(srv_.opt.max_header_bytes));
  parser_->body_limit(srv_.opt.max_body_bytes);
  // One deadline for headers and body together: trickling bytes do not extend it.
  read_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(srv_.opt.request_timeout_s);
  arm(read_timer_, srv_.opt.request_timeout_s, [](Conn& c) {
    c.timed_out_ = true;
    error_code ig;
    c.socket_.cancel(ig);
  });
  http::async_read_header(socket_, buf_, *parser_, [self = shared_from_this()](const error_code& ec, size_t) {
    if (ec) return self->fail_read(ec);
    self->on_header();
  });
}

void Conn::fail_read(const error_code& ec) {
  side_slot_.reset();  // the body never came whole: its place is free again
  const bool started = parser_ && parser_->got_some();
  const char* endpoint = "unmatched";
  if (started && !parser_->get().target().empty()) {  // the request line was read
    const std::string_view target = sv(parser_->get().target());
    endpoint = match_route(target.substr(0, target.find('?')), srv_.opt.ui).endpoint;
  }
  if (timed_out_ && !sock_closed_)
    return reject(408, "the request did not arrive within " + std::to_string(srv_.opt.request_timeout_s) + " s",
                  endpoint, false);
  if (sock_closed_ || !started || ec == net::error::operation_aborted || ec == http::error::end_of_stream)
    return close();
  if (ec == http::error::header_limit && request_line_unfinished())
    return reject(414, "the request target exceeds " + std::to_string(srv_.opt.max_header_bytes) + " bytes", endpoint,
                  false);
  if (ec == http::error::header_limit)
    return reject(431, "the request line and headers exceed " + std::to_string(srv_.opt.max_header_bytes) + " bytes",
                  endpoint, false);
  if (ec == http::error::body_limit)
    return reject(413, "the request body is too large (more than " + std::to_string(srv_.opt.max_body_bytes) + " B)",
                  endpoint, false);
  if (ec == http::error::partial_message || ec == net::error::eof || ec == net::error::connection_reset) return close();
  reject(400, "malformed HTTP request: " + ec.message(), endpoint, false);
}

// Whether the header limit was reached inside the request line itself: the target alone is too
// long (414), not the header fields (431).
bool Conn::request_line_unfinished() const {
  const auto d = buf_.data();
  const std::string_view b(static_cast<const char*>(d.data()), d.size());
  const size_t eol = b.find("\r\n");
  return eol == std::string_view::npos || eol >= srv_.opt.max_header_bytes;
}

void Conn::on_header() {
  auto& req = parser_->get();
  if (const std::string_view t = sv(req.target()); origin_form(t).size() != t.size())
    req.target(std::string(origin_form(t)));
  const std::string_view target = sv(req.target());
  const RouteMatch m = match_route(target.substr(0, target.find('?')), srv_.opt.ui);
  // A body not read yet means the connection cannot carry another request after an error.
  const bool clean = parser_->is_done();
  if (std::distance(req.begin(), req.end()) > srv_.opt.max_headers)
    return reject(431, "more than " + std::to_string(srv_.opt.max_headers) + " header fields", m.endpoint, false);
  if (const auto [status, why] = framing_refusal(req); status) return reject(status, why, m.endpoint, false);
  // Before routing and the key: a foreign page learns nothing, not even which paths exist.
  const std::string refused = origin_refusal(sv(req[http::field::origin]), sv(req[http::field::host]), srv_.opt.host);
  if (!refused.empty()) return reject(403, refused, m.endpoint, clean);
  if (m.route == Route::kNone)
    return reject(404, "no route for " + std::string(sv(req.method_string())) + " " + std::string(target), m.endpoint,
                  clean);
  if (!method_allowed(m, req.method())) {
    srv_.metrics.count_request(m.endpoint, 405);
    const std::string method(sv(req.method_string()));
    const std::string on = m.route == Route::kPage ? m.arg : m.endpoint;  // the page's label is not its path
    Reply r = OpenAiService::error_reply(405, method + " is not allowed on " + on + " (allowed: " + m.allow + ")");
    r.headers.emplace_back("Allow", m.allow);
    return respond(std::move(r), Exchange{req.version(), clean && req.keep_alive(), false});
  }
  if (!m.open && !srv_.opt.api_key.empty() && !key_matches(sv(req[http::field::authorization]), srv_.opt.api_key))
    return reject(401, "missing or wrong API key (Authorization: Bearer ...)", m.endpoint, clean);
  if (clean) return dispatch(m);
  // A side route with no room is refused before its body is read (up to --max-body each).
  if (m.side && !(side_slot_ = SideSlot::take(srv_.metrics.side_running(), srv_.opt.side_workers)))
    return reject(429, kBusy, m.endpoint, false);
  if (boost::beast::iequals(req[http::field::expect], "100-continue")) push("HTTP/1.1 100 Continue\r\n\r\n", false);
  if (m.side) return read_body_on_side(m);
  http::async_read(socket_, buf_, *parser_, [self = shared_from_this(), m](const error_code& ec, size_t) {
    if (ec) return self->fail_read(ec);
    self->dispatch(m);
  });
}

void Conn::reject(int status, const std::string& message, const char* endpoint, bool keep_alive) {
  srv_.metrics.count_request(endpoint, status);
  std::string type = status >= 500 ? "server_error" : "invalid_request_error";
  if (status == 429) type = "rate_limit_error";
  if (status == 401) type = "authentication_error";
  if (status == 403) type = "permission_error";
  Exchange x;
  if (parser_ && parser_->is_header_done()) x.version = parser_->get().version();
  x.keep_alive = keep_alive && parser_ && parser_->get().keep_alive();
  Reply r = OpenAiService::error_reply(status, message, type);
  if (status == 429) r.headers.emplace_back("Retry-After", "1");
  respond(std::move(r), x);
}

// The parsed request out of the parser (the parser is gone after).
std::shared_ptr<Conn::Request> Conn::take_request() {
  auto req = std::make_shared<Request>(parser_->release());
  parser_.reset();
  return req;
}

void Conn::dispatch(const RouteMatch& m) {
  phase_ = Phase::kBusy;
  read_timer_.cancel();
  auto req = take_request();
  const Exchange x = exchange_of(*req);
  if (!m.blocking) return respond(srv_.call(m, *req), x);
  // Work outside the engine (tokenize, templates) runs on the side threads, side_workers at
  // once, so it never holds the workers the engine's requests need; past that, and past a
  // full pool queue, the answer is 429 at once instead of a wait with the body held. A request
  // with a body took its place at the headers (on_header); one without takes it here.
  std::shared_ptr<SideSlot> slot = std::move(side_slot_);
  if (m.side && !slot && !(slot = SideSlot::take(srv_.metrics.side_running(), srv_.opt.side_workers)))
    return busy(m, x);
  WorkerPool& workers = m.side ? srv_.side_pool : srv_.pool;
  const bool queued = workers.submit(
      [self = shared_from_this(), req, m, x, slot]() mutable { self->work(m, std::move(req), x, std::move(slot)); });
  if (!queued) busy(m, x);  // the task (and its slot) is gone with the refusal
}

// On a worker: the handler, then the answer.
void Conn::work(const RouteMatch& m, std::shared_ptr<Request> req, const Exchange& x, std::shared_ptr<SideSlot> slot) {
  Reply r = srv_.call(m, *req);
  // Everything the request held is freed before its answer goes out: a client that sees the
  // answer may send the next request, or read the process's memory, at once (a side thread at
  // SCHED_IDLE may not run again for a while on a busy host).
  slot.reset();
  const bool large = req->body().size() >= kTrimAfterBody;
  req.reset();
  // A large body's values were many small blocks on this worker's malloc arena: give the
  // freed pages back, or the process keeps its peak size after the request.
  if (large) malloc_trim(0);
  respond(std::move(r), x);
}

// A side route's body is read on its side thread, not on the I/O threads. Reading an upload
// costs CPU in proportion to its bytes (the copies and the kernel's TCP work, charged to the
// reading thread), and the I/O threads run at the engine's priority: four admitted 8 MiB
// /tokenize bodies read there ran both I/O threads 20 ms at a time beside a chat's prefill
// step, which took 12-64 ms instead of 8 (the engine's and the pool's run-queue waits in
// /proc/<tid>/schedstat grew by what the I/O threads ran). At SCHED_IDLE the reading takes
// the CPU the engine leaves, and the reply waits for nobody but its own client.
// The strand hands over the buffer and parser, and a duplicate of the socket's descriptor (a
// close here during shutdown shuts the socket down under it, and its number cannot be reused
// while the worker reads): nothing of the strand's is pending on them (the deadline timer is
// cancelled; the worker keeps the deadline) until the worker is done.
void Conn::read_body_on_side(const RouteMatch& m) {
  phase_ = Phase::kBusy;
  read_timer_.cancel();
  std::shared_ptr<SideSlot> slot = std::move(side_slot_);
  const int fd = ::dup(socket_.native_handle());
  if (fd < 0) return reject(503, "out of descriptors", m.endpoint, false);
  const bool queued = srv_.side_pool.submit([self = shared_from_this(), m, slot, fd]() mutable {
    const error_code ec = self->read_body_here(fd);
    ::close(fd);
    if (ec) {
      slot.reset();
      const bool late = ec == net::error::timed_out;
      return self->on_strand([ec, late](Conn& c) {
        c.timed_out_ = late;
        c.fail_read(ec);
      });
    }
    auto req = self->take_request();
    const Exchange x = exchange_of(*req);
    self->work(m, std::move(req), x, std::move(slot));
  });
  if (!queued) {
    ::close(fd);
    reject(429, kBusy, m.endpoint, false);
  }
}

error_code Conn::read_body_here(int fd) {
  for (;;) {
    error_code ec;
    while (buf_.size() > 0 && !parser_->is_done()) {
      const size_t n = parser_->put(buf_.data(), ec);
      buf_.consume(n);
      if (ec == http::error::need_more) ec = {};
      if (ec) return ec;
      if (n == 0) break;  // the parser needs more than the buffer holds
    }
    if (parser_->is_done()) return {};
    const auto space = buf_.prepare(64u << 10);
    const ssize_t got = ::recv(fd, space.data(), space.size(), MSG_DONTWAIT);
    if (got > 0) {
      buf_.commit(static_cast<size_t>(got));
      continue;
    }
    if (got == 0) return http::error::partial_message;  // the client left mid-body
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return error_code(errno, boost::system::system_category());
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(read_deadline_ -
                                                                            std::chrono::steady_clock::now());
    if (left.count() <= 0) return net::error::timed_out;
    if (srv_.stopping) return net::error::operation_aborted;
    pollfd pfd{fd, POLLIN, 0};
    ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));  // wakes to see a stop
  }
}

void Conn::busy(const RouteMatch& m, const Exchange& x) {
  srv_.metrics.count_request(m.endpoint, 429);
  Reply r = OpenAiService::error_reply(429, kBusy, "rate_limit_error");
  r.headers.emplace_back("Retry-After", "1");
  respond(std::move(r), x);
}

void Conn::respond(Reply r, const Exchange& x) {
  if (!r.stream) {
    std::string bytes = head_bytes(r, x, Framing::kLength, r.body.size());
    if (!x.head) bytes += r.body;
    std::string().swap(r.body);  // freed before the client can see the answer (above)
    push(std::move(bytes), false);
    on_strand([keep = x.keep_alive](Conn& c) { c.finish(keep); });
    return;
  }
  // HTTP/1.0 clients and `Connection: close` get a stream delimited by the close itself.
  const bool chunked = x.version >= 11 && x.keep_alive;
  push(head_bytes(r, x, chunked ? Framing::kChunked : Framing::kClose, 0), false);
  if (!x.head) {
    bool ok = true;
    try {
      r.stream([&](std::string_view b) {
        if (b.empty()) return push({}, false);  // an empty chunk would end a chunked body
        return push(chunked ? chunk(b) : std::string(b), true);
      });
    } catch (const std::exception&) {
      ok = false;  // the status line is out: the only way left to say so is an unfinished body
    }
    if (!ok) return on_strand([](Conn& c) { c.close(); });
    if (chunked) push("0\r\n\r\n", false);
  }
  on_strand([chunked](Conn& c) { c.finish(chunked); });
}

bool Conn::push(std::string bytes, bool wait_for_room) {
  std::unique_lock<std::mutex> lk(mu_);
  if (wait_for_room) room_.wait(lk, [&] { return closed_ || pending_.size() < srv_.opt.stream_buffer_bytes; });
  if (closed_) return false;
  if (bytes.empty()) return true;
  if (pending_.empty()) pending_.swap(bytes);  // no copy of a large answer
  else pending_ += bytes;
  if (!writing_) {
    writing_ = true;
    lk.unlock();
    on_strand([](Conn& c) { c.write_some(); });
  }
  return true;
}

void Conn::write_some() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    inflight_.clear();
    inflight_.swap(pending_);
    if (inflight_.empty()) writing_ = false;
  }
  room_.notify_all();
  if (inflight_.empty()) return after_flush();
  arm(write_timer_, srv_.opt.write_timeout_s, [](Conn& c) { c.close(); });
  net::async_write(socket_, net::buffer(inflight_), [self = shared_from_this()](const error_code& ec, size_t) {
    self->write_timer_.cancel();
    if (ec) return self->close();
    self->write_some();
  });
}

// The response's last bytes are queued: once they are written, read the next request or close.
void Conn::finish(bool keep_alive) {
  then_ = keep_alive ? Then::kRead : Then::kClose;
  bool idle = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    idle = !writing_;
  }
  if (idle) after_flush();
}

void Conn::after_flush() {
  const Then t = then_;
  then_ = Then::kNothing;
  if (t == Then::kRead) next_request();
  if (t == Then::kClose) linger_close();
}

// Closing with unread request bytes would make the kernel send a reset, which can destroy the
// answer before the client reads it: send FIN first and discard what still comes, briefly.
// The discarding runs on the drainer's SCHED_IDLE thread when it has room (server/drainer.h): a crowd
// of refused uploads then takes the CPU the engine leaves, not the I/O threads' share of its cores.
void Conn::linger_close() {
  if (sock_closed_) return;
  error_code ig;
  socket_.shutdown(tcp::socket::shutdown_send, ig);
  if (srv_.drainer.reserve()) {
    error_code ec;
    const int fd = socket_.release(ec);
    if (!ec && fd >= 0) {
      srv_.drainer.take(fd, max_drain(), std::chrono::seconds(1));
      return close();
    }
    srv_.drainer.unreserve();
  }
  arm(read_timer_, 1, [](Conn& c) { c.close(); });
  drain(0);
}

// Up to a whole body: a request refused before its body was read (429) still gets its answer read.
size_t Conn::max_drain() const { return std::max<size_t>(4u << 20, srv_.opt.max_body_bytes); }

void Conn::drain(size_t drained) {
  socket_.async_read_some(
      net::buffer(g_discard, kDiscardBytes),
      [self = shared_from_this(), drained, max_drain = max_drain()](const error_code& ec, size_t n) {
        if (ec || drained + n > max_drain) return self->close();
        self->drain(drained + n);
      });
}

void Conn::refuse() {
  phase_ = Phase::kBusy;
  srv_.metrics.count_request("unmatched", 503);  // refused before a request line was read
  respond(OpenAiService::error_reply(503, "too many connections; try again later", "server_error"),
          Exchange{11, false, false});
}

void Conn::soft_stop() {
  if (phase_ != Phase::kBusy) close();
}

void Conn::close() {
  if (sock_closed_) return;
  sock_closed_ = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
  }
  room_.notify_all();
  read_timer_.cancel();
  write_timer_.cancel();
  error_code ig;
  socket_.shutdown(tcp::socket::shutdown_both, ig);
  socket_.close(ig);
  srv_.forget(this);
}

}  // namespace

// ---- the server (methods) -----------------------------------------------------------------

Reply HttpServer::Impl::call(const RouteMatch& m, const http::request<http::string_body>& req) {
  try {
    Reply r = route(m, req);
    if (std::string sid = session_id(req); !sid.empty()) r.headers.emplace_back("X-Session-ID", std::move(sid));
    return r;
  } catch (const std::exception& e) {
    metrics.count_request(m.endpoint, 500);
    return OpenAiService::error_reply(500, std::string("internal error: ") + e.what(), "server_error");
  }
}

Reply HttpServer::Impl::route(const RouteMatch& m, const http::request<http::string_body>& req) {
  const std::string& body = req.body();
  Reply r;
  switch (m.route) {
    case Route::kCompletions: return svc.completions(body, {session_id(req)});  // the service counts these two
    case Route::kChat: return svc.chat_completions(body, {session_id(req)});
    case Route::kTranscriptions:
      return svc.transcriptions(body, {session_id(req), std::string(sv(req[http::field::content_type]))});
    case Route::kRenderCompletions: return svc.render_completions(body);
    case Route::kRenderChat: return svc.render_chat(body);
    case Route::kApplyTemplate: return svc.apply_template(body);
    case Route::kHealth: return svc.health();
    case Route::kReady: r = svc.ready(); break;
    case Route::kMetrics: return svc.metrics();
    case Route::kModels: r = svc.models(); break;
    case Route::kModel: r = svc.model(m.arg); break;
    case Route::kTokenize: r = svc.tokenize(body); break;
    case Route::kDetokenize: r = svc.detokenize(body); break;
    case Route::kProps: r = props_reply(svc.model_context()); break;
    // The files' own gzip (ui_assets) is the only compression: this layer adds none.
    case Route::kPage:
      r = ui->serve(m.arg, sv(req[http::field::accept_encoding]), sv(req[http::field::if_none_match]));
      break;
    case Route::kNone: r = OpenAiService::error_reply(404, "no route"); break;
  }
  metrics.count_request(m.endpoint, r.status);
  return r;
}

size_t HttpServer::Impl::client_share() const {
  if (opt.max_connections_per_client > 0) return static_cast<size_t>(opt.max_connections_per_client);
  return std::max<size_t>(1, static_cast<size_t>(opt.max_connections) * 3 / 4);
}

bool HttpServer::Impl::add(const std::shared_ptr<Conn>& c, const std::string& client) {
  std::lock_guard<std::mutex> lk(conns_mu);
  auto pc = per_client.try_emplace(client, 0).first;
  const bool admit = n_counted < static_cast<size_t>(opt.max_connections) && pc->second < client_share();
  conns.emplace(c.get(), Held{c, client, admit});
  if (admit) {
    ++n_counted;
    ++pc->second;
  } else if (pc->second == 0) {
    per_client.erase(pc);
  }
  return admit;
}

void HttpServer::Impl::forget(const Conn* c) {
  std::lock_guard<std::mutex> lk(conns_mu);
  auto it = conns.find(c);
  if (it == conns.end()) return;
  if (it->second.counted) {
    --n_counted;
    auto pc = per_client.find(it->second.client);
    if (pc != per_client.end() && --pc->second == 0) per_client.erase(pc);
  }
  conns.erase(it);
}

template <class Fn>
void HttpServer::Impl::each_conn(Fn&& fn) {
  std::vector<std::shared_ptr<Conn>> live;
  {
    std::lock_guard<std::mutex> lk(conns_mu);
    for (auto& [p, h] : conns)
      if (auto c = h.conn.lock()) live.push_back(std::move(c));
  }
  for (auto& c : live) c->on_strand(fn);
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc),
                        [this](const error_code& ec, tcp::socket sock) { on_accept(ec, std::move(sock)); });
}

void HttpServer::Impl::on_accept(const error_code& ec, tcp::socket sock) {
  if (stopping || !acceptor.is_open()) return;
  if (ec) {
    // Out of descriptors or memory for a moment: try again shortly instead of spinning.
    retry_timer.expires_after(std::chrono::milliseconds(50));
    retry_timer.async_wait([this](const error_code& e) {
      if (!e) accept();
    });
    return;
  }
  error_code ig;
  sock.set_option(tcp::no_delay(true), ig);
  const auto peer = sock.remote_endpoint(ig);
  const std::string client = ig ? std::string() : peer.address().to_string();
  auto c = std::make_shared<Conn>(std::move(sock), *this);
  // One client (address) holds at most its share of the cap: the rest stays open to others.
  if (add(c, client)) c->on_strand([](Conn& x) { x.start(); });
  else c->on_strand([](Conn& x) { x.refuse(); });
  accept();
}

// Stop accepting, close every connection that is not answering a request, and give the rest
// shutdown_timeout_s (or _ms) to finish (streams end with the engine's error event) before closing them.
void HttpServer::Impl::begin_stop() {
  if (stopping.exchange(true)) return;
  error_code ig;
  acceptor.close(ig);
  retry_timer.cancel();
  each_conn([](Conn& c) { c.soft_stop(); });
  const auto window = opt.shutdown_timeout_ms >= 0 ? std::chrono::milliseconds(opt.shutdown_timeout_ms)
                                                   : std::chrono::milliseconds(opt.shutdown_timeout_s * 1000);
  const auto deadline = std::chrono::steady_clock::now() + window;
  {
    std::lock_guard<std::mutex> lk(conns_mu);
    stop_deadline = deadline;
  }
  poll_stop(deadline);
}

void HttpServer::Impl::poll_stop(std::chrono::steady_clock::time_point deadline) {
  bool empty = false;
  {
    std::lock_guard<std::mutex> lk(conns_mu);
    empty = conns.empty();
  }
  if (empty) return;
  if (std::chrono::steady_clock::now() >= deadline) return each_conn([](Conn& c) { c.close(); });
  stop_timer.expires_after(std::chrono::milliseconds(20));
  stop_timer.async_wait([this, deadline](const error_code& ec) {
    if (!ec) poll_stop(deadline);
  });
}

HttpServer::HttpServer(OpenAiService& service, Metrics& metrics, const HttpOptions& opt)
    : impl_(std::make_unique<Impl>(service, metrics, opt)) {}

HttpServer::~HttpServer() = default;

int HttpServer::bound_port() const { return impl_->port; }

bool HttpServer::bind() {
  Impl& s = *impl_;
  error_code ec;
  const auto addr = net::ip::make_address(s.opt.host, ec);
  if (ec) return false;
  const tcp::endpoint ep(addr, static_cast<unsigned short>(s.opt.port));
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return false;
  s.port = s.acceptor.local_endpoint().port();
  return true;
}

bool HttpServer::serve() {
  Impl& s = *impl_;
  if (s.stopping) return true;
  s.accept();
  std::vector<std::thread> io;
  for (int i = 1; i < s.opt.io_threads; ++i)
    io.emplace_back([&s] {
      pthread_setname_np(pthread_self(), "sluice-io");  // the caller's thread runs the loop too
      s.ioc.run();
    });
  s.ioc.run();
  for (auto& t : io) t.join();
  // Handlers still running see closed connections and return; one busy past the deadline
  // (a long tokenize, a template) is not waited for.
  std::chrono::steady_clock::time_point deadline;
  {
    std::lock_guard<std::mutex> lk(s.conns_mu);
    deadline = s.stop_deadline;
  }
  if (deadline != std::chrono::steady_clock::time_point::max()) deadline += std::chrono::milliseconds(100);
  const bool side_done = s.side_pool.stop(deadline);
  return s.pool.stop(deadline) && side_done;
}

void HttpServer::stop() {
  Impl& s = *impl_;
  net::post(s.ioc, [&s] { s.begin_stop(); });
}

}  // namespace sluice::server
