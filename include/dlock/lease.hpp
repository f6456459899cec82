// dlock/lease.hpp — one acquisition of a lock: its token, its validity, and its end.
//
// A Lease is what an acquisition returns. It is a move-only handle to a small record that the
// Client's watchdog renews (LeaseMode::watchdog) or merely watches (LeaseMode::fixed_ttl).
// Destroying a Lease releases the lock (noexcept; blocks as release() does).
//
// Loss: a lease is *lost* when the watchdog finds the key gone or holding another token, or when
// its validity runs out on this machine's clock (CLOCK_BOOTTIME) without a successful renewal.
// Either way LeaseEvents::on_lost runs exactly once and lost() turns true. Transient renewal
// errors are retried until the validity truly ends; they never stop renewal silently.
//
// Not guaranteed: that nobody else holds the lock while lost() is still false. A process paused
// past its lease, or a Redis failover that loses the key, can let another client in before this
// one learns of it. Pass token() to the resource and let it reject stale writes (fencing.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dlock/fencing.hpp"
#include "dlock/options.hpp"
#include "dlock/result.hpp"

namespace dlock {

namespace detail {
class LeaseRecord;
}

class Lease {
 public:
  Lease() noexcept = default;
  explicit Lease(std::shared_ptr<detail::LeaseRecord> rec) noexcept;
  Lease(Lease&&) noexcept = default;
  // Releases the lease held before (noexcept), then takes over `other`'s.
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  // True when this handle refers to an acquisition (held, lost or released).
  explicit operator bool() const noexcept { return rec_ != nullptr; }

  // held(): acquired, not released, not known to be lost, and its validity (remaining()) not
  // run out. Never blocks. Not a guarantee that the key is still there: it may be deleted or
  // expire on the server at any moment (use the fencing token where it matters).
  bool held() const noexcept;
  // lost(): the watchdog found the lock gone, or its validity ran out (also when the watchdog
  // has not got round to reporting it yet, as just after a resume; on_lost follows).
  // A release() in that moment may still succeed (the key outlives the validity by the drift
  // allowance); lost() and loss_reason() then read false and none again. Never blocks.
  bool lost() const noexcept;
  std::optional<LossReason> loss_reason() const noexcept;

  const std::string& name() const noexcept;
  // The owner token stored in Redis: "<32 hex digits>@<host>:<pid>:<unix ms when taken>".
  // The random part (128 bits from the kernel's CSPRNG) makes it unique and unguessable.
  const std::string& owner() const noexcept;
  FencingToken token() const noexcept;
  // Validity left on this machine's clock, already reduced by the drift allowance. Zero when
  // lost or released. Never blocks.
  milliseconds remaining() const noexcept;

  // extend(ttl)
  //
  // Sets the key's TTL to `ttl` from now if this owner still holds it; the watchdog then uses
  // `ttl` for later renewals. Blocks for one round trip; after a connection error or a timeout
  // it is sent again, as release() is. Errors: not_owner (the lease is lost; on_lost runs),
  // connection, timeout, invalid_argument (ttl <= 0, or a ttl that leaves no validity after
  // the lease's drift allowance or none to renew in: refused before anything is sent, so the
  // key and the lease stay as they were). The drift allowance after extend() is the one chosen
  // in LeaseOptions, or else the new TTL's default (ttl / 100 + 2 ms). Also server (READONLY,
  // BUSY, LOADING..., or a script error) and auth. While the extension is out, remaining()
  // counts to the earlier of the old and the new end; an error reply with which the server
  // refused it before running it (READONLY, BUSY, LOADING, MASTERDOWN...) restores the old end.
  // NOT guaranteed: after an unknown outcome, or a script's own error, a shorter extension may
  // have run, so its end stays the lease's end (on_lost then) though the key may live on. With
  // two extensions of one hold out at once (two threads; two takes of one shared hold are one
  // hold), a refused one restores nothing while the other is out, and when both are refused
  // the lease may keep the end of one of them and, unless a renewal is answered before it,
  // end there (on_lost), though neither ran.
  Result<void> extend(milliseconds ttl);

  // release()
  //
  // Stops renewal first (so no renewal can outlive it), then deletes the key if this owner
  // still holds it and publishes a release notification. Blocks for one round trip. After a
  // connection error or a timeout (its outcome unknown) the release is sent again once the
  // connection is back, for up to ClientOptions::reconnect.max + connect_timeout (5 s by
  // default) after the first such error, each try waiting at most command_timeout: a blip
  // costs a release a few milliseconds, an unreachable server blocks it that long. A repeated
  // release of the same lease is harmless and reports success. Errors: lock_lost (the lock was
  // no longer ours: someone else may have held it in the meantime), connection/timeout (still
  // unknown after the retries; the key expires at its TTL), shutdown (the Client is gone and
  // the key was left to its TTL), called_from_event_loop (sent, but its outcome not awaited).
  // While the Client shuts down on another thread (~Client), the shutdown releases every lease
  // still held: this call then waits for that, up to ClientOptions::shutdown_timeout, and
  // returns its outcome: success when the key was deleted (a Redlock: on its home node),
  // lock_lost when it was no longer ours, shutdown when the release got no answer. Called from
  // an event-loop thread then, it leaves the lease to the shutdown and returns
  // called_from_event_loop. A release() from an event-loop thread (a callback, or a Lease
  // destroyed there) is sent but cannot wait: it returns called_from_event_loop, and if its
  // reply finds the lock lost, on_lost runs (nobody else would be told); async_release()
  // gives a callback the outcome instead.
  // If release() is the first to find the lease lost, it returns lock_lost and on_lost does
  // not run (the caller is told directly).
  // Not guaranteed: a retried release that finds the lock neither held nor marked as released
  // by this lease reports lock_lost, also when its first try did release it and another owner
  // took and released the lock before the retry (Mutex, FairLock, MultiLock and Redlock
  // remember only their last releaser). From Redis alone that cannot be told apart from a key
  // lost in a restart or failover, so it is reported: a false alarm, never a missed loss.
  Result<void> release() noexcept;

  // async_release(done)
  //
  // release() without blocking: the same release, sent again while its outcome is unknown as
  // release() does, and `done` gets the outcome release() would return (success, lock_lost,
  // connection/timeout after the retries, a server error, shutdown). `done` runs on the event
  // loop (see Client) and must not block; when the outcome is known without asking Redis (an
  // empty, released or lost Lease, a Client shut down) it runs at once on the calling thread,
  // before async_release returns. A lock that async_release finds lost is reported to `done`
  // only (on_lost does not run), as release() reports it to its caller. A Lease released this
  // way stays valid: its destructor and later releases report success at once, without waiting
  // for the release in flight. Called on an event-loop thread it works as elsewhere (release()
  // there returns called_from_event_loop). Once the Client shuts down (~Client on another
  // thread), its shutdown releases the leases still held: `done` gets that release's outcome
  // at once when it is over, and shutdown while it is still under way (release() would wait).
  // Not guaranteed: everything release() does not guarantee, the same way.
  void async_release(std::function<void(Result<void>)> done);

  // For lock implementations; not part of the stable API.
  const std::shared_ptr<detail::LeaseRecord>& record() const noexcept { return rec_; }

 private:
  std::shared_ptr<detail::LeaseRecord> rec_;
};

}  // namespace dlock
