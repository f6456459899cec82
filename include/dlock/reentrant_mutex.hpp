// dlock/reentrant_mutex.hpp — dlock::ReentrantMutex, an exclusive lock its owner may take again.
//
// Defines:
//   dlock::ReentrantMutexOptions  lease, owner identity, Redisson compatibility
//   dlock::ReentrantMutex         the lock: std::recursive_timed_mutex members plus Leases
//
// The owner that holds it may take it again; it is free only after as many releases as takes.
// Ownership is an explicit owner identity: by default the calling thread of one Client (as for
// std::recursive_timed_mutex); code that moves between threads (coroutines, thread pools) names
// its own owner (Options::owner, or acquire(Owner{...})) and may then release from any thread.
//
// Redis layout (a public contract), for a lock named N and the prefix P (default "dlock:"):
//   P{N}          hash, with the lease as its TTL (PEXPIRE):
//                   <owner>  -> the owner's hold count (1 after the first take, +1 per re-take)
//                   :fence   -> the hold's fencing token (no owner identity starts with ':')
//   P{N}:fence    string: the fencing counter, shared with Mutex; no TTL, never deleted
//   P{N}:ch       pub/sub channel: "released" after the last release ("revoked": forced unlock)
//   P{N}:rel:<id> string: release latch of one take, so a retried release never decrements
//                 twice; lives 2 x command_timeout + connect_timeout + reconnect.max + 1 s
//                 (12 s with the default ClientOptions) of the releasing Client
// Owner identities (hash fields): "<client id>:<thread number>@<host>:<pid>" for a thread
// (thread numbers count up per process and are never reused), "<client id>:<owner>@<host>:<pid>"
// for an explicit owner. The client id is 32 random hex digits per Client, so identities of
// different Clients never collide; the part after the last '@' is for people reading the key.
// A Mutex on the same name finds a hash and fails with wrong_type; this lock on a Mutex's
// string fails with wrong_type as well, and so it does on a SharedMutex's or a Semaphore's hash
// (which has a field "kind"; no owner identity is "kind").
//
// Redisson compatibility (Options::redisson_compat): the layout of Redisson's RLock, so a C++
// service and a Java service using RLock exclude each other on the same lock name:
//   N                                 hash at the name itself (no prefix, no braces added):
//                                     "<uuid>:<thread number>" -> hold count; TTL = lease
//                                     (default 30 s, renewed every 10 s, as Redisson's watchdog)
//   redisson_lock__channel:{N}        the last release PUBLISHes "0"; waiters of either side
//                                     listen there and wake each other
//   redisson_unlock_latch:{N}:<id>    release latch of one take (as newer Redisson versions)
// The uuid is derived from the Client's id (one per Client, as Redisson has one per client
// instance). In this mode names may contain braces (Redisson names are used as they are); a
// name with a '{' is its own hash tag, so, as Redisson's prefixName does, the channel and the
// latch take it without added braces: redisson_lock__channel:N and redisson_unlock_latch:N:<id>
// (same Cluster slot as N). There is NO fencing token: Lease::token() is 0, and a lock held by a
// Java client has none either, so a resource cannot fence writes made under it. On Redis
// Cluster the last release publishes with SPUBLISH (Redisson 3.22+ on Redis 7) and with PUBLISH
// (older Redisson versions subscribe classically), so waiters of either kind hear it.
//
// Renewal and Leases. Every acquisition returns its own Lease; a re-take costs one round trip
// and returns the outer hold's fencing token. The Client keeps ONE renewal record per hold
// (owner, lock), whatever its count: the watchdog renews the hold once per interval. A Lease's
// release() gives back that one take (decrement); Leases may be released in any order and the
// last release frees the lock. When the hold's renewal finds it gone, or its validity runs out,
// every Lease of the hold is lost (each one's on_lost runs). A re-take joins the hold as it is:
// the hold keeps the TTL and renewal of its first take, the re-take's LeaseOptions::events are
// honoured. The hold's renewal stops when its last Lease is destroyed (or when it finds the hold
// gone); so after a release that failed (connection), the hold is renewed until that Lease dies.
// Every Lease of a hold follows the hold: Lease::remaining() is the hold's validity as the
// watchdog renews it, and Lease::extend(ttl) on any take sets the WHOLE hold's TTL (the hash's
// PEXPIRE) and the TTL its later renewals use. Client::active_leases() counts holds, not takes:
// an owner that took the lock three times holds one lease.
//
// Fencing: tokens increase strictly across successive holders of the name (Mutex and
// ReentrantMutex alike); every take of one hold carries the same token. Check them with the
// ">= highest seen" rule (fencing.hpp).
//
// Not guaranteed: fairness (see FairLock). Waiters of one Client queue in order; between Clients
// a release that woke waiters elsewhere holds the releasing Client's own next try back for about
// two round trips, so Clients take turns instead of the releasing one winning every race (a
// mitigation only). Not guaranteed either: exclusion across a Redis failover or a holder paused
// past its lease (use the fencing token). A take whose reply was lost (timeout, dropped
// connection) is dropped again on the server once it is reachable (within reconnect.max +
// connect_timeout), unless the owner holds the lock or acquires it again first: then the lost
// take may leave one count behind, and the lock is freed at its TTL after the owner's last
// release, not at once.
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
struct AcquireRequest;
struct ReentrantLayout;
}  // namespace detail

