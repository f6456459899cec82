// Reentrant holds: one owner's hold of one ReentrantMutex, shared by every Lease taken on it.
//
// In Redis a hold is one hash field, owner -> count, with one TTL for the whole hash. In the
// Client it is one ReentrantHold:
//
//   ReentrantHold ── record ──────────► the ONE LeaseRecord the watchdog renews for the hold
//        ▲                               (never handed out; its loss fans out to every take)
//        │ kept alive by
//   take LeaseRecord (one per acquisition, the Lease's record; never in the watchdog)
//        release = decrement this take (idempotent through a per-take latch key)
//
// So a re-take costs one round trip and adds nothing to the watchdog, however deep the nesting;
// Leases may be released in any order (each release decrements; the last one frees the lock);
// a loss found by the hold's renewal is reported to every Lease of the hold. The hold's record
// leaves the watchdog when the release of its last take is claimed, whatever that release's
// outcome (or when the last take's record is destroyed, or its renewal finds the hold gone,
// whichever comes first).
//
// Holds are found by (Client, key, owner) in one process-wide registry, so two ReentrantMutex
// objects of one Client used by one owner share the hold, as they share the hash field.
#pragma once

#include <memory>
#include <string>

#include "dlock/lease.hpp"
#include "locks/acquire_op.hpp"

namespace dlock::detail {

class ClientCore;

// What differs between the dlock layout of a reentrant lock and the Redisson-compatible one.
struct ReentrantLayout {
  std::string name;          // the lock's name: for messages and Lease::name()
  std::string key;           // P{N}, or N in Redisson mode
  std::string fence_key;     // P{N}:fence; empty in Redisson mode (no fencing token)
  std::string channel;       // P{N}:ch, or redisson_lock__channel:{N} (:N when N has a '{')
  std::string message;       // published by the last release: "released", or Redisson's "0"
  // + take id = a take's release latch: P{N}:rel:, or redisson_unlock_latch:{N}: (:N: when N
  // has a '{')
  std::string latch_prefix;
  bool fencing() const noexcept { return !fence_key.empty(); }
};

// One try at taking `layout` for `owner` (one script round trip). Runs on the loop thread as
// AcquireRequest::attempt requires; an acquired try joins the owner's hold, or starts one.
AttemptFn reentrant_attempt(std::shared_ptr<ClientCore> core, std::shared_ptr<const ReentrantLayout> layout,
                            std::string owner, LeaseOptions lease);

// Any thread: true while `owner` has a hold of `key` through this Client that is not known to be
// lost. A re-take then tries once without joining the process-local wait queue: queued behind a
// waiter of this process it would wait for its own release.
bool reentrant_hold_live(const ClientCore& core, const std::string& key, const std::string& owner);

// A take's release was claimed (held -> releasing), on any thread: when it was the hold's last
// unreleased take, the hold ends (leaves the watchdog). No-op for any other record.
void reentrant_take_released(const std::shared_ptr<LeaseRecord>& take);

// Validity left of the hold a ReentrantMutex lease belongs to (zero when it is not held).
milliseconds reentrant_hold_remaining(const Lease& lease) noexcept;

// A new take id (16 hex digits), unique across processes and threads: names the take's release
// latch P{N}:rel:<id>.
std::string new_take_id();

}  // namespace dlock::detail
