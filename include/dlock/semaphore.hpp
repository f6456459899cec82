// dlock/semaphore.hpp — dlock::Semaphore, a counting semaphore across processes and machines
// whose permits expire: at most N permits are held at once, and a permit whose holder died
// (or stopped renewing) is reclaimed when its lease ends.
//
// Redis layout (a public contract), for a semaphore named N and the prefix P (default "dlock:"):
//   P{N}:permits   zset: permit id -> expiry of that permit, in server milliseconds (TIME).
//                  An acquisition of k permits by owner token T adds the ids "T#1" .. "T#k"; the
//                  watchdog renews them together by moving their scores forward. Every acquire
//                  first removes expired entries: that is how a dead holder's permits come back.
//   P{N}:limit     string: the number of permits N. No TTL. Written by the first acquisition when
//                  absent (from the constructor's `permits`), and by set_permits(). A value
//                  there that is no count (decimal digits only) is refused with
//                  errc::wrong_type by acquisitions, permits() and available(), never
//                  overwritten; set_permits() replaces it.
//   P{N}:fence     string: counter numbering acquisitions (no TTL, never deleted).
//   P{N}:released  zset: owner token -> when it released (server ms), so that a retried
//                  release is recognised: the newest 10,000 releases of the last
//                  2 x command_timeout + connect_timeout + reconnect.max + 1 s (12 s with the
//                  default ClientOptions) of the releasing Client.
//   P{N}:ch        pub/sub channel: "released" after each release, "resized" after set_permits().
//   P{N}           hash: kind = "Semaphore", while any permit is held: its TTL is the longest
//                  live permit's, and a release of the last live one deletes it. It claims
//                  the name (so every process using the name must run a dlock that writes it): a
//                  Mutex, FairLock, ReentrantMutex, SharedMutex or MultiLock of the same name is
//                  refused with errc::wrong_type while permits are held. Any other value there:
//                  a lock of another kind uses the name, and the Semaphore reports
//                  errc::wrong_type (as it does for a key above that holds another type).
//
// Changing N at run time: set_permits(n) stores the new limit and wakes the waiters. Raising it
// lets waiters in at once. Lowering it never revokes a permit that is held (and renewal does
// not look at the limit): it only keeps new acquisitions out until the holders have released
// enough that fewer than n permits are held. Every Semaphore object uses the stored limit; the
// constructor's `permits` only seeds it when none is stored.
//
// Tokens: a permit acquisition's Lease carries a token from the semaphore's counter: unique per
// acquisition and increasing in acquisition order (k permits taken at once share one). It means
// no exclusion — permits are held concurrently — so a resource must NOT fence with the ">= highest
// seen" rule (that would reject the older of two legitimate holders). Use it to tell holders
// apart (logs, idempotency keys, per-permit slots).
//
// Waiting: the waiters of one Client on one semaphore form a FIFO queue in the process, and only
// its head tries in Redis; the others wait their turn without sending anything. The head is woken
// by a release or resize notification, and in any case tries again when the permits it needs
// would expire (a crashed holder sends no release) and after WaitOptions::recheck_interval. A head
// that got its permits while more are still free hands its turn on at once, so permits freed
// together (a release of k, a raised limit) are all taken without waiting for another release.
//   - FIFO within a Client, with head-of-line blocking (the rule of FIFO semaphores such as
//     tokio's): a head that needs k permits holds up the waiters queued behind it, even ones
//     needing fewer, until k are free at once, or until it times out or is cancelled. Later
//     small requests never overtake an earlier large one, so the large one is not starved by
//     the process's own small ones; the small ones wait at most as long as the head does.
//   - Exception: a head whose k exceeds the limit (it could only be served after set_permits()
//     raises it) leaves the queue for a separate one and waits there, so it blocks nobody. Once
//     a resize makes k fit, its next try sends it back to the end of the shared queue, where
//     releases wake it again; waiters that queued meanwhile go first.
//   - No fairness across Clients: each Client's head races the other Clients' heads; an
//     acquisition of k > 1 permits may wait while other Clients take single permits. (A release
//     that woke waiters of other Clients holds the releasing Client's own next try back for
//     about two round trips, so with one permit Clients take turns rather than the releasing
//     one winning every race.)
//   - try_acquire() and acquire(k, {timeout 0}) make one try at once, without queueing, and may
//     take a permit ahead of this Client's waiters.
//
// The std::counting_semaphore-like members (acquire(), try_acquire*, release()) take single
// permits held by this object, not by a thread: any thread may release them, oldest first.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
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
struct SemaphoreLegs;
}  // namespace detail

