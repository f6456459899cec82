// dlock/admin.hpp — inspecting and force-unlocking any lock kind by name, for operators and
// tools (the dlock CLI's status, list, leaks and unlock --force use exactly this).
//
// Both calls read the documented Redis layouts of the kinds (mutex.hpp, reentrant_mutex.hpp,
// fair_lock.hpp, shared_mutex.hpp, semaphore.hpp) in ONE server-side script each, so what they
// see is a consistent snapshot, and times are read on the server's clock (TIME). They take a
// name, not a lock object: they need no hold and create nothing.
//
// How the kind is told from the keys, for a name N and the Client's prefix P:
//   P{N} a string                          mutex, or fair when P{N}:queue (a list) exists
//   P{N} a hash with field kind=SharedMutex rw
//   P{N} a hash with field kind=Semaphore   semaphore (its claim while permits are held)
//   P{N} a hash with a ":fence" field and only integer counts otherwise
//                                          reentrant
//   P{N} absent, P{N}:permits or P{N}:limit semaphore
//   P{N} absent, P{N}:queue                fair (free, with waiters)
//   P{N} absent, P{N}:readers/:wintent     rw (free, a writer intent or a stale reader left)
//   P{N} of any other type or shape        foreign (not a dlock lock; never modified)
// Limits: a FairLock holder with nobody queued is indistinguishable from a Mutex holder (the
// same key); it is reported as mutex. Redisson-mode ReentrantMutex locks live at the bare name,
// outside the prefix, and are not inspected here.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/result.hpp"

namespace dlock {

enum class LockKind { none, mutex, reentrant, fair, rw, semaphore, foreign };

// "none", "mutex", "reentrant", "fair", "rw", "semaphore", "foreign".
std::string_view to_string(LockKind kind) noexcept;

struct LockHolder {
  enum class Mode { exclusive, read, write, permits };
  // The owner as stored: a Mutex/FairLock/SharedMutex owner token, a ReentrantMutex owner
  // identity (hash field), or a Semaphore acquisition's owner token (its permit ids without
  // the "#k" suffix).
  std::string owner;
  Mode mode = Mode::exclusive;
  // Validity left on the server's clock; nullopt: the key has no expiry (it would never be freed).
  std::optional<std::chrono::milliseconds> ttl;
  // ReentrantMutex: the owner's hold count. Semaphore: permits this acquisition holds. Else 1.
  long long count = 1;
  // ReentrantMutex: the hold's fencing token (field ":fence"). Others: nullopt (the counter is
  // LockInfo::fencing_counter; for an exclusive holder that took it through dlock, it is the
  // holder's token).
  std::optional<std::uint64_t> token;
};

struct LockWaiter {
  // fair_queue: a FairLock's queue place. writer_intent: a SharedMutex writer's intent. roll: a
  // Mutex's waiting Client's place on P{N}:waiters, next first (its id is the Client's id, not
  // an owner token; "*" is the place shared by MultiLock waiters).
  enum class Role { fair_queue, writer_intent, roll };
  std::string id;  // the waiter's owner token (roll: see Role)
  Role role = Role::fair_queue;
  // How long its place (or intent) lasts without renewal, on the server's clock. Zero or
  // negative: it has expired (its waiter is gone) and the next script drops it.
  std::chrono::milliseconds ttl{0};
};

struct LockInfo {
  std::string name;
  std::string key;         // P{N}
  LockKind kind = LockKind::none;
  std::string redis_type;  // TYPE of P{N}: "none", "string", "hash", ... (for foreign keys)
  // Live holds: one for a mutex/fair/reentrant owner or a writer, one per reader, one per
  // semaphore acquisition. Empty: free.
  std::vector<LockHolder> holders;
  // Waiters the server knows of, in order: a FairLock's queue (head first; expired places
  // included, with ttl <= 0), a SharedMutex's live writer intents, a held Mutex's live places
  // on its roll (next first; a place is one waiting Client, whatever its number of waiting
  // threads; a free Mutex shows none: its kind is read from the lock key).
  // Other kinds' waiters only subscribe: see subscribers.
  std::vector<LockWaiter> waiters;
  // PUBSUB NUMSUB of P{N}:ch: processes (Clients) waiting on the lock's channel, plus holders
  // that listen for revocation. Threads of one Client count once.
  long long subscribers = 0;
  // P{N}:fence: the last fencing token issued for the name; nullopt when none yet, or when the
  // key holds no counter (below).
  std::optional<std::uint64_t> fencing_counter;
  // Set when P{N}:fence holds no counter (someone wrote it by hand): its value quoted (bytes
  // outside printable ASCII as \xNN, cut after 40), or "a <type>" for a key of another type.
  // Every acquisition of the name then fails with errc::wrong_type until the key is deleted
  // (fencing.hpp). Also set, with fencing_counter, for a counter at the last token, 2^53 - 1,
  // which only readers can still take. nullopt for any other counter, or none.
  std::optional<std::string> fencing_counter_fault;
  // Semaphore: the stored number of permits; nullopt when none is stored yet.
  std::optional<long long> permits_limit;
  // PTTL of P{N} (or P{N}:permits for a semaphore): nullopt when the key has no expiry.
  std::optional<std::chrono::milliseconds> key_ttl;
  // The raw value of a string lock key (a mutex owner token, or anything a foreign client set).
  std::optional<std::string> value;

