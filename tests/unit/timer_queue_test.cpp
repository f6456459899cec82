// Unit tests for dlock::detail::TimerQueue (src/renewal/timer_queue.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dlock/clock.hpp"
#include "renewal/timer_queue.hpp"

namespace {

using dlock::BootClock;
using std::chrono::milliseconds;
using std::chrono::seconds;

using TP = BootClock::time_point;
const TP t0{seconds(1000)};

// An item keeps its own slot, as a LeaseRecord does.
struct Item {
  std::string name;
  std::uint32_t slot = UINT32_MAX;
};
using ItemPtr = std::shared_ptr<Item>;
struct SlotOf {
  std::uint32_t& operator()(const ItemPtr& p) const noexcept { return p->slot; }
};
using Queue = dlock::detail::TimerQueue<TP, ItemPtr, SlotOf>;

ItemPtr item(std::string name) { return std::make_shared<Item>(Item{std::move(name)}); }

// Queues a new item and returns it: the "handle" is the item itself.
ItemPtr add(Queue& q, TP due, std::string name) {
  ItemPtr p = item(std::move(name));
  q.add(due, p);
  return p;
}

std::vector<std::string> names(const std::vector<ItemPtr>& items) {
  std::vector<std::string> out;
  for (const auto& p : items) out.push_back(p->name);
  return out;
}

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
  add(q, t0 + milliseconds(300), "c");
  EXPECT_EQ(q.next(), t0 + milliseconds(300));
  add(q, t0 + milliseconds(100), "a");
  EXPECT_EQ(q.next(), t0 + milliseconds(100));
  add(q, t0 + milliseconds(200), "b");
  EXPECT_EQ(q.next(), t0 + milliseconds(100));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_FALSE(q.empty());
}

TEST(TimerQueue, PopDueReturnsEarliestFirst) {
  Queue q;
  add(q, t0 + milliseconds(30), "c");
  add(q, t0 + milliseconds(10), "a");
  add(q, t0 + milliseconds(50), "e");
  add(q, t0 + milliseconds(20), "b");
  add(q, t0 + milliseconds(40), "d");
  EXPECT_EQ(names(q.pop_due(t0 + milliseconds(60))), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.next().has_value());
}

TEST(TimerQueue, PopDueBoundaryEqualToNowIsDue) {
  Queue q;
  add(q, t0, "at");
  add(q, t0 + BootClock::duration(1), "after");
  add(q, t0 - BootClock::duration(1), "before");

  EXPECT_EQ(names(q.pop_due(t0 - BootClock::duration(2))), std::vector<std::string>{});
  EXPECT_EQ(q.size(), 3u);

  EXPECT_EQ(names(q.pop_due(t0)), (std::vector<std::string>{"before", "at"}));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.next(), t0 + BootClock::duration(1));

  EXPECT_EQ(names(q.pop_due(t0)), std::vector<std::string>{});  // a second pop at the same time: nothing
  EXPECT_EQ(names(q.pop_due(t0 + BootClock::duration(1))), std::vector<std::string>{"after"});
  EXPECT_TRUE(q.empty());
}

TEST(TimerQueue, EqualDueTimesKeepInsertionOrderAndAllPop) {
  Queue q;
  add(q, t0, "first");
  add(q, t0 + seconds(1), "later");
  add(q, t0, "second");
  add(q, t0, "third");
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.next(), t0);
  EXPECT_EQ(names(q.pop_due(t0)), (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_EQ(q.next(), t0 + seconds(1));
  EXPECT_EQ(q.size(), 1u);
}

TEST(TimerQueue, RemoveByHandle) {
  Queue q;
  auto a = add(q, t0 + milliseconds(10), "a");
  auto b = add(q, t0 + milliseconds(20), "b");
  auto c = add(q, t0 + milliseconds(30), "c");
  EXPECT_TRUE(Queue::queued(a));

  q.remove(b);
  EXPECT_FALSE(Queue::queued(b));
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.next(), t0 + milliseconds(10));

  q.remove(a);  // removing the earliest moves next() on
  EXPECT_EQ(q.next(), t0 + milliseconds(30));

  EXPECT_EQ(names(q.pop_due(t0 + seconds(1))), std::vector<std::string>{"c"});
  EXPECT_TRUE(q.empty());
  (void)c;
}

