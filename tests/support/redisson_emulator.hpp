#pragma once
// ===========================================================================================
//  EMULATION, NOT REDISSON. A small wire-level stand-in for a Java service that uses
//  Redisson's RLock, for tests only.
// ===========================================================================================
// Redisson cannot be installed here, so the Java side of dlock's Redisson compatibility mode is
// played by this class. It is written from Redisson's documented RLock protocol (the facts in
// the project's FIELD.md, from Redisson's public source and docs), using hiredis directly and
// never dlock:
//   * a lock named N is a hash at key N: field "<client uuid>:<thread id>" -> hold count, with
//     the lease as the key's PEXPIRE (30 s by default);
//   * acquire (one script): if N does not exist or has the caller's field, HINCRBY field 1 and
//     PEXPIRE lease, reply nil; otherwise reply N's PTTL;
//   * release (one script): no field -> nil (Java: IllegalMonitorStateException); else HINCRBY
//     -1; still > 0 -> PEXPIRE lease, reply 0; else DEL N, PUBLISH "0" on
//     redisson_lock__channel:{N}, reply 1;
//   * renewal (watchdog): if the field exists, PEXPIRE lease, reply 1, else 0;
//   * waiting: SUBSCRIBE to the channel first, then try; try again when a message arrives or
//     when the PTTL the try returned has elapsed.
// Not emulated: the unlock latch of newer versions, SPUBLISH on Cluster, the watchdog's timer
// (tests call renew() themselves), fair/read-write locks.

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

struct redisContext;

namespace dlock::test {

class RedisServer;

class RedissonEmulator {
 public:
  static constexpr long long default_lease_ms = 30000;  // Redisson's lockWatchdogTimeout

  // One emulated Redisson client instance: its own random UUID and command connection.
  // Throws std::runtime_error if it cannot connect.
  RedissonEmulator(const std::string& host, int port);
  explicit RedissonEmulator(const RedisServer& server);
  ~RedissonEmulator();

  RedissonEmulator(const RedissonEmulator&) = delete;
  RedissonEmulator& operator=(const RedissonEmulator&) = delete;

  const std::string& uuid() const { return uuid_; }
  // The hash field of one of this client's threads: "<uuid>:<thread id>".
  std::string field(long thread_id) const { return uuid_ + ":" + std::to_string(thread_id); }
  // RedissonObject.prefixName: a name with a brace is not wrapped in another pair.
  static std::string channel(const std::string& name) {
    return name.find('{') != std::string::npos ? "redisson_lock__channel:" + name
                                                : "redisson_lock__channel:{" + name + "}";
  }

  // The acquire script once (RLock.tryLock() without waiting): nullopt when acquired (or taken
  // again), else the key's PTTL.
  std::optional<long long> try_acquire(const std::string& name, long thread_id,
                                       long long lease_ms = default_lease_ms);
  // RLock.tryLock(wait): subscribe, then try; on an unlock message ("0") or when the PTTL elapsed, try
  // again. True when acquired within `wait`. Opens its own subscriber connection.
  bool lock(const std::string& name, long thread_id, std::chrono::milliseconds wait,
            long long lease_ms = default_lease_ms);
  // RLock.unlock(): nullopt when this thread holds no take (IllegalMonitorStateException),
  // false when a take was given back but the lock is still held, true when released.
  std::optional<bool> unlock(const std::string& name, long thread_id, long long lease_ms = default_lease_ms);
  // One watchdog renewal: true when renewed.
  bool renew(const std::string& name, long thread_id, long long lease_ms = default_lease_ms);

 private:
  std::mutex mu_;  // one command connection, shared by the emulated client's threads
  redisContext* ctx_ = nullptr;
  std::string host_;
  int port_ = 0;
  std::string uuid_;
};

}  // namespace dlock::test
