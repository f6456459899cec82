// Unit tests of BootAlarm (src/util/boot_alarm.hpp), the watchdog's timer on CLOCK_BOOTTIME.
// What it is for, firing at the resume when its time passed during a suspend, needs a suspend
// and is not tested here; these check that it keeps basic_waitable_timer's semantics, on
// BootClock's time points, with a real io_context.
#include <gtest/gtest.h>

#include <chrono>
#include <system_error>
#include <vector>

#include "util/boot_alarm.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::BootClock;
using dlock::detail::BootAlarm;

// Runs `io` until it has no more work, for at most `limit`.
void run_for(asio::io_context& io, std::chrono::milliseconds limit) {
  io.restart();
  io.run_for(limit);
}

TEST(BootAlarm, FiresAtItsTimeNotBefore) {
  asio::io_context io;
  BootAlarm alarm(io);
  const auto at = BootClock::now() + 50ms;
  alarm.expires_at(at);
  std::error_code got = asio::error::would_block;
  BootClock::time_point fired{};
  alarm.async_wait([&](std::error_code ec) {
    got = ec;
    fired = BootClock::now();
  });
  run_for(io, 5s);
  EXPECT_FALSE(got) << got.message();
  EXPECT_GE(fired, at) << "fired " << std::chrono::duration_cast<std::chrono::microseconds>(at - fired).count()
                       << " us early";
}

TEST(BootAlarm, ATimeAlreadyPastFiresAtOnce) {
  asio::io_context io;
  BootAlarm alarm(io);
  for (const auto at : {BootClock::now() - 1s, BootClock::time_point{}}) {
    alarm.expires_at(at);
    bool fired = false;
    alarm.async_wait([&](std::error_code ec) { fired = !ec; });
    const auto t0 = BootClock::now();
    run_for(io, 5s);
    EXPECT_TRUE(fired);
    EXPECT_LT(BootClock::now() - t0, 1s);
  }
}

// Setting a new time ends the pending wait, as basic_waitable_timer::expires_at does; the new
// wait fires at the new time, and an earlier expiry (not read) does not fire it early.
TEST(BootAlarm, SettingANewTimeEndsThePendingWait) {
  asio::io_context io;
  BootAlarm alarm(io);
  std::vector<std::error_code> first;
  alarm.expires_at(BootClock::now() + 10s);
  alarm.async_wait([&](std::error_code ec) { first.push_back(ec); });
  alarm.expires_at(BootClock::now() - 1ms);  // due now: would make the descriptor readable
  const auto later = BootClock::now() + 80ms;
  alarm.expires_at(later);                   // ... but this clears that expiry
  std::error_code second = asio::error::would_block;
  BootClock::time_point fired{};
  alarm.async_wait([&](std::error_code ec) {
    second = ec;
    fired = BootClock::now();
  });
  run_for(io, 5s);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0], asio::error::operation_aborted);
  EXPECT_FALSE(second) << second.message();
  EXPECT_GE(fired, later);
}

TEST(BootAlarm, CancelEndsTheWaitAndTheAlarmCanBeUsedAgain) {
  asio::io_context io;
  BootAlarm alarm(io);
  alarm.expires_at(BootClock::now() + 10s);
  std::error_code got;
  alarm.async_wait([&](std::error_code ec) { got = ec; });
  alarm.cancel();
  run_for(io, 5s);
  EXPECT_EQ(got, asio::error::operation_aborted);
  // Fired once, it fires again after being set again (the expiry count was read).
  int fired = 0;
  for (int i = 0; i < 3; ++i) {
    alarm.expires_at(BootClock::now() + 5ms);
    alarm.async_wait([&](std::error_code ec) { fired += ec ? 0 : 1; });
    run_for(io, 5s);
  }
  EXPECT_EQ(fired, 3);
}

TEST(BootAlarm, DestroyingItEndsThePendingWait) {
  asio::io_context io;
  std::error_code got;
  {
    BootAlarm alarm(io);
    alarm.expires_at(BootClock::now() + 10s);
    alarm.async_wait([&](std::error_code ec) { got = ec; });
  }
  run_for(io, 5s);
  EXPECT_EQ(got, asio::error::operation_aborted);
}

}  // namespace
