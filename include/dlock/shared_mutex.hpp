// dlock/shared_mutex.hpp — dlock::SharedMutex, a read-write lock across processes and machines:
// any number of readers, or one writer.
//
// Redis layout (a public contract), for a lock named N and the prefix P (default "dlock:"):
//   P{N}           hash: field kind = "SharedMutex" (marks the key as this kind) and, while
//                  write-held, field writer = the writer's owner token. The key exists while any
//                  hold exists; its PTTL is the writer's lease, or at least as long as every
//                  reader's. Deleting it (dlock unlock --force) ends every hold, readers' too.
//   P{N}:readers   zset: reader owner token -> expiry of that reader's hold, in server
//                  milliseconds (TIME). Each reader's hold expires on its own: a crashed reader
//                  cannot pin the lock; every script removes expired entries first. The watchdog
//                  renews a reader by moving its score forward.
//   P{N}:wintent   zset: owner token of a writer that is waiting -> expiry of its intent
//                  (server ms). While an unexpired intent exists, new readers wait. A waiting
//                  writer refreshes its intent at every try (at least three times per lease TTL:
//                  the intent lives one lease TTL), withdraws it when it stops waiting, and the
//                  intent of a writer that died expires by itself.
//   P{N}:fence     string: the fencing counter; no TTL, never deleted (as for Mutex).
//   P{N}:released  zset: owner token -> when it released (server ms), so that a retried
//                  release is recognised: the newest 10,000 releases of the last
//                  2 x command_timeout + connect_timeout + reconnect.max + 1 s (12 s with the
//                  default ClientOptions) of the releasing Client.
//   P{N}:ch        pub/sub channel: "released" when a writer leaves or the last reader leaves,
//                  "downgraded" after a downgrade, "withdrawn" when a waiting writer gives up.
// A key of another type, or a P{N} hash without the kind marker, gives errc::wrong_type.
//
// Fencing tokens:
//   * A writer's token is the counter after INCR: it increases strictly across successive
//     writers, exactly like a Mutex's (the writer epoch).
//   * A reader's token is the counter's current value: the epoch of the last writer that
//     acquired before this reader did. Readers of one epoch share it. A resource that applies the
//     one rule of fencing.hpp ("accept token >= highest seen") thereby accepts readers of the
//     current epoch and rejects a reader (say, one that paused past its lease and then acts on
//     what it read) once a newer writer has presented its token. It cannot tell two readers apart.
//   * A downgraded writer keeps its token, which is also the epoch its read hold belongs to.
//
// Fairness and starvation policy — writers first:
//   * A waiting writer registers an intent; from then on new readers wait, readers already in
//     keep their holds, and the writer enters when the last of them leaves. So a stream of
//     readers cannot starve a writer: it waits at most for the holds that existed when it
//     registered. (A try without waiting, try_lock(), registers no intent.)
//   * The price: under a continuous stream of writers, readers may wait as long as writers keep
//     arriving. Writers among themselves are ordered as Mutex waiters are: FIFO among the threads
//     of one process, a race between processes, in which a release that woke waiters of other
//     Clients holds the releasing Client's own next writer back for about two round trips (so
//     Clients take turns rather than the releasing one winning every race; no guarantee).
//   * When a writer leaves, all waiting readers may enter together (every reader is woken).
//
// The standard members make SharedMutex a SharedTimedLockable, so std::unique_lock,
// std::shared_lock and std::lock_guard work with it. As with std::shared_timed_mutex, the thread
// that locked unlocks, and a thread holds it in one mode at a time: lock()/lock_shared() by a
// thread that already holds it throw std::errc::resource_deadlock_would_occur. Code that moves
// between threads uses acquire()/acquire_shared() and the Lease they return.
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
struct ScriptAttemptSpec;
class ThreadHolds;
}  // namespace detail

