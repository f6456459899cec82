// dlock/fair_lock.hpp — dlock::FairLock, an exclusive lock whose waiters are served in the order
// they asked, across threads, processes and machines (FIFO).
//
// Redis layout (a public contract), for a lock named N and the prefix P (default "dlock:"):
//   P{N}            string: the holder's owner token "<32 hex>@<host>:<pid>:<unix ms>", with the
//                   lease as its PX — the same as a Mutex's key, so `dlock status/list/leaks/
//                   unlock --force` and the watchdog read it alike
//   P{N}:fence      string: the fencing counter; no TTL, never deleted; seeded from the server's
//                   TIME in microseconds when missing (shared with a Mutex of the same name)
//   P{N}:rel        string: the last releaser's owner token, for 30 s (makes release idempotent)
//   P{N}:queue      list: the waiters' ids (each waiter's owner token), in arrival order
//   P{N}:timeouts   zset: waiter id -> the deadline of its place, in ms of the server's clock
//                   (TIME inside the scripts; no client clock is ever compared with it)
//   P{N}:grant      hash: waiter id -> that waiter's lease TTL in ms, written when it queues:
//                   what a release needs to hand the lock straight to it
//   P{N}:ch:<proc>  pub/sub channel of the waiters of one process, <proc> being the owner
//                   token's part between '@' and the last ':' ("<host>:<pid>"):
//                   "granted <fencing token> <waiter id>" when a release handed the lock to that
//                   waiter; "released <waiter id>" when that waiter heads the queue and the lock
//                   is free (it then takes it with a try)
// The three queue keys carry a PEXPIRE as long as their longest-lived place, so they vanish with
// their last waiter even when nobody cleans up after it; a waiter leaving the queue (served,
// gone, or purged as dead) leaves all three.
//
// Every waiter is in the Redis queue (there is no process-local queue for this kind). Whoever is
// at the head gets the lock when it is free; nobody else may, not even try_lock() of an idle
// caller (it fails while live waiters are queued). A waiter's place lasts
// FairLockOptions::waiter_ttl after its last try; a live waiter re-tries (and so renews its
// place) every waiter_ttl / 3 while it waits. A waiter that died stops renewing and is dropped
// within waiter_ttl (plus, when it was the head, up to waiter_ttl / 3 until the next waiter's
// renewal notices). A waiter that gives up (timeout, cancellation) removes its place at once.
//
// Handover: a release does not free the lock while a live waiter is queued: in the same script it
// sets the lock key to the head's owner token with the head's lease TTL, counts a fencing token
// (as an acquisition does), removes the head from the queue and publishes "granted" to it. The
// head's acquire returns on that message, without a round trip of its own. Other waiters are not
// woken and send nothing until their next renewal. A "granted" message that is lost (the
// subscriber connection dropped) is recovered by the waiter's next try (after the Notifier
// subscribes again, or its recheck), which finds the lock its own: that try returns the lease
// with the handover's fencing token and restarts its TTL. A waiter that gives up just as it is
// handed the lock releases it (and hands it on) while it leaves the queue. The head also re-tries
// when the holder's TTL ends (a crashed holder) and after WaitOptions::recheck_interval.
// A handed-over lease's validity is counted from the send time of the waiter's last try that ran
// before the handover, so remaining() can start below the full TTL by up to the time it waited
// since that try (at most waiter_ttl / 3). When that is more than the lease's validity (a waiter
// that moved up the queue without a try of its own, with a lease TTL below waiter_ttl / 3), the
// waiter first renews the granted key, one more round trip, and the lease counts from then.
//
// Subscriptions: a FairLock object subscribes its process's channel the first time one of its
// waits queues, and keeps it until it is destroyed; later waits of the object queue with their
// first try. Every Client of a process that waits on one name subscribes the same channel and
// receives every message for that process (each picks its own waiters by id).
//
// Fencing: tokens come from P{N}:fence like Mutex's, so they increase strictly across successive
// holders, FairLock or Mutex alike.
//
// Interoperation with other kinds: the lock key is a Mutex's layout, so a Mutex and a FairLock
// of the same name exclude each other (the Mutex just does not queue: it takes the lock whenever
// it finds it free, ahead of the queue). A key of any other type (a ReentrantMutex's hash, a
// semaphore's zset...) gives errc::wrong_type, as do queue keys of the wrong type.
//
// As with Mutex, the std members (lock, try_lock*, unlock) keep one hold per thread; code that
// moves between threads uses acquire() and its Lease.
//
// Not guaranteed: a waiter that dies while queued is handed the lock if its place has not expired
// yet when the lock is released; the lock then stays taken, as with a holder that died, until
// that waiter's lease TTL ends (not just its waiter_ttl). FIFO among waiters whose first tries reach the server in the same instant
// (their order is the server's order), or for a waiter paused longer than waiter_ttl (its place
// expires and it queues again at the back).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "dlock/client.hpp"
#include "dlock/clock.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"