struct ReentrantMutexOptions {
  LeaseOptions lease;
  // The owner of this object's lock()/unlock() and of acquire() without an Owner. Empty: the
  // calling thread. 1–256 bytes, no control characters, not only digits (those name threads),
  // not starting with ':'.
  std::string owner;
  // Use Redisson's RLock layout, channel and messages (see above).
  bool redisson_compat = false;
};

class ReentrantMutex {
 public:
  using Options = ReentrantMutexOptions;

  // An explicit owner identity for one acquisition (same rules as Options::owner).
  struct Owner {
    std::string id;
  };

  // ReentrantMutex(client, name, options)
  //
  // Names are 1–512 bytes without control characters, and without '{' or '}' unless
  // redisson_compat (the name is then the key itself; on a Redis Cluster a name with braces must
  // then have a non-empty {hash tag}, as Redisson's derived names need). A bad name, owner or
  // lease throws std::system_error(errc::invalid_argument). Never blocks; touches no server.
  ReentrantMutex(Client& client, std::string name, Options options = {});
  ~ReentrantMutex();  // releases the takes still held through lock() (noexcept)

  ReentrantMutex(const ReentrantMutex&) = delete;
  ReentrantMutex& operator=(const ReentrantMutex&) = delete;

  // acquire(wait, stop) / acquire(owner, wait, stop)
  //
  // Takes the lock for the calling thread (or Options::owner), or for `owner`. When that owner
  // holds it already, one round trip adds a take to its hold and returns a Lease with the hold's
  // token, without waiting. Otherwise waits as WaitOptions says: woken by a release
  // notification, and in any case rechecking when the holder's TTL ends or after
  // recheck_interval. Errors: busy (timeout zero and held by another owner), timeout,
  // cancelled, wrong_type, connection, auth, server, script, protocol, overloaded,
  // called_from_event_loop, shutdown, invalid_argument (a bad owner).
  Result<Lease> acquire(WaitOptions wait = {}, std::stop_token stop = {});
  Result<Lease> acquire(const Owner& owner, WaitOptions wait = {}, std::stop_token stop = {});

  // async_acquire(): acquire() without blocking; `done` runs on the event loop (see Client). Without
  // an Owner, the owner is the thread that calls async_acquire (or Options::owner).
  void async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop = {});
  void async_acquire(const Owner& owner, WaitOptions wait, std::function<void(Result<Lease>)> done,
                     std::stop_token stop = {});

  // --- Standard members, as std::recursive_timed_mutex --------------------------------------
  // The owner is the calling thread, or Options::owner for every thread (then unlock() may
  // come from any thread). Each successful lock()/try_lock*() is one take; unlock() gives back
  // the owner's latest take.
  //
  // lock(): blocks until taken; a re-take does not wait. Throws std::system_error on errors.
  void lock();
  // try_lock(): one attempt, no waiting. false when held by another owner; throws on other errors.
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return timed_try(detail::clamp_ms(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return timed_try(detail::clamp_until_ms(t));
  }
  // unlock(): gives back the owner's latest take; the lock is free after the last one. Never
  // throws; a failure (lock_lost, connection...) is recorded for last_error() and lost().
  void unlock() noexcept;

  // --- State of the calling owner's takes through the standard members ----------------------
  bool owns_lock() const noexcept;             // holds at least one take, not known to be lost
  std::size_t hold_count() const noexcept;     // takes not yet given back through unlock()
  FencingToken fencing_token() const noexcept; // of the current (or most recent) hold
  bool lost() const noexcept;                  // the current or most recent hold was lost
  milliseconds remaining() const noexcept;     // validity left of the hold (follows renewals)
  Error last_error() const;                    // of the last unlock(), else empty

  const std::string& name() const noexcept { return name_; }
  // The Redis key: prefix + "{" + name + "}", or the name itself in Redisson mode.
  const std::string& key() const noexcept;
  // The owner identity (hash field) of the calling thread, or of Options::owner.
  std::string owner() const;
  // The identity (hash field) `owner` has on this lock. Throws errc::invalid_argument for a bad one.
  std::string owner(const Owner& who) const;

 private:
  class Holds;

  bool timed_try(milliseconds d);
  Result<Lease> take(const std::string& owner, WaitOptions wait, std::stop_token stop);
  void async_take(std::string owner, WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop);
  detail::AcquireRequest request(const std::string& owner, WaitOptions wait) const;

  std::shared_ptr<detail::ClientCore> core_;
  std::string name_;
  Options options_;
  std::string owner_base_;  // "<client id>:" or "<uuid>:"
  std::string owner_suffix_;  // "@<host>:<pid>", or empty in Redisson mode
  std::shared_ptr<const detail::ReentrantLayout> layout_;
  std::unique_ptr<Holds> holds_;
};

}  // namespace dlock
