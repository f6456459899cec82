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

}  // namespace bench
