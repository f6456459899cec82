// bench/watchdog.hpp — scenario 4: one dlock::Client holds many locks (default 10,000) with
// the default watchdog lease (TTL 30 s, renewed every 10 s) for a bounded time.
//
//   renewals/s     EVALSHA calls the server counted in the hold window / window (this Client is
//                  the only one issuing commands then, and it only renews)
//   CPU            getrusage() user+system time of this process over the window / window, as a
//                  percentage of one core (the main thread sleeps: it is the Client's loop)
//   memory/lock    resident set size (/proc/self/statm) after acquiring minus before creating
//                  the Mutex objects, / locks: what one held lock costs the application
//                  (Mutex + Lease + the Client's record of it). Each repeat runs in a freshly
//                  forked process, so no repeat reuses heap that an earlier one freed.
#pragma once

#include <string>

namespace bench {

struct WatchdogConfig {
  std::string url;
  int locks = 10000;
  double hold_seconds = 60;
};

struct WatchdogResult {
  double renewals_per_second = 0;
  double renewals_per_lock = 0;      // in the window
  double cpu_percent_of_core = 0;
  double bytes_per_lock = 0;
  double mutex_bytes_per_lock = 0;   // of which the Mutex objects alone (before acquiring)
  double acquire_seconds = 0;        // time to take all the locks
  double window_seconds = 0;
  unsigned long long lost = 0;       // leases lost during the window (should be 0)
};

// Runs in a child process (fork, then a Client of its own); throws std::runtime_error when it
// fails.
WatchdogResult watchdog_run(const WatchdogConfig& cfg);

}  // namespace bench
