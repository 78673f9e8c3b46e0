#include "server/kv_events_zmq.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <deque>
#include <utility>

#include "base/error.h"

#ifdef SLUICE_HAVE_ZMQ
#define MSGPACK_NO_BOOST
#include <msgpack.hpp>
#include <zmq.hpp>
#endif

namespace sluice::server {

namespace {

constexpr size_t kMaxBatch = 512;  // events per message: a burst becomes several small messages
constexpr auto kFlushEvery = std::chrono::milliseconds(5);

}  // namespace

#ifdef SLUICE_HAVE_ZMQ

namespace {

constexpr int kMaxReplayRequestsPerTurn = 16;  // then the live stream gets its turn again
constexpr int kMaxLoggedBadRequests = 10;      // a client that floods junk does not flood stderr

// A sequence number as its wire frame: 8 bytes, big-endian.
std::array<unsigned char, 8> be64(uint64_t v) {
  std::array<unsigned char, 8> b{};
  for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<unsigned char>(v >> (56 - 8 * i));
  return b;
}

uint64_t from_be64(const unsigned char* b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | b[i];
  return v;
}

}  // namespace

bool KvEventPublisher::available() { return true; }

std::string encode_kv_batch(const std::vector<KvEvent>& events, int32_t block_size, double ts) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(&buf);
  auto tag = [&](const char* s, size_t n) {
    pk.pack_str(static_cast<uint32_t>(n));
    pk.pack_str_body(s, static_cast<uint32_t>(n));
  };
  pk.pack_array(3);
  pk.pack_double(ts);
  pk.pack_array(static_cast<uint32_t>(events.size()));
  for (const KvEvent& e : events) {
    switch (e.kind) {
      case KvEvent::Kind::kStored:
        pk.pack_array(8);
        tag("BlockStored", 11);
        pk.pack_array(1);
        pk.pack_uint64(e.hash);
        if (e.has_parent) pk.pack_uint64(e.parent);
        else pk.pack_nil();
        pk.pack_array(static_cast<uint32_t>(e.tokens.size()));
        for (int32_t t : e.tokens) pk.pack_uint32(static_cast<uint32_t>(t));
        pk.pack_int32(block_size);
        pk.pack_nil();  // lora_id
        pk.pack_nil();  // medium: unset, the consumer's default tier
        pk.pack_nil();  // lora_name
        break;
      case KvEvent::Kind::kRemoved:
        pk.pack_array(3);
        tag("BlockRemoved", 12);
        pk.pack_array(1);
        pk.pack_uint64(e.hash);
        pk.pack_nil();  // medium
        break;
      case KvEvent::Kind::kCleared:
        pk.pack_array(1);
        tag("AllBlocksCleared", 16);
        break;
    }
  }
  pk.pack_int32(0);  // data_parallel_rank
  return std::string(buf.data(), buf.size());
}

struct KvEventPublisher::Socket {
  zmq::context_t ctx{1};
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  zmq::socket_t replay;                               // ROUTER, or unset without replay
  std::deque<std::pair<uint64_t, std::string>> kept;  // the last replay_batches_ (seq, payload)
  int bad_requests = 0;
};

void KvEventPublisher::start() {
  sock_ = std::make_unique<Socket>();
  sock_->pub.set(zmq::sockopt::sndhwm, 100000);
  sock_->pub.set(zmq::sockopt::linger, 1000);
  const bool bind = endpoint_.find('*') != std::string::npos || endpoint_.find("::") != std::string::npos ||
                    endpoint_.rfind("ipc://", 0) == 0 || endpoint_.rfind("inproc://", 0) == 0;
  try {
    if (bind) sock_->pub.bind(endpoint_);
    else sock_->pub.connect(endpoint_);
  } catch (const zmq::error_t& e) {
    fail("--kv-events %s: %s", endpoint_.c_str(), e.what());
  }
  if (!replay_endpoint_.empty()) {
    sock_->replay = zmq::socket_t(sock_->ctx, zmq::socket_type::router);
    // One whole replay fits a client's queue; a request is a few bytes, so a peer that sends a
    // large frame is disconnected by ZeroMQ before it is buffered.
    sock_->replay.set(zmq::sockopt::sndhwm, static_cast<int>(replay_batches_ + 2));
    sock_->replay.set(zmq::sockopt::maxmsgsize, int64_t{256});
    sock_->replay.set(zmq::sockopt::linger, 0);
    try {
      sock_->replay.bind(replay_endpoint_);
    } catch (const zmq::error_t& e) {
      fail("--kv-events-replay %s: %s", replay_endpoint_.c_str(), e.what());
    }
  }
  thread_ = std::thread([this] { loop(); });
}

