// bench/uncontended.hpp — scenario 2 (Mutex) and 5 (every other kind, kinds.hpp): dlock
// acquire+release pairs per second on distinct keys, with N caller threads sharing one
// dlock::Client (default ClientOptions; Redlock: one per node).
#pragma once

#include <string>

#include "commandstats.hpp"
#include "kinds.hpp"

namespace bench {

enum class AcquireStyle {
  waiting,  // acquire() with default WaitOptions: what lock() does
  try_once, // acquire({timeout 0}): one attempt, no wait machinery (informational)
};

struct UncontendedResult {
  double pairs_per_second = 0;
  double commands_per_pair = 0;      // client-issued (see commandstats.hpp)
  CommandCounts commands;            // the window's commandstats delta
  unsigned long long errors = 0;
};

// `redlock_urls`: the nodes, for LockKind::redlock only.
UncontendedResult uncontended_pairs(const std::string& url, int threads, AcquireStyle style, double warmup,
                                    double duration, LockKind kind = LockKind::mutex,
                                    const std::string& redlock_urls = "");

// The same for an all-asynchronous caller: `loops` chains on Mutexes of one Client, each
// issuing its next async_acquire from its async_release's callback, so every pair runs on the
// Client's event loop and no reply is handed to another thread (node-redlock's callers are
// loops like these, on one Node thread).
UncontendedResult uncontended_async_pairs(const std::string& url, int loops, double warmup, double duration);

}  // namespace bench
