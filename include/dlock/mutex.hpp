// dlock/mutex.hpp — dlock::Mutex, an exclusive lock across processes and machines.
//
// Redis layout (a public contract; other clients interoperate through it), for a lock named N
// and the prefix P (default "dlock:"):
//   P{N}          string: the holder's owner token "<32 hex>@<host>:<pid>:<unix ms>", SET NX PX
//   P{N}:fence    string: the fencing counter; no TTL, never deleted
//   P{N}:rel      string: the last releaser's owner token, for 30 s (makes release idempotent)
//   P{N}:waiters  zset: the places of waiting Clients (Client id -> until when the place counts,
//                 server ms); expires with its newest place. "*" is the place shared by
//                 MultiLock waiters (multi_lock.hpp), who listen on P{N}:ch only
//   P{N}:ch       pub/sub channel: "released" after a release that found no place on
//                 P{N}:waiters (or came to "*"), "revoked" after a forced unlock
//   P{N}:ch:<id>  pub/sub channel of one waiting Client: "released <id>", its turn
// Any client that takes the lock with SET P{N} <token> NX PX and releases with a
// compare-and-delete excludes dlock, and dlock excludes it (its release publishes nothing, so
// dlock's waiters notice it within WaitOptions::recheck_interval).
//
// Mutex meets the standard TimedLockable requirements, so std::unique_lock, std::scoped_lock,
// std::lock_guard and std::condition_variable_any work with it. As with std::timed_mutex, the
// thread that locked must be the one that unlocks; code that moves between threads (coroutines,
// thread pools) uses acquire() and the Lease it returns.
//
// Waiting: the waiters of one process queue in order and only the first of them tries. A try
// that finds the lock busy puts its Client on P{N}:waiters (or moves it to the end); a release
// tells the first Client there, on that Client's own channel, and only that Client wakes and
// tries: a handoff costs one try, not one per waiting process. A place whose Client no longer
// listens (its process died) is passed over; a place lapses when its Client stops trying for
// about two recheck intervals; a Client that listens but does not act (hung) costs the others
// one recheck interval (WaitOptions::recheck_interval, 500 ms by default), once. A message on
// P{N}:ch ("released" when nobody had a place, or from other tools, "revoked", an expiry seen
// through keyspace notifications) still wakes every waiting process.
//
// Not guaranteed: fairness. The roll is in the order of the waiters' latest tries, and a waiter
// rechecks (moving to the end) every recheck interval; a try that is not a waiter's (a first
// try, try_lock()) can take a free lock before the named Client does. A process whose release
// woke a waiter elsewhere holds its own next try back for about two round trips (at most 2 ms).
// Use FairLock for a global FIFO.
// Nor exclusion across a Redis failover or a holder paused past its lease (use the fencing
// token).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "dlock/client.hpp"
#include "dlock/clock.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"

namespace dlock {

namespace detail {
struct AcquireRequest;
struct ScriptAttemptSpec;
class ThreadHolds;
}  // namespace detail

class Mutex {
 public:
  // Mutex(client, name, lease)
  //
  // Names are 1–512 bytes without '{', '}' or control characters; anything else throws
  // std::system_error(errc::invalid_argument). Never blocks; touches no server.
  Mutex(Client& client, std::string name, LeaseOptions lease = {});
  ~Mutex();  // releases holds still taken through lock() (noexcept)

  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // acquire(wait, stop)
  //
  // Takes the lock, waiting as WaitOptions says: woken by a release notification, and in any
  // case rechecking when the holder's TTL ends or after recheck_interval. Returns the Lease.
  // Errors: busy (timeout zero and held), timeout, cancelled (stop requested), wrong_type (the
  // key, or its fencing counter, holds something else: fencing.hpp), connection, auth (also an ACL denial inside the script), server (OOM, READONLY...), script,
  // protocol, overloaded, called_from_event_loop, shutdown.
  // Not returned: a lease whose validity ended before its reply came back (a stalled network
  // or process). Such a late acquisition is given back (compare-and-delete) before acquire()
  // goes on: a one-try acquire reports busy, a waiting one keeps waiting, until three tries in
  // a row were answered that late: it then fails with invalid_argument ("the lease TTL is too
  // short for this server's latency": a configuration to fix, not a lock to wait for) rather
  // than take and give back until its deadline. The same holds for every lock kind.
  Result<Lease> acquire(WaitOptions wait = {}, std::stop_token stop = {});

  // async_acquire(): acquire() without blocking; `done` runs on the event loop (see Client).
  void async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done,
                     std::stop_token stop = {});

  // --- Standard Lockable / TimedLockable members ---------------------------------------------
  // lock(): blocks until acquired; throws std::system_error on any error (connection...), and
  // std::errc::resource_deadlock_would_occur when the calling thread already holds it.
  void lock();
  // try_lock(): one attempt, no waiting. false when held by another; throws on other errors.
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return timed_try(detail::clamp_ms(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return timed_try(detail::clamp_until_ms(t));
  }
  // unlock(): releases the calling thread's hold. Never throws. When the lock turns out to have
  // been lost, that is recorded: lost() and last_error() tell it.
  void unlock() noexcept;

  // --- State of the calling thread's hold (taken through lock()/try_lock*) -------------------
  // True while the calling thread holds the lock and it is not known to be lost.
  bool owns_lock() const noexcept;
  // The fencing token of the calling thread's current (or most recent) hold.
  FencingToken fencing_token() const noexcept;
  // True when the calling thread's current or most recent hold was lost.
  bool lost() const noexcept;
  // Validity left of the calling thread's hold.
  milliseconds remaining() const noexcept;
  // The error of the calling thread's last unlock() (lock_lost, connection...), else empty.
  Error last_error() const;

  const std::string& name() const noexcept;
  // The Redis key of the lock: prefix + "{" + name + "}".
  const std::string& key() const noexcept;

 private:
  bool timed_try(milliseconds d);
  detail::AcquireRequest request(WaitOptions wait) const;
  detail::ThreadHolds& holds();

  std::shared_ptr<detail::ClientCore> core_;
  // Everything about the lock (its name and key too), shared with its attempts and leases:
  // the object itself stays at 40 bytes (the watchdog may hold thousands).
  std::shared_ptr<const detail::ScriptAttemptSpec> spec_;
  // The holds taken through lock()/try_lock*(), created by the first of them: a Mutex used only
  // through acquire() (or thousands of them, each holding a Lease) does not pay for it.
  std::atomic<detail::ThreadHolds*> holds_{nullptr};
};

}  // namespace dlock
