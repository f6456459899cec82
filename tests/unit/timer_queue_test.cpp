// Unit tests for dlock::detail::TimerQueue (src/renewal/timer_queue.hpp).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dlock/clock.hpp"
#include "renewal/timer_queue.hpp"

namespace {

using dlock::BootClock;
using dlock::detail::TimerQueue;
using std::chrono::milliseconds;
using std::chrono::seconds;

using TP = BootClock::time_point;
const TP t0{seconds(1000)};

using Queue = TimerQueue<TP, std::string>;

TEST(TimerQueue, EmptyQueue) {
  Queue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.next().has_value());
  EXPECT_TRUE(q.pop_due(t0).empty());
  EXPECT_TRUE(q.pop_due(TP::max()).empty());
  EXPECT_TRUE(q.empty());
}

TEST(TimerQueue, NextIsEarliestRegardlessOfInsertionOrder) {
  Queue q;
  q.add(t0 + milliseconds(300), "c");
  EXPECT_EQ(q.next(), t0 + milliseconds(300));
  q.add(t0 + milliseconds(100), "a");
  EXPECT_EQ(q.next(), t0 + milliseconds(100));
  q.add(t0 + milliseconds(200), "b");
  EXPECT_EQ(q.next(), t0 + milliseconds(100));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_FALSE(q.empty());
}

TEST(TimerQueue, PopDueReturnsEarliestFirst) {
  Queue q;
  q.add(t0 + milliseconds(30), "c");
  q.add(t0 + milliseconds(10), "a");
  q.add(t0 + milliseconds(50), "e");
  q.add(t0 + milliseconds(20), "b");
  q.add(t0 + milliseconds(40), "d");
  EXPECT_EQ(q.pop_due(t0 + milliseconds(60)), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.next().has_value());
}

TEST(TimerQueue, PopDueBoundaryEqualToNowIsDue) {
  Queue q;
  q.add(t0, "at");
  q.add(t0 + BootClock::duration(1), "after");
  q.add(t0 - BootClock::duration(1), "before");

  EXPECT_EQ(q.pop_due(t0 - BootClock::duration(2)), std::vector<std::string>{});
  EXPECT_EQ(q.size(), 3u);

  EXPECT_EQ(q.pop_due(t0), (std::vector<std::string>{"before", "at"}));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.next(), t0 + BootClock::duration(1));

  EXPECT_EQ(q.pop_due(t0), std::vector<std::string>{});  // a second pop at the same time: nothing
  EXPECT_EQ(q.pop_due(t0 + BootClock::duration(1)), std::vector<std::string>{"after"});
  EXPECT_TRUE(q.empty());
}

TEST(TimerQueue, EqualDueTimesKeepInsertionOrderAndAllPop) {
  Queue q;
  q.add(t0, "first");
  q.add(t0 + seconds(1), "later");
  q.add(t0, "second");
  q.add(t0, "third");
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.next(), t0);
  EXPECT_EQ(q.pop_due(t0), (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_EQ(q.next(), t0 + seconds(1));
  EXPECT_EQ(q.size(), 1u);
}

TEST(TimerQueue, RemoveByHandle) {
  Queue q;
  auto a = q.add(t0 + milliseconds(10), "a");
  auto b = q.add(t0 + milliseconds(20), "b");
  auto c = q.add(t0 + milliseconds(30), "c");
  EXPECT_NE(a, q.end());

  q.remove(b);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.next(), t0 + milliseconds(10));

  q.remove(a);  // removing the earliest moves next() on
  EXPECT_EQ(q.next(), t0 + milliseconds(30));

  EXPECT_EQ(q.pop_due(t0 + seconds(1)), std::vector<std::string>{"c"});
  EXPECT_TRUE(q.empty());
  (void)c;
}

TEST(TimerQueue, RemoveOneOfEqualDueTimesRemovesExactlyThatItem) {
  Queue q;
  q.add(t0, "x");
  auto y = q.add(t0, "y");
  q.add(t0, "z");
  q.remove(y);
  EXPECT_EQ(q.pop_due(t0), (std::vector<std::string>{"x", "z"}));
}

TEST(TimerQueue, HandlesStayValidAcrossOtherAddsAndPops) {
  Queue q;
  auto late = q.add(t0 + seconds(10), "late");
  for (int i = 0; i < 50; ++i) q.add(t0 + milliseconds(i), "early" + std::to_string(i));
  auto popped = q.pop_due(t0 + seconds(1));
  ASSERT_EQ(popped.size(), 50u);
  EXPECT_EQ(popped.front(), "early0");
  EXPECT_EQ(popped.back(), "early49");
  EXPECT_EQ(q.size(), 1u);
  q.remove(late);  // still valid after 50 inserts and 50 erasures around it
  EXPECT_TRUE(q.empty());
}

TEST(TimerQueue, RescheduleByRemoveAndAdd) {
  Queue q;
  auto h = q.add(t0 + seconds(10), "lease");
  q.add(t0 + seconds(5), "other");
  q.remove(h);
  h = q.add(t0 + seconds(1), "lease");
  EXPECT_EQ(q.next(), t0 + seconds(1));
  EXPECT_EQ(q.pop_due(t0 + seconds(1)), std::vector<std::string>{"lease"});
  EXPECT_EQ(q.next(), t0 + seconds(5));
}

TEST(TimerQueue, PopDueMovesMoveOnlyItems) {
  TimerQueue<TP, std::unique_ptr<int>> q;
  q.add(t0 + milliseconds(2), std::make_unique<int>(2));
  q.add(t0 + milliseconds(1), std::make_unique<int>(1));
  auto due = q.pop_due(t0 + milliseconds(2));
  ASSERT_EQ(due.size(), 2u);
  ASSERT_NE(due[0], nullptr);
  ASSERT_NE(due[1], nullptr);
  EXPECT_EQ(*due[0], 1);
  EXPECT_EQ(*due[1], 2);
  EXPECT_TRUE(q.empty());
}

}  // namespace
