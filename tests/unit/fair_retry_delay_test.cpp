// Unit tests for dlock::detail::fair_retry_delay (src/locks/fair_wait.hpp): when a FairLock
// waiter tries again after a busy reply.
#include <gtest/gtest.h>

#include <chrono>

#include "locks/fair_wait.hpp"

namespace {

using dlock::detail::fair_retry_delay;
using std::chrono::milliseconds;

constexpr milliseconds recheck{500};
constexpr milliseconds refresh{1600};

// The head waits for the holder's TTL, the recheck interval or its renewal, whichever is first.
TEST(FairRetryDelay, HeadIsBoundedByHolderTtlRecheckAndRefresh) {
  EXPECT_EQ(fair_retry_delay(0, 120, recheck, refresh), milliseconds(121));
  EXPECT_EQ(fair_retry_delay(0, 5000, recheck, refresh), recheck);
  EXPECT_EQ(fair_retry_delay(0, -1, recheck, refresh), recheck);
  EXPECT_EQ(fair_retry_delay(0, -1, milliseconds(10000), refresh), refresh);
  EXPECT_EQ(fair_retry_delay(0, 5000, recheck, milliseconds(40)), milliseconds(40));
}

// Waiters behind the head do not poll at the recheck interval: they wait for their own
// notification and renew their place, so a release costs one try (the head's), not one per waiter.
TEST(FairRetryDelay, WaitersBehindTheHeadOnlyRenewTheirPlace) {
  EXPECT_EQ(fair_retry_delay(1, -1, recheck, refresh), refresh);
  EXPECT_EQ(fair_retry_delay(2, -1, recheck, refresh), refresh);
  EXPECT_EQ(fair_retry_delay(2, 10, recheck, refresh), refresh) << "only positions 0 and 1 get a hint";
}

// The waiter next to a head that has not taken a free lock retries when the head's place expires
// (the head may be dead), not later.
TEST(FairRetryDelay, NextWaiterRetriesWhenTheHeadsPlaceExpires) {
  EXPECT_EQ(fair_retry_delay(1, 700, recheck, refresh), milliseconds(701));
  EXPECT_EQ(fair_retry_delay(1, 0, recheck, refresh), milliseconds(1));
  EXPECT_EQ(fair_retry_delay(1, 9000, recheck, refresh), refresh);
}

// Not queued (never happens while waiting, but harmless): like the head without a hint.
TEST(FairRetryDelay, NotQueuedUsesRecheck) { EXPECT_EQ(fair_retry_delay(-1, -1, recheck, refresh), recheck); }

// Never a busy loop, even when the renewal is overdue.
TEST(FairRetryDelay, NeverZero) {
  EXPECT_EQ(fair_retry_delay(2, -1, recheck, milliseconds(-30)), milliseconds(1));
  EXPECT_EQ(fair_retry_delay(0, -1, milliseconds(0), refresh), milliseconds(1));
}

}  // namespace