namespace dlock {

namespace detail {
struct FairSpec;
class ThreadHolds;
}  // namespace detail

struct FairLockOptions {
  // How long a waiter's place in the queue outlives its last try. A waiter re-tries every
  // waiter_ttl / 3 while it waits, so its place lasts as long as it does; a waiter that died is
  // dropped at most waiter_ttl after its last try. At least 30 ms.
  milliseconds waiter_ttl{5000};
};

class FairLock {
 public:
  // FairLock(client, name, lease, fair)
  //
  // Names are 1–512 bytes without '{', '}' or control characters; anything else, or bad
  // options, throws std::system_error(errc::invalid_argument). Never blocks; touches no server.
  FairLock(Client& client, std::string name, LeaseOptions lease = {}, FairLockOptions fair = {});
  ~FairLock();  // releases holds still taken through lock() (noexcept)

  FairLock(const FairLock&) = delete;
  FairLock& operator=(const FairLock&) = delete;

  // acquire(wait, stop)
  //
  // Takes the lock at once when it is free and nobody is queued (one round trip). Otherwise,
  // unless wait.timeout is zero, joins the queue (subscribing the process's channel first, once
  // per FairLock object) and waits until a release hands it the lock. Returns the Lease (renewed
  // by the Client's watchdog; loss is reported). A wait that ends
  // without the lock (timeout, cancellation) removes its place before it returns (bounded by a
  // short grace when the server does not answer; the place then expires by itself).
  // Errors: busy (timeout zero and held or others queued), timeout, cancelled, wrong_type,
  // connection, auth, server, script, protocol, overloaded, called_from_event_loop, shutdown.
  Result<Lease> acquire(WaitOptions wait = {}, std::stop_token stop = {});

  // async_acquire(): acquire() without blocking; `done` runs on the event loop (see Client).
  void async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop = {});

  // --- Standard Lockable / TimedLockable members ---------------------------------------------
  // lock(): blocks until acquired; throws std::system_error on any error, and
  // std::errc::resource_deadlock_would_occur when the calling thread already holds it.
  void lock();
  // try_lock(): one attempt, never queued. false when held, or when others are queued.
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return timed_try(detail::clamp_ms(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return timed_try(detail::clamp_until_ms(t));
  }
  // unlock(): releases the calling thread's hold, handing the lock to the head of the queue when a
  // live waiter is queued. Never throws;
  // a hold found lost is recorded (lost(), last_error()).
  void unlock() noexcept;

  // --- State of the calling thread's hold (taken through lock()/try_lock*) -------------------
  bool owns_lock() const noexcept;
  FencingToken fencing_token() const noexcept;
  bool lost() const noexcept;
  milliseconds remaining() const noexcept;
  Error last_error() const;

  const std::string& name() const noexcept;
  // The Redis key of the lock: prefix + "{" + name + "}".
  const std::string& key() const noexcept;
  // The queue (P{N}:queue) and the waiters' deadlines (P{N}:timeouts), for inspection; the
  // stored leases are at key() + ":grant".
  std::string queue_key() const { return key() + ":queue"; }
  std::string timeouts_key() const { return key() + ":timeouts"; }

 private:
  bool timed_try(milliseconds d);

  std::shared_ptr<detail::ClientCore> core_;
  std::shared_ptr<const detail::FairSpec> spec_;
  std::unique_ptr<detail::ThreadHolds> holds_;
};

}  // namespace dlock
