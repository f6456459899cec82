// bench/uncontended.hpp — scenario 2: dlock acquire+release pairs per second on distinct keys,
// with N caller threads sharing one dlock::Client (default ClientOptions).
#pragma once

#include <string>

#include "commandstats.hpp"

namespace bench {

enum class AcquireStyle {
  waiting,  // Mutex::acquire() with default WaitOptions: what lock() does
  try_once, // Mutex::acquire({timeout 0}): one attempt, no wait machinery (informational)
};

struct UncontendedResult {
  double pairs_per_second = 0;
  double commands_per_pair = 0;      // client-issued (see commandstats.hpp)
  CommandCounts commands;            // the window's commandstats delta
  unsigned long long errors = 0;
};

UncontendedResult uncontended_pairs(const std::string& url, int threads, AcquireStyle style, double warmup,
                                    double duration);

}  // namespace bench
