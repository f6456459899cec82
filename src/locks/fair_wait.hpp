// Waiting for a FairLock. Unlike Mutex (acquire_op.hpp) there is no process-local queue: every
// waiter holds its own place in the Redis queue (P{N}:queue), with the lease TTL a release needs
// to hand it the lock (P{N}:grant). A release gives the lock straight to the head of the queue
// and tells it on its process's channel: 'granted <fencing token> <waiter id>'. Nobody else is
// woken, and the head sends nothing: the message is its acquisition.
//
// Channels: one per process and lock, P{N}:ch:<process> (<process> is the owner token's part
// between '@' and the last ':', so the scripts derive it from a waiter id; fair_channel_of). Each
// FairLock object subscribes it the first time one of its waits queues, and keeps it until the
// object is destroyed (FairChannel); its waits register there by waiter id. So a FairLock used
// over and over costs no SUBSCRIBE/UNSUBSCRIBE per wait.
//
// One wait, on the loop thread:
//   1. one try: when the FairLock's channel is already subscribed it also joins the queue,
//      otherwise it does not (an uncontended first use costs one round trip, no subscription);
//   2. when busy and the caller may wait: (subscribe the channel and await the server's
//      confirmation, then) try again, now joining the queue (subscribe first, then try: a
//      release between the two cannot be missed);
//   3. sleep until a message for this waiter, or the next try is due: every waiter_ttl / 3
//      (which renews its place), for the head also when the holder's TTL ends and after
//      WaitOptions::recheck_interval, for the waiter behind the head when the holder's TTL
//      ends (the head may have left meanwhile) or, while the lock is free and the head slow to
//      take it, when that head's place expires; always bounded by the caller's deadline.
//      'granted' ends the wait with the lease; 'released' (the lock became free without a
//      handover: the head's stored lease was missing, a forced unlock, an expired holder's place
//      purged) makes the waiter try at once;
//   4. a 'granted' message lost (the subscriber connection dropped) is recovered by the next
//      try, which finds the lock key holding the waiter's own token (fair_acquire.lua answers
//      "acquired" with that handover's token);
//   5. a wait that ends without the lock (timeout, stop_token, shutdown, an error) leaves the
//      queue with fair_dequeue, which also drops the lock if a try whose reply never came took it
//      or a release handed it over just then (and hands it on to the next live waiter);
//   6. an acquisition that reaches the waiter after its lease's validity ended (a try's reply or
//      a 'granted' message, late because the process was paused or the link was slow) is none:
//      another waiter may hold the lock by now. It is released again (fair_release: compared by
//      owner token, handed on), then the wait goes on with a fresh try that queues it anew; a
//      one-try acquire reports busy (tests/integration/late_reply_test.cpp).
//
// Lease validity after a handover is counted from the send time of a try known to have run
// before the release's SET (the last try answered "busy"): conservative, by at most the time
// the waiter waited since that try (<= waiter_ttl / 3, or its recheck interval).
//
// Replies of fair_acquire.lua follow the acquire convention of every kind ({1, token} /
// {0, hint, position} / {-1, type}); see that script.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

#include "dlock/lease.hpp"
#include "dlock/options.hpp"
#include "dlock/result.hpp"
#include "renewal/lease_record.hpp"

namespace dlock::detail {

class ClientCore;
class FairChannel;

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
  std::string grant_key;       // P{N}:grant
  std::string channel_prefix;  // P{N}:ch:   (a waiter's channel: prefix + fair_channel_of(id))
  std::string what;            // "FairLock 'orders' on 127.0.0.1:6379", for messages
  LeaseOptions lease;
  milliseconds waiter_ttl{5000};
  // Renew (mutex_renew: the same string layout) and release (fair_release); shared by every
  // lease of the lock.
  std::shared_ptr<const HoldScripts> hold;
  // This FairLock object's subscription to P{N}:ch:<process>, shared by its waits (used on the
  // loop thread only).
  std::shared_ptr<FairChannel> channel;

  // How often a waiting waiter re-tries, renewing its place: a third of its TTL.
  milliseconds refresh_interval() const { return std::max(milliseconds(1), waiter_ttl / 3); }
};

// The delay until the next try after a busy reply (pure; unit-tested).
//   position      the waiter's place: 0 head, 1 next, 2 further back, -1 not queued
//   hint_ms       the script's hint: the holder's PTTL for the head; for position 1 the same,
//                 or the time left to the head's place when the lock is free; -1 none
//   recheck       WaitOptions::recheck_interval, already jittered (only the head uses it)
//   refresh_left  time until the waiter's place must be renewed
// Never less than 1 ms.
milliseconds fair_retry_delay(int position, long long hint_ms, milliseconds recheck, milliseconds refresh_left);

// The part of a waiter id (an owner token "<hex>@<process>:<unix ms>") that names its channel:
// "<process>"; the whole id when it has another form. The scripts apply the same rule
// (channel_of in src/scripts/fair_*.lua). Pure; unit-tested.
std::string fair_channel_of(std::string_view waiter_id);

// A parsed message on a FairLock channel: 'granted <fencing token> <waiter id>' or
// 'released <waiter id>'. Pure; unit-tested.
struct FairMessage {
  enum class Kind { granted, released, other } kind = Kind::other;
  std::uint64_t token = 0;   // granted only
  std::string_view waiter;   // empty for other
};
FairMessage parse_fair_message(std::string_view payload);

// Builds the FairLock object's channel holder (nothing is sent until a wait queues).
std::shared_ptr<FairChannel> make_fair_channel(const std::shared_ptr<ClientCore>& core, std::string channel);
// Called by ~FairLock (any thread): the channel is unsubscribed once its last wait has ended.
void retire_fair_channel(const std::shared_ptr<ClientCore>& core, std::shared_ptr<FairChannel> channel);

using FairDone = std::function<void(Result<Lease>)>;

// Any thread. `done` runs on the loop thread, exactly once.
// `on_wait` (may be empty): called on the loop thread when the wait starts sleeping in the queue
// (as AcquireRequest::on_wait: a blocking acquire parks its caller's polling).
void start_fair_acquire(const std::shared_ptr<ClientCore>& core, std::shared_ptr<const FairSpec> spec, WaitOptions wait,
                        FairDone done, std::stop_token stop, std::function<void()> on_wait = {});

// Blocking form: rejects calls from the loop thread (they would deadlock).
Result<Lease> fair_acquire_blocking(const std::shared_ptr<ClientCore>& core, std::shared_ptr<const FairSpec> spec,
                                    WaitOptions wait, std::stop_token stop);

}  // namespace dlock::detail
