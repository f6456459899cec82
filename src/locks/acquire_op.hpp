// Waiting for a lock: subscribe first, then try; sleep until a release notification, the
// holder's remaining TTL, or the recheck interval, whichever comes first. Never a busy loop.
//
// Waiters of one process on one lock form a local FIFO (WaitQueue); only its head contends in
// Redis, the others wait their turn. So a lock costs one subscription per process, a release
// wakes one waiter per process rather than all of them, and the threads of one process are
// served in order.
//
// The lock kind is reached only through an Attempt function (one try, one script round trip),
// so every kind that waits this way (Mutex, ReentrantMutex, SharedMutex...) shares this code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/lease.hpp"
#include "dlock/options.hpp"
#include "dlock/result.hpp"
#include "renewal/lease_record.hpp"

namespace dlock::detail {

class ClientCore;

// How many tries in a row acquired but answered after their validity (and given back), with no
// busy answer between, end a wait with errc::invalid_argument: one is a paused process or a
// hiccup, and the next try is made at once; three say the lease TTL is too short for the
// server's round trip. Shared by AcquireOp and FairLock's wait (fair_wait.cpp).
inline constexpr std::uint8_t kLateTriesToGiveUp = 3;

struct Attempt {
  enum class Kind { acquired, busy, failed };
  Kind kind = Kind::failed;
  std::shared_ptr<LeaseRecord> lease;       // acquired
  // busy: the holder's remaining TTL, when it has one. acquired (shared holds, see room_left):
  // when the first of the other holds expires unless renewed, bounding the next waiter's sleep.
  std::optional<milliseconds> holder_ttl;
  Error error;                              // failed
  // acquired, for kinds whose hold is shared (Semaphore): how many more could take it now. When
  // set, the next local waiter tries at once if it is > 0 or a release was announced while this
  // try was in flight, instead of waiting for the next release. Unset (one-holder kinds): waits.
  std::optional<long long> room_left;
  // busy, for requests over several locks (MultiLock): which of the request's channels
  // ({channel, extra_channels...}) belongs to the lock that was busy. Until the next try, only a
  // message on that channel wakes the waiter: a release of a lock it found free cannot help, and
  // an ordered MultiLock's give-back (its momentary hold released) would otherwise wake every
  // other MultiLock waiter over an overlapping set, which gives back in turn, round after round.
  std::optional<std::size_t> busy_channel;
  // busy: the try did acquire, but its answer came after the lease's validity had ended, and
  // the hold was given back (script_attempt.hpp, refuse_late). A wait that sees only such
  // answers, try after try, ends with an error instead of trying for ever (AcquireOp).
  bool late = false;
};

// What the wait tells one try. Only kinds that keep a waiters' roll in Redis (Mutex) read it.
struct TryContext {
  // The Client's id when the try is made by a subscribed waiter (the head of this process's
  // queue, listening on the lock's channel): a busy answer puts it on the roll, so that a
  // release names it. Empty for a one-off try and for the try made before subscribing.
  std::string_view waiter;
  // Other waiters of this Client queue behind this one: if it acquires, the Client keeps a place.
  bool more_waiters = false;
  // The try is made by a subscribed waiter of any kind (`waiter` is set only for kinds with a
  // roll of their own). A MultiLock's such try leaves a shared place on each busy lock's roll.
  bool subscribed = false;
  // How long a place counts unless the waiter tries again (set when `subscribed`).
  milliseconds place_ttl{0};
};

// Runs on the loop thread; starts one try and calls `report` (on the loop thread) with it.
using AttemptFn = std::function<void(const TryContext& ctx, std::function<void(Attempt)> report)>;
using AcquireDone = std::function<void(Result<Lease>)>;

struct AcquireRequest {
  std::string key;      // the lock's key: identifies the process-local wait queue
  std::string channel;  // where releases are published
  std::string what;     // "lock 'orders' on 127.0.0.1:6379", for messages
  WaitOptions wait;
  AttemptFn attempt;
  // More channels whose messages may free the lock (MultiLock: one per lock it takes).
  std::vector<std::string> extra_channels;
  // Keys whose deletion or expiry frees the lock, watched through keyspace notifications when
  // the server publishes them. Empty: `key`.
  std::vector<std::string> watch_keys;
  // Kinds with a waiters' roll (Mutex): a release names the next waiting Client ("released
  // <client id>" on `channel`:<client id>) and only that Client tries. Called on the loop thread
  // with `key` and this Client's id when the queue's last waiter leaves while the Client may
  // still have a place on the roll (it gave up, or acquired with others behind it who then gave
  // up), to give the place back. A plain function: no allocation per acquisition. Null: no roll.
  void (*withdraw)(ClientCore& core, const std::string& key, std::string_view waiter) = nullptr;
  // Only this message on the lock's channels wakes the waiters (keyspace events do not either):
  // a Semaphore's waiters above its limit, for whom no release can make room, only a resize
  // ("resized", sem_set_limit.lua). Null: any message. A string literal (never freed).
  const char* wake_only_on = nullptr;
  // Called on the loop thread whenever the acquisition starts waiting for a release (queued
  // behind another waiter of this process, or a try found the lock busy): a blocking caller
  // stops polling for its result (SyncWait::park). May be empty.
  std::function<void()> on_wait;
};

// Any thread. `done` runs on the loop thread, exactly once.
void start_acquire(const std::shared_ptr<ClientCore>& core, AcquireRequest req, AcquireDone done,
                   std::stop_token stop);

// Blocking form: rejects calls from the loop thread (they would deadlock).
Result<Lease> acquire_blocking(const std::shared_ptr<ClientCore>& core, AcquireRequest req, std::stop_token stop);

// Releases a lease record that nobody will receive (a wait abandoned while its try succeeded);
// `then` runs on the loop thread once the release has been answered.
void release_unwanted(const std::shared_ptr<LeaseRecord>& rec, std::function<void()> then = {});

}  // namespace dlock::detail
