// EMULATION, NOT REDISSON: see redisson_emulator.hpp. The scripts below are written from the
// documented RLock protocol; they are not copied from Redisson.
#include "support/redisson_emulator.hpp"

#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "support/redis_server.hpp"

namespace dlock::test {

namespace {

// KEYS[1] lock name; ARGV[1] lease ms; ARGV[2] field. Reply nil: acquired; else the PTTL.
constexpr const char* acquire_script = R"lua(
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
)lua";

// KEYS[1] lock name; KEYS[2] channel; ARGV[1] unlock message "0"; ARGV[2] lease ms; ARGV[3] field.
// Reply nil: not held by this thread; 0: still held; 1: released.
constexpr const char* release_script = R"lua(
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
)lua";

// KEYS[1] lock name; ARGV[1] lease ms; ARGV[2] field. Reply 1 renewed, 0 not held.
constexpr const char* renew_script = R"lua(
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
)lua";

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

redisContext* connect(const std::string& host, int port) {
  const timeval tv{5, 0};
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, tv);
  if (c == nullptr || c->err) {
    std::string why = c ? c->errstr : "out of memory";
    if (c) redisFree(c);
    throw std::runtime_error("RedissonEmulator: cannot connect to " + host + ":" + std::to_string(port) + ": " + why);
  }
  redisSetTimeout(c, tv);
  return c;
}

ReplyPtr command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (r == nullptr) throw std::runtime_error(std::string("RedissonEmulator: I/O error: ") + c->errstr);
  if (r->type == REDIS_REPLY_ERROR) {
    std::string what(r->str, r->len);
    freeReplyObject(r);
    throw std::runtime_error("RedissonEmulator: " + args[0] + " failed: " + what);
  }
  return ReplyPtr(r);
}

std::string random_uuid() {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  static constexpr char hex[] = "0123456789abcdef";
  std::string h(32, '0');
  for (auto& c : h) c = hex[rng() & 15];
  h[12] = '4';
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

// Waits for an unlock message on a subscribed connection, at most `timeout`. As Redisson's
// LockPubSub, only "0" (unlock) and "1" (read unlock) wake a waiter; other payloads are ignored.
bool wait_for_message(redisContext* c, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(c, &raw) != REDIS_OK) throw std::runtime_error("RedissonEmulator: protocol error");
    if (raw != nullptr) {
      ReplyPtr r(static_cast<redisReply*>(raw));
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && std::string(r->element[0]->str) == "message") {
        const std::string payload(r->element[2]->str, r->element[2]->len);
        if (payload == "0" || payload == "1") return true;
      }
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{c->fd, POLLIN, 0};
    const int n = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (n == 0) return false;
    if (n < 0) continue;  // EINTR
    if (redisBufferRead(c) != REDIS_OK) throw std::runtime_error(std::string("RedissonEmulator: ") + c->errstr);
  }
}

}  // namespace

RedissonEmulator::RedissonEmulator(const std::string& host, int port)
    : ctx_(connect(host, port)), host_(host), port_(port), uuid_(random_uuid()) {}

RedissonEmulator::RedissonEmulator(const RedisServer& server) : RedissonEmulator(server.host(), server.port()) {}

RedissonEmulator::~RedissonEmulator() {
  if (ctx_) redisFree(ctx_);
}

std::optional<long long> RedissonEmulator::try_acquire(const std::string& name, long thread_id, long long lease_ms) {
  std::lock_guard lock(mu_);
  auto r = command(ctx_, {"EVAL", acquire_script, "1", name, std::to_string(lease_ms), field(thread_id)});
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r->type != REDIS_REPLY_INTEGER) throw std::runtime_error("RedissonEmulator: unexpected acquire reply");
  return r->integer;
}

bool RedissonEmulator::lock(const std::string& name, long thread_id, std::chrono::milliseconds wait, long long lease_ms) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  // Subscribe first (and wait for the confirmation), then try: a release published between a
  // failed try and the subscription would otherwise be missed.
  std::unique_ptr<redisContext, void (*)(redisContext*)> sub(connect(host_, port_), redisFree);
  command(sub.get(), {"SUBSCRIBE", channel(name)});
  while (true) {
    const std::optional<long long> ttl = try_acquire(name, thread_id, lease_ms);
    if (!ttl) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (*ttl >= 0) left = std::min(left, std::chrono::milliseconds(*ttl));
    (void)wait_for_message(sub.get(), left);
  }
}

std::optional<bool> RedissonEmulator::unlock(const std::string& name, long thread_id, long long lease_ms) {
  std::lock_guard lock(mu_);
  auto r = command(ctx_, {"EVAL", release_script, "2", name, channel(name), "0", std::to_string(lease_ms), field(thread_id)});
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  return r->integer == 1;
}

bool RedissonEmulator::renew(const std::string& name, long thread_id, long long lease_ms) {
  std::lock_guard lock(mu_);
  auto r = command(ctx_, {"EVAL", renew_script, "1", name, std::to_string(lease_ms), field(thread_id)});
  return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

}  // namespace dlock::test
