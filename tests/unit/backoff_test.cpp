// Unit tests for dlock::detail::Backoff (src/util/backoff.hpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dlock/options.hpp"
#include "util/backoff.hpp"

namespace {

using dlock::BackoffPolicy;
using dlock::detail::Backoff;
using std::chrono::milliseconds;

auto constant(double u) {
  return [u] { return u; };
}

std::vector<std::int64_t> delays(Backoff& b, double u, int n) {
  std::vector<std::int64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(b.next(constant(u)).count());
  return out;
}

BackoffPolicy policy(std::int64_t initial, std::int64_t max, double multiplier) {
  BackoffPolicy p;
  p.initial = milliseconds{initial};
  p.max = milliseconds{max};
  p.multiplier = multiplier;
  return p;
}

TEST(Backoff, DefaultPolicyValues) {
  // The sequences below assume the documented defaults.
  BackoffPolicy p;
  EXPECT_EQ(p.initial, milliseconds{50});
  EXPECT_EQ(p.max, milliseconds{2000});
  EXPECT_EQ(p.multiplier, 2.0);
}

TEST(Backoff, ZeroRandomGivesTheFloor) {
  Backoff b{BackoffPolicy{}};
  EXPECT_EQ(delays(b, 0.0, 10), (std::vector<std::int64_t>{25, 25, 25, 25, 25, 25, 25, 25, 25, 25}));
}

TEST(Backoff, HalfRandomDoublesUpToTheCap) {
  Backoff b{BackoffPolicy{}};
  // caps: 50 100 200 400 800 1600 2000 2000; half of each, but never below 25
  EXPECT_EQ(delays(b, 0.5, 8), (std::vector<std::int64_t>{25, 50, 100, 200, 400, 800, 1000, 1000}));
}

TEST(Backoff, NearOneStaysBelowTheCap) {
  Backoff b{BackoffPolicy{}};
  EXPECT_EQ(delays(b, 0.999, 9), (std::vector<std::int64_t>{49, 99, 199, 399, 799, 1598, 1998, 1998, 1998}));
}

TEST(Backoff, AttemptsCountAndReset) {
  Backoff b{BackoffPolicy{}};
  EXPECT_EQ(b.attempts(), 0u);
  (void)b.next(constant(0.5));
  (void)b.next(constant(0.5));
  (void)b.next(constant(0.5));
  EXPECT_EQ(b.attempts(), 3u);
  EXPECT_EQ(b.next(constant(0.5)).count(), 200);
  EXPECT_EQ(b.attempts(), 4u);
  b.reset();
  EXPECT_EQ(b.attempts(), 0u);
  EXPECT_EQ(b.next(constant(0.5)).count(), 25);
  EXPECT_EQ(b.next(constant(0.5)).count(), 50);
  EXPECT_EQ(b.attempts(), 2u);
}

TEST(Backoff, JitterRangePerAttempt) {
  // For each attempt the delay lies in [max(initial/2, 0), cap) for u in [0, 1).
  const double us[] = {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999, 0.9999999};
  for (double u : us) {
    Backoff b{policy(100, 5000, 3.0)};
    double cap = 100;
    for (int n = 0; n < 12; ++n) {
      std::int64_t d = b.next(constant(u)).count();
      std::int64_t c = static_cast<std::int64_t>(std::min(cap, 5000.0));
      EXPECT_EQ(d, std::max<std::int64_t>(50, static_cast<std::int64_t>(std::floor(u * static_cast<double>(c)))))
          << "u=" << u << " n=" << n;
      EXPECT_GE(d, 50);
      EXPECT_LE(d, c);
      cap *= 3.0;
    }
  }
}

TEST(Backoff, RandomSourceIsCalledOncePerDelay) {
  Backoff b{BackoffPolicy{}};
  int calls = 0;
  const double seq[] = {0.0, 0.5, 0.999, 0.25};
  auto source = [&] { return seq[calls++ % 4]; };
  EXPECT_EQ(b.next(source).count(), 25);    // cap 50, u 0
  EXPECT_EQ(b.next(source).count(), 50);    // cap 100, u .5
  EXPECT_EQ(b.next(source).count(), 199);   // cap 200, u .999
  EXPECT_EQ(b.next(source).count(), 100);   // cap 400, u .25
  EXPECT_EQ(calls, 4);
}

TEST(Backoff, LargeAttemptCountsDoNotOverflow) {
  Backoff b{BackoffPolicy{}};
  for (int i = 0; i < 5000; ++i) {
    auto d = b.next(constant(0.999)).count();
    ASSERT_GE(d, 25);
    ASSERT_LE(d, 2000);
  }
  EXPECT_EQ(b.attempts(), 5000u);
  EXPECT_EQ(b.next(constant(0.999)).count(), 1998);
  EXPECT_EQ(b.next(constant(0.0)).count(), 25);
}

TEST(Backoff, HugeMultiplierAndMaxima) {
  Backoff b{policy(1000, std::numeric_limits<std::int64_t>::max(), 1e300)};
  EXPECT_EQ(b.next(constant(0.5)).count(), 500);  // attempt 0: cap = initial
  // attempt 1: 1e303 -> capped at max; u=0.5 gives about max/2
  auto d = b.next(constant(0.5)).count();
  EXPECT_GT(d, std::numeric_limits<std::int64_t>::max() / 2 - 2048);
  EXPECT_LE(d, std::numeric_limits<std::int64_t>::max() / 2 + 2048);
  // u clamped to 1: exactly max, no overflow converting from double
  EXPECT_EQ(b.next(constant(1.0)).count(), std::numeric_limits<std::int64_t>::max());
  for (int i = 0; i < 2000; ++i) (void)b.next(constant(0.0));
  EXPECT_EQ(b.next(constant(0.0)).count(), 500);

  Backoff inf{policy(10, 100, std::numeric_limits<double>::infinity())};
  EXPECT_EQ(delays(inf, 0.5, 3), (std::vector<std::int64_t>{5, 50, 50}));
}

TEST(Backoff, MultiplierOneIsConstant) {
  Backoff b{policy(200, 2000, 1.0)};
  EXPECT_EQ(delays(b, 0.999, 4), (std::vector<std::int64_t>{199, 199, 199, 199}));
}

TEST(Backoff, DegeneratePoliciesAreNormalised) {
  // multiplier < 1 and NaN count as 1
  Backoff shrink{policy(100, 1000, 0.5)};
  EXPECT_EQ(delays(shrink, 0.999, 3), (std::vector<std::int64_t>{99, 99, 99}));
  Backoff nan{policy(100, 1000, std::nan(""))};
  EXPECT_EQ(delays(nan, 0.999, 3), (std::vector<std::int64_t>{99, 99, 99}));
  // max below initial: max is the ceiling, also for the floor
  Backoff low_max{policy(1000, 300, 2.0)};
  EXPECT_EQ(delays(low_max, 0.999, 2), (std::vector<std::int64_t>{300, 300}));
  Backoff tiny_max{policy(1000, 100, 2.0)};
  EXPECT_EQ(delays(tiny_max, 0.0, 2), (std::vector<std::int64_t>{100, 100}));
  EXPECT_EQ(delays(tiny_max, 0.999, 2), (std::vector<std::int64_t>{100, 100}));
  // zero and negative initial: no delay at all
  Backoff zero{policy(0, 1000, 2.0)};
  EXPECT_EQ(delays(zero, 0.999, 3), (std::vector<std::int64_t>{0, 0, 0}));
  Backoff negative{policy(-5, -5, 2.0)};
  EXPECT_EQ(delays(negative, 0.5, 2), (std::vector<std::int64_t>{0, 0}));
}

TEST(Backoff, OutOfRangeRandomIsClamped) {
  Backoff b{BackoffPolicy{}};
  EXPECT_EQ(b.next(constant(-3.0)).count(), 25);
  EXPECT_EQ(b.next(constant(std::nan(""))).count(), 25);
  EXPECT_EQ(b.next(constant(7.0)).count(), 200);  // cap 200 at attempt 2, u clamped to 1
}

TEST(Backoff, OddInitialFloorRoundsDown) {
  Backoff b{policy(51, 1000, 2.0)};
  EXPECT_EQ(b.next(constant(0.0)).count(), 25);
}

TEST(Backoff, DefaultRandomSourceStaysInRange) {
  Backoff b{BackoffPolicy{}};
  std::int64_t caps[] = {50, 100, 200, 400, 800, 1600, 2000, 2000};
  bool varied = false;
  std::int64_t first_at_cap = -1;
  for (int round = 0; round < 200; ++round) {
    b.reset();
    for (std::int64_t cap : caps) {
      auto d = b.next().count();
      ASSERT_GE(d, 25);
      ASSERT_LT(d, cap);
      if (cap == 2000) {
        if (first_at_cap < 0) first_at_cap = d;
        if (d != first_at_cap) varied = true;
      }
    }
  }
  EXPECT_TRUE(varied) << "the default random source produced the same delay 400 times";
}

}  // namespace
