// How long a per-release marker lives (ReentrantMutex latches, SharedMutex's and Semaphore's
// P{N}:released): long enough for Lease::release()'s one retry, derived from the Client's options.
#include "locks/release_memory.hpp"

#include <gtest/gtest.h>

#include "dlock/clock.hpp"

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;

TEST(ReleaseMemory, CoversARetryAfterTimeoutAndReconnect) {
  ClientOptions o;  // command 3 s, connect 3 s, reconnect backoff up to 2 s
  EXPECT_EQ(release_memory(o), 12s);
  o.command_timeout = 500ms;
  o.connect_timeout = 500ms;
  o.reconnect.max = 200ms;
  EXPECT_EQ(release_memory(o), 2700ms);
}

TEST(ReleaseMemory, IsClampedToTwoSecondsAndOneDay) {
  ClientOptions o;
  o.command_timeout = 10ms;
  o.connect_timeout = 10ms;
  o.reconnect.max = 10ms;
  EXPECT_EQ(release_memory(o), 2s);
  o.command_timeout = dlock::max_duration;
  o.connect_timeout = dlock::max_duration;
  o.reconnect.max = dlock::max_duration;
  EXPECT_EQ(release_memory(o), 24h);
}

}  // namespace
}  // namespace dlock::detail
