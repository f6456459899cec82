// Waiting for a FairLock. Unlike Mutex (acquire_op.hpp) there is no process-local queue: every
// waiter holds its own place in the Redis queue (P{N}:queue) and listens on its own channel
// (P{N}:ch:<waiter id>), so a release wakes the head of the queue and nobody else.
//
// One wait, on the loop thread:
//   1. one try without queueing (the uncontended case costs one round trip, no subscription);
//   2. when busy and the caller may wait: subscribe to its own channel and await the server's
//      confirmation, then try again, now joining the queue (subscribe first, then try: a release
//      between the two cannot be missed);
//   3. sleep until a notification on its channel, or the next try is due: every waiter_ttl / 3
//      (which renews its place), for the head also when the holder's TTL ends and after
//      WaitOptions::recheck_interval, for the waiter behind a head that is slow to take a free
//      lock when that head's place expires; always bounded by the caller's deadline;
//   4. a wait that ends without the lock (timeout, stop_token, shutdown, an error) leaves the
//      queue with fair_dequeue, which also drops the lock if a try whose reply never came took it.
//
// Replies of fair_acquire.lua follow the acquire convention of every kind ({1, token} /
// {0, hint, position} / {-1, type}); see that script.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "dlock/lease.hpp"
#include "dlock/options.hpp"
#include "dlock/result.hpp"
#include "renewal/lease_record.hpp"

namespace dlock::detail {

class ClientCore;

namespace scripts {
// src/scripts/fair_*.lua, embedded by the build.
extern const Script fair_acquire;
extern const Script fair_release;
extern const Script fair_dequeue;
extern const Script fair_force_unlock;
}  // namespace scripts

// Everything about one FairLock that its waits share. Immutable once built.
struct FairSpec {
  std::string name;
  std::string key;             // P{N}
  std::string fence_key;       // P{N}:fence
  std::string queue_key;       // P{N}:queue
  std::string timeouts_key;    // P{N}:timeouts
  std::string channel_prefix;  // P{N}:ch:   (a waiter's channel: prefix + its id)
  std::string what;            // "FairLock 'orders' on 127.0.0.1:6379", for messages
  LeaseOptions lease;
  milliseconds waiter_ttl{5000};
  // Renew (mutex_renew: the same string layout) and release (fair_release); shared by every
  // lease of the lock.
  std::shared_ptr<const HoldScripts> hold;

  // How often a waiting waiter re-tries, renewing its place: a third of its TTL.
  milliseconds refresh_interval() const { return std::max(milliseconds(1), waiter_ttl / 3); }
};

// The delay until the next try after a busy reply (pure; unit-tested).
//   position      the waiter's place: 0 head, 1 next, 2 further back, -1 not queued
//   hint_ms       the script's hint: the holder's PTTL for the head; for position 1 the time
//                 left to the head's place when the lock is free; -1 none
//   recheck       WaitOptions::recheck_interval, already jittered (only the head uses it)
//   refresh_left  time until the waiter's place must be renewed
// Never less than 1 ms.
milliseconds fair_retry_delay(int position, long long hint_ms, milliseconds recheck, milliseconds refresh_left);

using FairDone = std::function<void(Result<Lease>)>;

// Any thread. `done` runs on the loop thread, exactly once.
void start_fair_acquire(const std::shared_ptr<ClientCore>& core, std::shared_ptr<const FairSpec> spec, WaitOptions wait,
                        FairDone done, std::stop_token stop);

// Blocking form: rejects calls from the loop thread (they would deadlock).
Result<Lease> fair_acquire_blocking(const std::shared_ptr<ClientCore>& core, std::shared_ptr<const FairSpec> spec,
                                    WaitOptions wait, std::stop_token stop);

}  // namespace dlock::detail
