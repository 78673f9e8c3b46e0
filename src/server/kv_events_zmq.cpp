#include "server/kv_events_zmq.h"

#include <chrono>
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
  thread_ = std::thread([this] { loop(); });
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
      const std::string payload = encode_kv_batch(part, bt, ts);
      unsigned char be[8];
      for (int b = 0; b < 8; ++b) be[b] = static_cast<unsigned char>(seq >> (56 - 8 * b));
      sock_->pub.send(zmq::buffer(topic_), zmq::send_flags::sndmore);
      sock_->pub.send(zmq::buffer(be, 8), zmq::send_flags::sndmore);
      sock_->pub.send(zmq::buffer(payload), zmq::send_flags::none);
      ++seq;
    }
    if (last) return;
  }
}

#else  // built without ZeroMQ

bool KvEventPublisher::available() { return false; }

std::string encode_kv_batch(const std::vector<KvEvent>&, int32_t, double) { return {}; }

struct KvEventPublisher::Socket {};

void KvEventPublisher::start() { fail("--kv-events: this sluice was built without ZeroMQ (libzmq3-dev, cppzmq-dev)"); }

void KvEventPublisher::loop() {}

#endif

KvEventPublisher::KvEventPublisher(KvEventLog& log, std::string endpoint, std::string topic)
    : log_(log), endpoint_(std::move(endpoint)), topic_(std::move(topic)) {}

KvEventPublisher::~KvEventPublisher() { stop(); }

void KvEventPublisher::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  log_.close();
  thread_.join();
}

}  // namespace sluice::server