class SharedMutex {
 public:
  // SharedMutex(client, name, lease)
  //
  // Names follow Mutex's rules (1–512 bytes, no braces or control characters); anything else
  // throws std::system_error(errc::invalid_argument). Never blocks; touches no server.
  SharedMutex(Client& client, std::string name, LeaseOptions lease = {});
  ~SharedMutex();  // releases holds still taken through lock()/lock_shared() (noexcept)

  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  // --- Lease API -----------------------------------------------------------------------------
  // acquire(wait, stop): takes it for writing (exclusive). While waiting, its intent keeps new
  // readers out. Errors as for Mutex::acquire (busy, timeout, cancelled, wrong_type, connection...).
  // Not guaranteed, unlike Mutex: that a timeout or cancellation is reported by the deadline. A
  // writer that stops waiting first withdraws its intent and reports once the server answered
  // that (and the try still in flight), so that readers are not kept out after it returned. On
  // a prompt server that is one round trip; on a stalled one it is up to the command timeout
  // (ClientOptions::command_timeout) past the deadline. A lost connection is reported at once
  // (the withdrawal is then sent again until its outcome is known).
  Result<Lease> acquire(WaitOptions wait = {}, std::stop_token stop = {});
  // acquire_shared(wait, stop): takes it for reading (shared). Waits while a writer holds it or
  // waits for it. The Lease's token is the current writer epoch (see above).
  Result<Lease> acquire_shared(WaitOptions wait = {}, std::stop_token stop = {});

  // The same without blocking; `done` runs on the event loop (see Client).
  void async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop = {});
  void async_acquire_shared(WaitOptions wait, std::function<void(Result<Lease>)> done,
                            std::stop_token stop = {});

  // downgrade(writer)
  //
  // Turns the write hold behind `writer` into a read hold, atomically (there is no moment in
  // which another writer could get in). The Lease stays valid: same owner, same token, renewed
  // by the watchdog and released as a read hold from now on. Waiting readers are woken; new
  // readers may enter unless a writer is waiting. Downgrading a read hold does nothing.
  // Blocks for one round trip. Errors: invalid_argument (not a lease of this SharedMutex),
  // lock_lost (the hold was lost; on_lost runs), connection/timeout (outcome unknown: the hold
  // is a write or a read hold, and a release ends either), called_from_event_loop.
  Result<void> downgrade(Lease& writer);

  // --- Standard Lockable / TimedLockable / SharedTimedLockable members ----------------------
  void lock();
  bool try_lock();
  // try_lock_for()/try_lock_until() may return false after the deadline: see acquire().
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return timed_try(detail::clamp_ms(d), false);
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return timed_try(detail::clamp_until_ms(t), false);
  }
  // Releases the calling thread's exclusive hold. Never throws; outcome in last_error()/lost().
  void unlock() noexcept;

  void lock_shared();
  bool try_lock_shared();
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return timed_try(detail::clamp_ms(d), true);
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& t) {
    return timed_try(detail::clamp_until_ms(t), true);
  }
  // Releases the calling thread's shared hold. Never throws.
  void unlock_shared() noexcept;

  // downgrade(): the calling thread's exclusive hold (from lock()/try_lock*()) becomes its
  // shared hold; the thread then ends it with unlock_shared(). Throws std::system_error:
  // std::errc::operation_not_permitted when the thread holds no exclusive hold, or the error of
  // downgrade(Lease&). With std::unique_lock: lk.release(); m.downgrade();
  // std::shared_lock sl(m, std::adopt_lock);
  void downgrade();

  // --- State of the calling thread's hold (taken through the standard members) -------------
  bool owns_lock() const noexcept;    // holds it exclusively and it is not known to be lost
  bool owns_shared() const noexcept;  // holds it shared and it is not known to be lost
  // Token, loss state and validity of the calling thread's current (or most recent) hold,
  // whichever its mode; last_error(): of its last unlock()/unlock_shared().
  FencingToken fencing_token() const noexcept;
  bool lost() const noexcept;
  milliseconds remaining() const noexcept;
  Error last_error() const;

  const std::string& name() const noexcept { return name_; }
  // The lock's key P{N}; the others are this plus ":readers", ":wintent", ":fence"...
  const std::string& key() const noexcept { return key_; }

 private:
  bool timed_try(milliseconds d, bool shared);
  detail::AcquireRequest write_request(WaitOptions wait, std::shared_ptr<std::string>& owner, bool& intent) const;
  detail::AcquireRequest read_request(WaitOptions wait) const;
  // `on_wait`: see detail::AcquireRequest::on_wait (a blocking acquire parks its caller's polling).
  void start_write(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop,
                   std::function<void()> on_wait = {});

  std::shared_ptr<detail::ClientCore> core_;
  std::string name_;
  std::string key_;
  LeaseOptions lease_;
  std::shared_ptr<const detail::ScriptAttemptSpec> write_spec_;
  std::shared_ptr<const detail::ScriptAttemptSpec> read_spec_;
  std::unique_ptr<detail::ThreadHolds> holds_;
};

}  // namespace dlock
