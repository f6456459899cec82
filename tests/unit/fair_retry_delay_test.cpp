// Unit tests for the pure parts of a FairLock wait (src/locks/fair_wait.hpp): fair_retry_delay,
// when a waiter tries again after a busy reply; fair_channel_of, which channel a waiter listens
// on (the scripts apply the same rule); parse_fair_message, the channel's payloads.
#include <gtest/gtest.h>

#include <chrono>

#include "locks/fair_wait.hpp"

namespace {

using dlock::detail::fair_channel_of;
using dlock::detail::fair_retry_delay;
using dlock::detail::FairMessage;
using dlock::detail::parse_fair_message;
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

// A waiter id is an owner token "<hex>@<host>:<pid>:<unix ms>": its channel is per process. The
// cases mirror string.match(id, '^%x+@(.+):%d+$') or id in src/scripts/fair_*.lua.
TEST(FairChannelOf, ProcessPartOfTheOwnerToken) {
  EXPECT_EQ(fair_channel_of("0123456789abcdef0123456789ABCDEF@build-7:4242:1764460000000"), "build-7:4242");
  EXPECT_EQ(fair_channel_of("ab@h@x:1:2"), "h@x:1");
  EXPECT_EQ(fair_channel_of("ab@[::1]:99:12"), "[::1]:99");
  // Anything else (a hand-made id) is its own channel, as in the scripts.
  EXPECT_EQ(fair_channel_of("ghost"), "ghost");
  EXPECT_EQ(fair_channel_of("xyz@host:1:2"), "xyz@host:1:2");
  EXPECT_EQ(fair_channel_of("ab@host:1:2x"), "ab@host:1:2x");
  EXPECT_EQ(fair_channel_of("ab@:5"), "ab@:5");
  EXPECT_EQ(fair_channel_of("@host:1:2"), "@host:1:2");
  EXPECT_EQ(fair_channel_of("ab@host:"), "ab@host:");
}

TEST(FairMessageParse, GrantedAndReleased) {
  auto g = parse_fair_message("granted 1764460000000123 ab@h:1:2");
  EXPECT_EQ(g.kind, FairMessage::Kind::granted);
  EXPECT_EQ(g.token, 1764460000000123u);
  EXPECT_EQ(g.waiter, "ab@h:1:2");
  auto r = parse_fair_message("released ab@h:1:2");
  EXPECT_EQ(r.kind, FairMessage::Kind::released);
  EXPECT_EQ(r.waiter, "ab@h:1:2");
  for (const char* bad : {"released", "released ", "granted", "granted 12", "granted 12 ", "granted x1 id",
                          "granted  id", "revoked", ""}) {
    EXPECT_EQ(parse_fair_message(bad).kind, FairMessage::Kind::other) << bad;
  }
}

}  // namespace
