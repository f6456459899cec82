// Waiting for a Redlock: the one implementation behind Redlock::acquire (blocking) and
// Redlock::async_acquire. It runs on the loop thread of the home Client (nodes[0]'s), with a
// timer of that loop for every sleep, so a waiting caller costs no thread:
//
//   take a place in this process's queue of the lock (redlock_turns.hpp); as its head, try on
//   every node (redlock_try); busy → subscribe every node's channel (once for the queue) and try
//   again; then sleep until a release announced by a majority, the holders' smallest remaining
//   TTL, or the recheck interval, whichever comes first. Never a polling loop.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>

#include "dlock/lease.hpp"
#include "dlock/options.hpp"
#include "dlock/result.hpp"
#include "locks/redlock_attempt.hpp"

namespace dlock::detail {

// Any thread. `done` runs exactly once: on the home Client's loop thread, or at once on the
// calling thread when a Client is shut down already. `on_wait` (may be empty) runs on the home
// loop thread, before `done`, whenever the wait starts one of unknown length (queued behind
// another waiter, or sleeping until a release): a blocking caller stops polling for its result.
// A timeout of zero makes one try (busy when held), waited for until its verdict. A wait with a
// deadline, or whose `stop` is requested, ends then even while a try is out; should that try
// win a majority later, its lease is released at once, as nobody will hold it.
void start_redlock_acquire(std::shared_ptr<const RedlockSpec> spec, WaitOptions wait,
                           std::function<void(Result<Lease>)> done, std::stop_token stop,
                           std::function<void()> on_wait = {});

}  // namespace dlock::detail
