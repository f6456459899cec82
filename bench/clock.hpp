// bench/clock.hpp — the one clock every measurement uses: CLOCK_MONOTONIC in nanoseconds.
//
// CLOCK_MONOTONIC is system-wide, so timestamps taken in different processes (dlock-bench's
// forked workers, the Python and Node peer drivers: time.monotonic_ns(), process.hrtime) are
// directly comparable. That is what makes cross-process handoff latency measurable.
#pragma once

#include <sys/prctl.h>
#include <time.h>

#include <cerrno>
#include <cstdint>

namespace bench {

inline std::int64_t now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline double seconds_between(std::int64_t from_ns, std::int64_t to_ns) noexcept {
  return static_cast<double>(to_ns - from_ns) / 1e9;
}

// Sleeps until the absolute CLOCK_MONOTONIC time `until_ns`. Used for the 1 ms hold of the
// contended scenario: sleeping (not spinning) leaves the 2 cores to Redis and the other workers.
inline void sleep_until_ns(std::int64_t until_ns) noexcept {
  timespec ts{};
  ts.tv_sec = until_ns / 1'000'000'000;
  ts.tv_nsec = until_ns % 1'000'000'000;
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// The kernel rounds sleeps of this thread up by its timer slack (50 us by default); 1 ns makes
// a 1 ms hold last about 1 ms rather than 1.05 ms.
inline void tighten_timer_slack() noexcept { ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); }

}  // namespace bench
