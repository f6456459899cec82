// dlock::max_duration and detail::clamp_ms: how the timed lock members (try_lock_for(),
// try_lock_until()) turn a caller's duration of any type into milliseconds without overflow.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "dlock/clock.hpp"

namespace {

using namespace std::chrono_literals;

TEST(MaxDuration, ClampToMillisecondsSaturatesAndRoundsUp) {
  using dlock::detail::clamp_ms;
  EXPECT_EQ(clamp_ms(std::chrono::hours::max()), dlock::max_duration);
  EXPECT_EQ(clamp_ms(std::chrono::nanoseconds::max()), dlock::max_duration);
  EXPECT_EQ(clamp_ms(std::chrono::hours::min()), 0ms);
  EXPECT_EQ(clamp_ms(std::chrono::duration<double>(1e300)), dlock::max_duration);
  EXPECT_EQ(clamp_ms(std::chrono::duration<double>(std::nan(""))), 0ms);
  EXPECT_EQ(clamp_ms(std::chrono::microseconds(1)), 1ms);  // rounded up
  EXPECT_EQ(clamp_ms(std::chrono::microseconds(1500)), 2ms);
  EXPECT_EQ(clamp_ms(std::chrono::seconds(3)), 3000ms);
  EXPECT_EQ(clamp_ms(dlock::max_duration), dlock::max_duration);
}

// try_lock_until()'s conversion: any time point of any clock, the ends included, without
// overflow (UBSan checks the arithmetic in the sanitizer builds).
TEST(MaxDuration, ClampUntilHandlesTheClocksEnds) {
  using dlock::detail::clamp_until_ms;
  using sys_hours = std::chrono::time_point<std::chrono::system_clock, std::chrono::hours>;
  EXPECT_EQ(clamp_until_ms(sys_hours::max()), dlock::max_duration);
  EXPECT_EQ(clamp_until_ms(sys_hours::min()), 0ms);
  EXPECT_EQ(clamp_until_ms(std::chrono::steady_clock::time_point::max()), dlock::max_duration);
  EXPECT_EQ(clamp_until_ms(std::chrono::steady_clock::time_point::min()), 0ms);
  EXPECT_EQ(clamp_until_ms(std::chrono::system_clock::now() - 1s), 0ms);
  const auto in_2s = clamp_until_ms(std::chrono::steady_clock::now() + 2s);
  EXPECT_GT(in_2s, 1900ms);
  EXPECT_LE(in_2s, 2000ms);
}

TEST(MaxDuration, IsAboutACenturyAndFitsTheClocks) {
  EXPECT_EQ(dlock::max_duration, std::chrono::hours(24 * 365 * 100));
  // now + max_duration + max_duration must fit a nanosecond clock counted from boot (WAIT's
  // deadline: now + ack timeout + command timeout), with decades of uptime to spare.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(dlock::max_duration);
  const auto uptime = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::hours(24 * 365 * 50));
  EXPECT_LT(ns.count(), (std::chrono::nanoseconds::max().count() - uptime.count()) / 2);
}

}  // namespace