  bool held() const noexcept { return !holders.empty(); }
};

// inspect(client, name)
//
// What lives under the lock `name` (see above). Blocks for one round trip (the script and
// PUBSUB NUMSUB are pipelined). Errors: invalid_argument (bad name), connection, timeout, auth,
// server, called_from_event_loop, shutdown. Never writes.
Result<LockInfo> inspect(Client& client, std::string_view name);

// async_inspect(client, name, done)
//
// inspect() without blocking: `done` runs once with what inspect() would return, on the
// Client's event loop (see Client: it must not block). A bad name or a shut-down client is
// reported at once, on the calling thread. Callable from the event loop. Never writes. For a
// caller that must stay responsive while the server may be slow (the CLI's status line: a
// stalled server would otherwise hold up its signal handling for a command timeout).
void async_inspect(Client& client, std::string_view name, std::function<void(Result<LockInfo>)> done);

// inspect(client, names): the same for many names, pipelined (every script is sent at once;
// one wait for all). Fails as a whole on the first error. For tools walking many locks.
Result<std::vector<LockInfo>> inspect(Client& client, const std::vector<std::string>& names);

struct ForceUnlockResult {
  LockKind kind = LockKind::none;
  // The holds that were removed (empty: nothing was held; nothing changed).
  std::vector<LockHolder> removed;
  // A FairLock queue's head that was woken (its channel P{N}:ch:<id> got "released").
  std::optional<std::string> woken_head;
};

// force_unlock(client, name)
//
// Removes every hold of the lock `name`, whatever its kind, in one atomic script: the lock key
// (mutex, fair, reentrant, rw: writer and readers) or the permits (semaphore; the stored limit
// stays). When something was removed it publishes "revoked" on P{N}:ch — holders that listen
// for revocation (LeaseOptions::listen_for_revocation) learn at once, the others at their next
// renewal, and every waiter on that channel wakes — and wakes the head of a FairLock queue on
// its own channel (the only waiter a fair release wakes). Queued places and writer intents are
// left alone: they belong to live waiters. Release markers are not set, so an old holder's own
// release reports lock_lost. Errors: wrong_type (a foreign key; nothing is changed),
// invalid_argument, connection, timeout, auth, server.
Result<ForceUnlockResult> force_unlock(Client& client, std::string_view name);

// --- Mutex holds by owner token, for a process other than the one that took them -------------
// (`dlock acquire` prints the owner token; a later `dlock extend` / `dlock release` acts on it.)
// They run the library's own Mutex scripts, so waiters are woken exactly as by
// Lease::release() (sharded pub/sub on Cluster).

enum class OwnedRelease {
  released,          // the key held this owner's token and is gone; waiters were notified
  already_released,  // this owner released it moments ago (a retry); nothing changed
  not_held,          // expired, taken over, force-unlocked or never held by this owner
};

// release_owned(client, name, owner): compare-and-delete of the Mutex `name` for `owner`.
// Blocks for one round trip (two when it was not held: a TYPE tells wrong_type apart).
// Errors: wrong_type (the key is not a Mutex lock), invalid_argument, connection, timeout, auth.
// Not guaranteed: that nobody held the lock meanwhile (fencing tokens tell).
Result<OwnedRelease> release_owned(Client& client, std::string_view name, std::string_view owner);

// extend_owned(client, name, owner, ttl): sets the Mutex key's TTL to `ttl` while `owner` holds
// it; never re-creates it. True when extended, false when not held by `owner`. Blocks like
// release_owned; the same errors, and invalid_argument for ttl <= 0.
Result<bool> extend_owned(Client& client, std::string_view name, std::string_view owner, milliseconds ttl);

}  // namespace dlock
