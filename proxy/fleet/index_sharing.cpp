#include "fleet/index_sharing.hpp"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <random>

#include "fleet/board.hpp"
#include "metrics/prometheus_text.hpp"
#include "redis/resp.hpp"

namespace tokengate::fleet {

namespace {

// A message: the instance (8 bytes), the upstream's name (its length in
// one byte, then the name), then each block's name (8 bytes), all in the
// sender's byte order (instances of one fleet run one build).
template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
T get(std::string_view bytes, std::size_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  return value;
}

std::uint64_t random_instance() {
  std::random_device entropy;
  return (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
}

}  // namespace

std::string index_sharing::encode(std::uint64_t instance, const std::string& upstream,
                                  std::span<const std::uint64_t> blocks) {
  std::string out;
  const auto name = upstream.substr(0, 255);
  blocks = blocks.first(std::min(blocks.size(), max_blocks));
  out.reserve(9 + name.size() + 8 * blocks.size());
  put(out, instance);
  put(out, static_cast<std::uint8_t>(name.size()));
  out += name;
  for (auto b : blocks) put(out, b);
  return out;
}

std::optional<index_sharing::message> index_sharing::decode(std::string_view bytes) {
  if (bytes.size() < 9) return std::nullopt;
  message m;
  m.instance = get<std::uint64_t>(bytes, 0);
  const auto name_size = get<std::uint8_t>(bytes, 8);
  const auto rest = bytes.size() - 9;
  if (rest < name_size || (rest - name_size) % 8 != 0) return std::nullopt;
  m.upstream.assign(bytes.substr(9, name_size));
  const auto count = (rest - name_size) / 8;
  if (count > max_blocks) return std::nullopt;
  m.blocks.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    m.blocks.push_back(get<std::uint64_t>(bytes, 9 + name_size + 8 * i));
  return m;
}

index_sharing::index_sharing(net::any_io_executor executor, const config::redis_settings& redis,
                             board& fleet, std::vector<shared_upstream> upstreams)
    : executor_(std::move(executor)),
      redis_(redis),
      fleet_(fleet),
      upstreams_(std::move(upstreams)),
      channel_(redis.key_prefix + ":fleet:blocks"),
      instance_(random_instance()),
      health_("redis at " + redis.host + ":" + std::to_string(redis.port) + " (fleet sharing)") {}

index_sharing::~index_sharing() = default;

void index_sharing::start() {
  for (const auto& u : upstreams_) fleet_.load_of(u.name).size_index(u.kv_tokens);
  publisher_ =
      std::make_unique<redis::client>(executor_, redis_, std::vector<std::string>{}, health_);
  net::co_spawn(executor_, listen(), net::detached);
}

void index_sharing::stop() {
  stopped_ = true;
  net::post(executor_, [this] {
    if (publisher_) publisher_->stop();
    if (listener_) {
      error_code ignored;
      listener_->close(ignored);
    }
  });
}

void index_sharing::publish(const std::string& upstream, std::span<const std::uint64_t> blocks) {
  if (blocks.empty() || stopped_) return;
  auto message = encode(instance_, upstream, blocks);
  std::lock_guard guard(lock_);
  if (queued_.size() >= max_queued) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  queued_.push_back(std::move(message));
  if (std::exchange(drain_posted_, true)) return;
  net::post(executor_, [this] { drain(); });
}

// (On the executor's thread.)
void index_sharing::drain() {
  std::deque<std::string> batch;
  {
    std::lock_guard guard(lock_);
    batch.swap(queued_);
    drain_posted_ = false;
  }
  for (auto& message : batch)
    publisher_->send({"PUBLISH", channel_, std::move(message)}, [this](
                                                                    std::optional<redis::reply> r) {
      (r && !r->is_error() ? published_ : publish_failed_).fetch_add(1, std::memory_order_relaxed);
    });
}

net::awaitable<void> index_sharing::listen() {
  net::steady_timer pause(executor_);
  while (!stopped_) {
    auto why = co_await listen_once();
    if (stopped_) break;
    health_.failed(why);
    pause.expires_after(std::chrono::seconds(1));
    co_await pause.async_wait(use_tuple);
  }
}

// One subscription, until the connection ends (why, when it does).
net::awaitable<std::string> index_sharing::listen_once() {
  tcp::resolver resolver(executor_);
  auto [rec, endpoints] =
      co_await resolver.async_resolve(redis_.host, std::to_string(redis_.port), use_tuple);
  if (rec) co_return "cannot resolve " + redis_.host + ": " + rec.message();
  listener_ = std::make_shared<tcp::socket>(executor_);
  auto socket = listener_;
  net::steady_timer deadline(executor_, std::chrono::seconds(1));  // (a dropped SYN)
  deadline.async_wait([socket](const error_code& ec) {
    error_code ignored;
    if (!ec) socket->close(ignored);
  });
  auto [cec, endpoint] = co_await net::async_connect(*socket, endpoints, use_tuple);
  deadline.cancel();
  if (cec) co_return "connect: " + cec.message();
  std::string out;
  if (!redis_.password.empty()) redis::append_command(out, {"AUTH", redis_.password});
  redis::append_command(out, {"SUBSCRIBE", channel_});
  auto [wec, written] = co_await net::async_write(*socket, net::buffer(out), use_tuple);
  if (wec) co_return "write: " + wec.message();
  std::string in;
  std::array<char, 16384> chunk;
  for (;;) {
    auto [ec, n] = co_await socket->async_read_some(net::buffer(chunk), use_tuple);
    if (ec) co_return "read: " + ec.message();
    in.append(chunk.data(), n);
    std::size_t consumed = 0;
    for (;;) {
      std::optional<redis::reply> r;
      try {
        r = redis::parse_reply(in, consumed);
      } catch (const redis::protocol_error& e) {
        co_return std::string("protocol: ") + e.what();
      }
      if (!r) break;
      in.erase(0, consumed);
      if (r->is_error()) co_return "refused: " + r->text;
      if (r->kind == redis::reply::type::array && r->elements.size() == 3 &&
          r->elements[0].text == "message")
        received(r->elements[2].text);
      else
        health_.answered();  // (the subscription's confirmation, AUTH's OK)
    }
  }
}

void index_sharing::received(std::string_view payload) {
  auto m = decode(payload);
  if (!m || m->instance == instance_) return;
  if (std::none_of(upstreams_.begin(), upstreams_.end(),
                   [&](const shared_upstream& u) { return u.name == m->upstream; }))
    return;
  fleet_.load_of(m->upstream).index.insert(m->blocks);
  received_.fetch_add(1, std::memory_order_relaxed);
}

std::string index_sharing::prometheus() const {
  metrics::prometheus_text out;
  out.family("tokengate_fleet_shared_prompts_total", metrics::metric_type::counter,
             "Prompts' blocks shared with the other instances through Redis: published, not "
             "published (Redis failed, or the queue was full), and received from the others.");
  for (auto [direction, n] :
       {std::pair("published", published_.load()), std::pair("failed", publish_failed_.load()),
        std::pair("dropped", dropped_.load()), std::pair("received", received_.load())})
    out.sample({{"direction", direction}}, n);
  return out.take();
}

}  // namespace tokengate::fleet