TEST(TimerQueue, RemoveOneOfEqualDueTimesRemovesExactlyThatItem) {
  Queue q;
  add(q, t0, "x");
  auto y = add(q, t0, "y");
  add(q, t0, "z");
  q.remove(y);
  EXPECT_EQ(names(q.pop_due(t0)), (std::vector<std::string>{"x", "z"}));
}

TEST(TimerQueue, HandlesStayValidAcrossOtherAddsAndPops) {
  Queue q;
  auto late = add(q, t0 + seconds(10), "late");
  for (int i = 0; i < 50; ++i) add(q, t0 + milliseconds(i), "early" + std::to_string(i));
  auto popped = q.pop_due(t0 + seconds(1));
  ASSERT_EQ(popped.size(), 50u);
  EXPECT_EQ(popped.front()->name, "early0");
  EXPECT_EQ(popped.back()->name, "early49");
  for (const auto& p : popped) EXPECT_FALSE(Queue::queued(p));
  EXPECT_TRUE(Queue::queued(late));
  EXPECT_EQ(q.size(), 1u);
  q.remove(late);  // still valid after 50 inserts and 50 erasures around it
  EXPECT_TRUE(q.empty());
}

TEST(TimerQueue, RescheduleByRemoveAndAdd) {
  Queue q;
  auto h = add(q, t0 + seconds(10), "lease");
  add(q, t0 + seconds(5), "other");
  q.remove(h);
  q.remove(h);  // not queued any more: nothing
  EXPECT_EQ(q.size(), 1u);
  q.add(t0 + seconds(1), h);
  EXPECT_EQ(q.next(), t0 + seconds(1));
  EXPECT_EQ(names(q.pop_due(t0 + seconds(1))), std::vector<std::string>{"lease"});
  EXPECT_EQ(q.next(), t0 + seconds(5));
}

TEST(TimerQueue, PopDueMovesMoveOnlyItems) {
  struct UniqueSlot {
    std::uint32_t& operator()(const std::unique_ptr<Item>& p) const noexcept { return p->slot; }
  };
  dlock::detail::TimerQueue<TP, std::unique_ptr<Item>, UniqueSlot> q;
  q.add(t0 + milliseconds(2), std::make_unique<Item>(Item{"2"}));
  q.add(t0 + milliseconds(1), std::make_unique<Item>(Item{"1"}));
  auto due = q.pop_due(t0 + milliseconds(2));
  ASSERT_EQ(due.size(), 2u);
  ASSERT_NE(due[0], nullptr);
  ASSERT_NE(due[1], nullptr);
  EXPECT_EQ(due[0]->name, "1");
  EXPECT_EQ(due[1]->name, "2");
  EXPECT_TRUE(q.empty());
}

// The heap against a reference model: random adds, removes (from any position, which moves the
// last entry into the gap, up or down) and pops keep every item's slot right and the order
// (due, then insertion) exact.
TEST(TimerQueue, RandomOperationsMatchAnOrderedModel) {
  std::mt19937 rng(12345);
  Queue q;
  std::vector<std::pair<std::pair<TP, int>, ItemPtr>> model;  // ((due, insertion), item)
  int added = 0;
  TP now = t0;
  for (int step = 0; step < 5000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 5 || model.empty()) {
      const TP due = now + milliseconds(rng() % 50);  // narrow range: many equal due times
      ItemPtr p = item("i" + std::to_string(added));
      q.add(due, p);
      model.push_back({{due, added++}, p});
    } else if (op < 8) {
      const std::size_t k = rng() % model.size();
      q.remove(model[k].second);
      EXPECT_FALSE(Queue::queued(model[k].second));
      model.erase(model.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      now += milliseconds(rng() % 20);
      std::sort(model.begin(), model.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<std::string> expected;
      while (!model.empty() && model.front().first.first <= now) {
        expected.push_back(model.front().second->name);
        model.erase(model.begin());
      }
      ASSERT_EQ(names(q.pop_due(now)), expected) << "step " << step;
    }
    ASSERT_EQ(q.size(), model.size());
    for (const auto& m : model) ASSERT_TRUE(Queue::queued(m.second));
  }
  std::sort(model.begin(), model.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> rest;
  for (const auto& m : model) rest.push_back(m.second->name);
  EXPECT_EQ(names(q.pop_due(TP::max())), rest);
  EXPECT_TRUE(q.empty());
}

}  // namespace
