#include <time.h>

#include "dlock/clock.hpp"

namespace dlock {

BootClock::time_point BootClock::now() noexcept {
  timespec ts{};
  // CLOCK_BOOTTIME cannot fail on Linux >= 2.6.39 with a valid pointer.
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

}  // namespace dlock