class Semaphore {
 public:
  // Semaphore(client, name, permits, lease)
  //
  // `permits` becomes the limit if Redis stores none yet. Names follow Mutex's rules; anything
  // else throws std::system_error(errc::invalid_argument). Never blocks; touches no server.
  Semaphore(Client& client, std::string name, std::size_t permits, LeaseOptions lease = {});
  ~Semaphore();  // releases the permits still held through acquire()/try_acquire*() (noexcept)

  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  // --- Lease API -----------------------------------------------------------------------------
  // acquire(k, wait, stop)
  //
  // Takes k permits at once (all or none), waiting as WaitOptions says. They form one Lease:
  // renewed together by the watchdog, released together. A k above the limit waits (the limit
  // may be raised). Errors: invalid_argument (k == 0), busy (timeout zero and not enough free),
  // timeout, cancelled, wrong_type, connection, auth, server, script, protocol, overloaded,
  // called_from_event_loop, shutdown.
  Result<Lease> acquire(std::size_t k, WaitOptions wait = {}, std::stop_token stop = {});
  void async_acquire(std::size_t k, WaitOptions wait, std::function<void(Result<Lease>)> done,
                     std::stop_token stop = {});

  // --- std::counting_semaphore-like members (one permit each, held by this object) ----------
  // acquire(): blocks until a permit is taken; throws std::system_error on any error.
  void acquire();
  // try_acquire(): one attempt; false when no permit is free; throws on other errors.
  bool try_acquire();
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& d) {
    return timed_try(detail::clamp_ms(d));
  }
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& t) {
    return timed_try(detail::clamp_until_ms(t));
  }
  // release(n): releases n permits taken through the members above, oldest first. Throws
  // std::system_error(errc::invalid_argument) when fewer are held (and releases none).
  // A permit found lost is recorded in last_error() (lock_lost), not thrown.
  void release(std::size_t n = 1);
  // Permits taken through the members above and not yet released (lost ones included).
  std::size_t held() const;
  // The error of the last release() (lock_lost, connection...), else empty.
  Error last_error() const;

  // --- The limit -----------------------------------------------------------------------------
  // set_permits(n): stores n as the limit and wakes waiters; held permits are never revoked.
  // Errors: wrong_type, connection, timeout, auth, server, called_from_event_loop.
  Result<void> set_permits(std::size_t n);
  // permits(): the limit stored in Redis (the constructor's when none is stored yet).
  // Errors: wrong_type (a key of another type, or a stored limit that is no count), connection,
  // timeout, auth, server, called_from_event_loop.
  Result<std::size_t> permits() const;
  // available(): permits free now: the limit minus the live permits (0 when over the limit).
  // Errors as permits().
  Result<std::size_t> available() const;

  const std::string& name() const noexcept { return name_; }
  // The semaphore's base key P{N} (its claim on the name; its other keys are this plus ":permits"...).
  const std::string& key() const noexcept { return key_; }

 private:
  bool timed_try(milliseconds d);
  // The requests of an acquisition of k permits (semaphore.cpp).
  std::shared_ptr<const detail::SemaphoreLegs> legs(std::size_t k) const;
  // `on_wait`: see detail::AcquireRequest::on_wait (a blocking acquire parks its caller's polling).
  void start(std::size_t k, WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop,
             std::function<void()> on_wait = {}) const;
  Result<std::pair<std::size_t, std::size_t>> state() const;  // {limit, live permits}

  std::shared_ptr<detail::ClientCore> core_;
  std::string name_;
  std::string key_;
  std::size_t initial_permits_;
  LeaseOptions lease_;
  // legs(1), made once: most acquisitions take one permit.
  std::shared_ptr<const detail::SemaphoreLegs> one_;
  mutable std::mutex mu_;
  std::deque<Lease> held_;  // permits taken through acquire()/try_acquire*(), oldest first
  Error last_error_;
};

}  // namespace dlock
