// dlock/multi_lock.hpp — dlock::MultiLock, several named locks taken all-or-nothing.
//
// A MultiLock over the names {a, b, c} holds the locks a, b and c together: one acquire script
// checks every lock and takes them all in one atomic step, or takes none. It never holds a
// part of its set, so two MultiLocks over overlapping sets (say {a,b,c} and {b,c,d}) can never
// deadlock, whatever order their names were given in.
//
// Redis layout: each lock is exactly a Mutex (see mutex.hpp): for a name N and prefix P,
//   P{N}          string: the holder's owner token (the same token for every lock of the set)
//   P{N}:fence    string: N's fencing counter; no TTL, never deleted
//   P{N}:rel      string: the last releaser's owner token, for 30 s
//   P{N}:ch       pub/sub channel: "released" after a release ("released <queue key>" after
//                 an ordered try's give-back, see Deployment)
//   P{N}:waiters  zset: the Mutex waiters' roll; a MultiLock waiter whose try finds N busy
//                 adds the place "*" (shared by every MultiLock waiter, lapsing after about
//                 two recheck intervals), so that a Mutex release that names waiting Clients
//                 one by one comes to it and then wakes every waiter ("released" on P{N}:ch)
// So a MultiLock over {a, b} excludes a Mutex on a (or any client using the Mutex protocol on
// a), and the Mutex excludes the MultiLock. Not guaranteed: turns. When its place comes up,
// the MultiLock waiter tries alongside every other waiting process and may lose; it then
// takes a place at the end again.
//
// Loss: the hold is one lease over the whole set. When any lock of the set is found gone or
// taken over, the lease is lost (on_lost runs once), and the renewal that found it releases the
// locks of the set still held, with a "released" notification, instead of letting them sit out
// their TTL. release() of a partly lost set frees what is still ours and returns lock_lost.
//
// Fencing: the Lease's token (and fencing_token()) is the token of the FIRST lock of the
// sorted, deduplicated names. Every lock's own counter is incremented too, so a resource
// guarded by lock N can be fenced with N's own token: tokens(lease) reads them all (or read
// GET P{N}:fence while the lease is held).
//
// The names are sorted and deduplicated; names() gives that order. Waiters of one process on
// one MultiLock (same set of names) queue in order; a waiter is woken by the release of the lock
// its last try found busy (the first busy one of the set; while a try is in flight, by any of
// them), and rechecks at WaitOptions::recheck_interval or that lock's TTL. A release that woke waiters of other Clients holds the releasing Client's own next
// try on the set back for about two round trips, so Clients take turns rather than the releasing
// one winning every race. Not guaranteed: fairness (a MultiLock can wait long while single locks
// of its set keep changing hands), and exclusion across a Redis failover.
//
// Deployment. On a standalone or Sentinel server, and on Redis Cluster when every key of the
// set hashes to one slot, the set is taken, renewed and released by ONE atomic script each.
// On Cluster when the keys span slots (no script can reach them all), the ordered path: the
// keys are grouped by slot, and one try takes the groups one after the other in a fixed order
// (by their first sorted name: the same order for every MultiLock), each group atomically. When
// a group is busy, the groups this try took are released before the try reports busy, so a
// MultiLock never waits while holding part of its set: two MultiLocks over overlapping names
// cannot deadlock, whatever order their names were given in. That release says "released
// <the set's wait queue key>" on the groups' channels: it wakes other waiters as any message
// does, while the waiter that gave them back sleeps on until its busy group is released. Each group is renewed and
// released by its own script, and the loss of any group loses the Lease (its other groups are
// released at once). Client::active_leases() counts such a hold once per slot group.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/clock.hpp"
#include "dlock/fencing.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"
#include "dlock/result.hpp"

namespace dlock {

namespace detail {
struct AcquireRequest;
struct ScriptAttemptSpec;
struct OrderedMultiSpec;
struct MultiLockAccess;
class ThreadHolds;
}  // namespace detail

class MultiLock {
 public:
  // MultiLock(client, names, lease)
  //
  // At least one name; each 1–512 bytes without '{', '}' or control characters; anything else
  // throws std::system_error(errc::invalid_argument). Duplicates are dropped and the names
  // sorted. Never blocks; touches no server.
  MultiLock(Client& client, std::vector<std::string> names, LeaseOptions lease = {});
  ~MultiLock();  // releases holds still taken through lock() (noexcept)

  MultiLock(const MultiLock&) = delete;
  MultiLock& operator=(const MultiLock&) = delete;

  // acquire(wait, stop)
  //
  // Takes every lock of the set at once, waiting as WaitOptions says: woken by a release of any
  // of them, and in any case rechecking when the first held lock's TTL ends or after
  // recheck_interval. Returns the Lease (renewed as a whole; lost as soon as any one of the
  // locks is found gone or taken over). Errors as Mutex::acquire (busy, timeout, cancelled,
  // wrong_type when any lock key holds another type, connection...).
  Result<Lease> acquire(WaitOptions wait = {}, std::stop_token stop = {});

  // async_acquire(): acquire() without blocking; `done` runs on the event loop (see Client).
  void async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done,
                     std::stop_token stop = {});

  // tokens(lease)
  //
  // The fencing token of each lock of the set, in names() order, read from the servers' fence
  // counters (one round trip). Each counter is read only where its lock key still holds this
  // lease's owner (a counter moves only when its lock is taken), so a lease that expired on the
  // server before the client noticed gets lock_lost, never the next holder's token. Errors:
  // lock_lost (the lease is not held, or a key no longer holds it), connection, timeout,
  // protocol, called_from_event_loop.
  Result<std::vector<FencingToken>> tokens(const Lease& lease) const;

  // --- Standard Lockable / TimedLockable members (as Mutex) ----------------------------------
  void lock();
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return timed_try(detail::clamp_ms(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return timed_try(detail::clamp_until_ms(t));
  }
  void unlock() noexcept;

  // --- State of the calling thread's hold (taken through lock()/try_lock*) -------------------
  bool owns_lock() const noexcept;
  // The token of the calling thread's current (or most recent) hold: the first lock's token.
  FencingToken fencing_token() const noexcept;
  bool lost() const noexcept;
  milliseconds remaining() const noexcept;
  Error last_error() const;

  // The names, sorted and deduplicated.
  const std::vector<std::string>& names() const noexcept { return names_; }
  // The lock keys (prefix + "{" + name + "}"), in names() order.
  const std::vector<std::string>& keys() const noexcept { return keys_; }

 private:
  friend struct detail::MultiLockAccess;  // tests force the ordered path on standalone
  bool timed_try(milliseconds d);
  detail::AcquireRequest request(WaitOptions wait) const;
  // True when the set must be taken group by group (Cluster, keys across slots).
  bool ordered() const noexcept;

  std::shared_ptr<detail::ClientCore> core_;
  std::vector<std::string> names_;
  std::vector<std::string> keys_;
  std::string display_;  // "a,b,c"
  std::string queue_key_;
  std::shared_ptr<const detail::ScriptAttemptSpec> spec_;
  std::shared_ptr<const detail::OrderedMultiSpec> ordered_spec_;
  bool single_slot_ = true;     // every key in one Cluster slot
  bool force_ordered_ = false;  // tests: the ordered path even on standalone
  std::unique_ptr<detail::ThreadHolds> holds_;
};

}  // namespace dlock
