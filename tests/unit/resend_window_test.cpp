// ResendWindow: the schedule of tries for an idempotent command whose outcome is unknown.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "util/resend_window.hpp"

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

ClientOptions window_of(ms reconnect_max, ms connect_timeout) {
  ClientOptions o;
  o.reconnect.max = reconnect_max;
  o.connect_timeout = connect_timeout;
  return o;
}

TEST(ResendWindow, PausesDoubleFromFiveToAHundredMilliseconds) {
  ResendWindow w(window_of(2000ms, 3000ms));
  BootClock::time_point t{};
  std::vector<ms> seen;
  for (int i = 0; i < 8; ++i) {
    auto p = w.next_pause(t);
    ASSERT_TRUE(p.has_value()) << "closed after " << i << " tries";
    seen.push_back(std::chrono::duration_cast<ms>(*p));
    t += *p;
  }
  EXPECT_EQ(seen, (std::vector<ms>{5ms, 10ms, 20ms, 40ms, 80ms, 100ms, 100ms, 100ms}));
}

TEST(ResendWindow, ClosesReconnectMaxPlusConnectTimeoutAfterTheFirstFailure) {
  ResendWindow w(window_of(200ms, 300ms));
  const BootClock::time_point start{};
  BootClock::time_point t = start;
  BootClock::duration slept{};
  int tries = 0;
  while (auto p = w.next_pause(t)) {
    t += *p + 1ms;  // each try itself takes a moment
    slept += *p;
    ASSERT_LT(++tries, 100) << "the window never closed";
  }
  // The last pause is cut at the window's end; the next call finds it closed.
  EXPECT_GE(t - start, 500ms);
  EXPECT_LE(t - start, 500ms + 1ms);
  EXPECT_FALSE(w.next_pause(t + 1h).has_value());
}

TEST(ResendWindow, AWindowThatEndsBeforeThePauseShortensIt) {
  ResendWindow w(window_of(0ms, 3ms));
  const BootClock::time_point t{};
  auto p = w.next_pause(t);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, BootClock::duration(3ms));
  EXPECT_FALSE(w.next_pause(t + 3ms).has_value());
}

}  // namespace
}  // namespace dlock::detail
