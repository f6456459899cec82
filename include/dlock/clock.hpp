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

// The longest duration dlock takes as given: about 100 years. A wait longer than this is a wait
// without end (WaitOptions::timeout, try_lock_for(), try_lock_until(), Client::ping()); a
// lease TTL, timeout or interval longer than this is refused (errc::invalid_argument). The
// bound keeps clock arithmetic (now + duration, on nanosecond clocks that span 292 years) from
// overflowing.
inline constexpr std::chrono::milliseconds max_duration{std::chrono::hours(24 * 365 * 100)};

namespace detail {
// A caller's duration as whole milliseconds, rounded up, within [0, max_duration]: a negative
// one is 0 (one attempt), a longer one max_duration (converting e.g. hours::max() to
// milliseconds directly would overflow).
template <class Rep, class Period>
constexpr std::chrono::milliseconds clamp_ms(const std::chrono::duration<Rep, Period>& d) {
  using wide = std::chrono::duration<long double, std::milli>;
  const wide w(d);
  if (!(w > wide(0))) return std::chrono::milliseconds(0);  // also NaN
  if (w >= wide(max_duration)) return max_duration;
  return std::chrono::ceil<std::chrono::milliseconds>(w);
}

// The time left until `t` on its clock, as clamp_ms() gives it. Computed in long double: `t -
// Clock::now()` overflows for time points near the clock's ends (time_point::max() of a clock
// counted in hours, time_point::min()).
template <class Clock, class Duration>
std::chrono::milliseconds clamp_until_ms(const std::chrono::time_point<Clock, Duration>& t) {
  using wide = std::chrono::duration<long double, std::milli>;
  return clamp_ms(wide(t.time_since_epoch()) - wide(Clock::now().time_since_epoch()));
}
}  // namespace detail

}  // namespace dlock