void KvEventPublisher::send_batch(uint64_t seq, std::string payload) {
  const auto be = be64(seq);
  sock_->pub.send(zmq::buffer(topic_), zmq::send_flags::sndmore);
  sock_->pub.send(zmq::buffer(be), zmq::send_flags::sndmore);
  sock_->pub.send(zmq::buffer(payload), zmq::send_flags::none);
  if (!sock_->replay) return;
  sock_->kept.emplace_back(seq, std::move(payload));
  if (sock_->kept.size() > replay_batches_) sock_->kept.pop_front();
}

// One request: [id, "", start seq] at the ROUTER. Anything else is read whole and ignored.
void KvEventPublisher::serve_replay() {
  zmq::socket_t& r = sock_->replay;
  for (int n = 0; n < kMaxReplayRequestsPerTurn; ++n) {
    std::vector<zmq::message_t> frames;
    for (bool more = true; more;) {
      zmq::message_t m;
      if (!r.recv(m, zmq::recv_flags::dontwait)) return;  // nothing waiting
      more = m.more();
      if (frames.size() < 4) frames.push_back(std::move(m));  // 4 is enough to say "not 3"
    }
    if (frames.size() != 3 || frames[2].size() != 8) {
      if (sock_->bad_requests++ < kMaxLoggedBadRequests)
        std::fprintf(stderr, "sluice serve: --kv-events-replay: ignored a malformed request (%zu frames%s)\n",
                     frames.size(), frames.size() == 3 ? ", the sequence number is not 8 bytes" : "");
      continue;
    }
    const uint64_t start = from_be64(frames[2].data<unsigned char>());
    const zmq::message_t& id = frames[0];
    for (const auto& [seq, payload] : sock_->kept) {
      if (seq < start) continue;
      const auto be = be64(seq);
      r.send(zmq::buffer(id.data(), id.size()), zmq::send_flags::sndmore);
      r.send(zmq::message_t(), zmq::send_flags::sndmore);
      r.send(zmq::buffer(be), zmq::send_flags::sndmore);
      r.send(zmq::buffer(payload), zmq::send_flags::none);
    }
    const auto end = be64(~uint64_t{0});  // -1 as a signed 64-bit number
    r.send(zmq::buffer(id.data(), id.size()), zmq::send_flags::sndmore);
    r.send(zmq::message_t(), zmq::send_flags::sndmore);
    r.send(zmq::buffer(end), zmq::send_flags::sndmore);
    r.send(zmq::message_t(), zmq::send_flags::none);
  }
}

void KvEventPublisher::loop() {
  uint64_t seq = 0;
  const int32_t bt = log_.block_tokens();
  for (;;) {
    const bool last = stop_.load();
    std::vector<KvEvent> evs = log_.take(last ? std::chrono::milliseconds(0) : kFlushEvery);
    const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    for (size_t i = 0; i < evs.size(); i += kMaxBatch) {
      const std::vector<KvEvent> part(evs.begin() + static_cast<std::ptrdiff_t>(i),
                                      evs.begin() + static_cast<std::ptrdiff_t>(std::min(evs.size(), i + kMaxBatch)));
      send_batch(seq++, encode_kv_batch(part, bt, ts));
    }
    if (last) return;
    if (sock_->replay) serve_replay();
  }
}

#else  // built without ZeroMQ

bool KvEventPublisher::available() { return false; }

std::string encode_kv_batch(const std::vector<KvEvent>&, int32_t, double) { return {}; }

struct KvEventPublisher::Socket {};

void KvEventPublisher::start() { fail("--kv-events: this sluice was built without ZeroMQ (libzmq3-dev, cppzmq-dev)"); }

void KvEventPublisher::loop() {}

void KvEventPublisher::send_batch(uint64_t, std::string) {}

void KvEventPublisher::serve_replay() {}

#endif

KvEventPublisher::KvEventPublisher(KvEventLog& log, std::string endpoint, std::string topic,
                                   std::string replay_endpoint, size_t replay_batches)
    : log_(log),
      endpoint_(std::move(endpoint)),
      topic_(std::move(topic)),
      replay_endpoint_(std::move(replay_endpoint)),
      replay_batches_(replay_batches) {}

KvEventPublisher::~KvEventPublisher() { stop(); }

void KvEventPublisher::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  log_.close();
  thread_.join();
}

}  // namespace sluice::server
