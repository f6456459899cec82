// dlock/clock.hpp — the clock leases are measured on.
//
// Redis keeps expiring keys while a client machine is suspended, so a lease's validity must be
// measured on a clock that also counts through suspend. On Linux that is CLOCK_BOOTTIME;
// std::chrono::steady_clock (CLOCK_MONOTONIC) stops during suspend and would let a resumed
// holder believe it still holds a lock that expired long ago.
#pragma once

#include <chrono>

namespace dlock {

// A monotonic clock that keeps counting while the machine is suspended (CLOCK_BOOTTIME).
struct BootClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<BootClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept;
};

}  // namespace dlock
