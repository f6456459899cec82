// Integration tests of Redlock::async_acquire against 5 real, independent redis-server
// processes: the same wait as acquire() (redlock_acquire.cpp), with no thread per waiter.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/redlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/server_group.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::ms_since;
using dlock::test::no_wait;
using dlock::test::pointers;
using dlock::test::scaled;
using dlock::test::watchdog;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Clients = std::vector<std::unique_ptr<dlock::Client>>;

// A `done` for async_acquire and the future it fulfils. The state is shared, not on the test's
// stack: after a failed ASSERT returns early, the Clients' destruction may still run `done`.
struct Outcome {
  std::shared_ptr<std::promise<dlock::Result<dlock::Lease>>> promise =
      std::make_shared<std::promise<dlock::Result<dlock::Lease>>>();
  std::future<dlock::Result<dlock::Lease>> future = promise->get_future();

  std::function<void(dlock::Result<dlock::Lease>)> done() const {
    return [p = promise](dlock::Result<dlock::Lease> r) { p->set_value(std::move(r)); };
  }
  bool ready_within(milliseconds d) { return future.wait_for(d) == std::future_status::ready; }
};

class RedlockAsyncTest : public ::testing::Test {
 protected:
  static constexpr std::size_t N = 5;

  static dlock::ClientOptions options() {
    dlock::ClientOptions o;
    o.command_timeout = scaled(2000ms);
    o.connect_timeout = scaled(2000ms);
    o.reconnect.initial = 10ms;
    o.reconnect.max = 100ms;
    return o;
  }

  // Only a notification (or the deadline) can end such a wait in time.
  static dlock::WaitOptions deaf(milliseconds timeout = 20000ms) {
    dlock::WaitOptions w;
    w.timeout = timeout;
    w.recheck_interval = 30000ms;
    return w;
  }

  // A release returns once a majority answered: the others' DELs may still be on their way.
  bool key_gone_everywhere(const std::string& name) {
    return eventually(
        [&] {
          for (std::size_t i = 0; i < N; ++i) {
            if (group.raw(i).cmd_int({"EXISTS", key_of(name)}) != 0) return false;
          }
          return true;
        },
        scaled(3000ms));
  }

  dlock::test::ServerGroup group{N};
};

// A free lock: `done` runs on the home Client's loop thread with a lease held on a majority,
// and a blocking call made there is refused instead of deadlocking the loop.
TEST_F(RedlockAsyncTest, TakesAFreeLockAndRunsDoneOnTheHomeLoop) {
  Clients c = group.clients(options());
  dlock::Redlock lock(pointers(c), "async-free", watchdog(30s));
  dlock::Redlock other(pointers(c), "async-other", watchdog(30s));
  struct Seen {
    bool on_home_loop = false;
    std::error_code blocking;
  };
  auto done = std::make_shared<std::promise<std::pair<dlock::Result<dlock::Lease>, Seen>>>();
  auto fut = done->get_future();
  lock.async_acquire(no_wait(), [done, home = c.front().get(), &other](dlock::Result<dlock::Lease> r) {
    Seen seen;
    seen.on_home_loop = home->on_event_loop_thread();
    seen.blocking = other.acquire(no_wait()).code();
    done->set_value({std::move(r), seen});
  });
  ASSERT_EQ(fut.wait_for(scaled(5000ms)), std::future_status::ready) << "done never ran";
  auto [lease, seen] = fut.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_TRUE(seen.on_home_loop);
  EXPECT_EQ(seen.blocking, make_error_code(dlock::errc::called_from_event_loop));
  EXPECT_GT(lease->token().value, 0u);
  std::size_t holding = 0;
  for (std::size_t i = 0; i < N; ++i) holding += group.raw(i).cmd({"GET", key_of("async-free")}) == lease->owner() ? 1 : 0;
  EXPECT_GE(holding, lock.quorum());
  EXPECT_TRUE(lease->release().ok());
  EXPECT_TRUE(key_gone_everywhere("async-free"));
  EXPECT_TRUE(key_gone_everywhere("async-other")) << "the refused blocking call took its lock";
}

// timeout zero on a held lock: one try, busy.
TEST_F(RedlockAsyncTest, OneTryOnAHeldLockIsBusy) {
  Clients c = group.clients(options());
  dlock::Redlock holder(pointers(c), "async-busy", watchdog(30s));
  dlock::Result<dlock::Lease> held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Redlock lock(pointers(c), "async-busy", watchdog(30s));
  Outcome out;
  lock.async_acquire(no_wait(), out.done());
  ASSERT_TRUE(out.ready_within(scaled(5000ms)));
  auto r = out.future.get();
  EXPECT_TRUE(!r.ok() && r.code() == dlock::errc::busy) << (r.ok() ? "acquired" : r.error().what());
  EXPECT_TRUE(held->release().ok());
}

// A waiter sleeps until the holder's release, announced by a majority, wakes it: the recheck
// interval is far longer than the test.
TEST_F(RedlockAsyncTest, AWaiterIsWokenByTheRelease) {
  Clients c = group.clients(options());
  dlock::Redlock holder(pointers(c), "async-wake", watchdog(30s));
  dlock::Result<dlock::Lease> held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Redlock lock(pointers(c), "async-wake", watchdog(30s));
  Outcome out;
  lock.async_acquire(deaf(), out.done());
  const std::string channel = key_of("async-wake") + ":ch";
  for (std::size_t n = 0; n < N; ++n) {
    ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(group.raw(n), channel) == 1; }, scaled(5000ms)))
        << "node " << n << " has no subscriber";
  }
  EXPECT_FALSE(out.ready_within(200ms)) << "acquired a held lock";
  const auto released_at = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(out.ready_within(scaled(5000ms)));
  EXPECT_LT(ms_since(released_at), scaled(1000ms));
  auto r = out.future.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_GT(r->token().value, held->token().value);
  EXPECT_TRUE(r->release().ok());
  for (std::size_t n = 0; n < N; ++n) {
    EXPECT_TRUE(eventually([&] { return dlock::test::channel_subscribers(group.raw(n), channel) == 0; }, scaled(5000ms)))
        << "node " << n << " still has a subscriber after the wait ended";
  }
}

// The holder crashed (its keys are left to expire): the wait is bounded by their TTL, not by
// the recheck interval, although no notification comes.
TEST_F(RedlockAsyncTest, AWaitIsBoundedByTheHoldersTtl) {
  Clients c = group.clients(options());
  const std::string owner = "crashed@elsewhere";
  const auto t0 = SteadyClock::now();  // before the keys' TTL starts: a lower bound of the wait
  for (std::size_t n = 0; n < N; ++n) {
    group.raw(n).cmd({"SET", key_of("async-ttl"), owner, "PX", std::to_string(scaled(700ms).count())});
  }
  dlock::Redlock lock(pointers(c), "async-ttl", watchdog(30s));
  Outcome out;
  lock.async_acquire(deaf(), out.done());
  ASSERT_TRUE(out.ready_within(scaled(5000ms))) << "the wait outlived the holder's TTL";
  const milliseconds took = ms_since(t0);
  auto r = out.future.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_GE(took, scaled(700ms) - 5ms) << "acquired before the holder's keys expired";
  EXPECT_TRUE(r->release().ok());
}

// The deadline and a stop request end a wait; neither leaves a key or a subscription behind.
TEST_F(RedlockAsyncTest, DeadlineAndStopEndAWait) {
  Clients c = group.clients(options());
  dlock::Redlock holder(pointers(c), "async-end", watchdog(30s));
  dlock::Result<dlock::Lease> held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Redlock lock(pointers(c), "async-end", watchdog(30s));

  Outcome timed;
  const auto t0 = SteadyClock::now();
  lock.async_acquire(deaf(scaled(400ms)), timed.done());
  ASSERT_TRUE(timed.ready_within(scaled(5000ms)));
  const milliseconds took = ms_since(t0);
  auto r = timed.future.get();
  EXPECT_TRUE(!r.ok() && r.code() == dlock::errc::timeout) << (r.ok() ? "acquired" : r.error().what());
  EXPECT_GE(took, scaled(400ms) - 5ms);
  EXPECT_LT(took, scaled(400ms) + scaled(800ms));

  std::stop_source stop;
  Outcome stopped;
  lock.async_acquire(deaf(), stopped.done(), stop.get_token());
  EXPECT_FALSE(stopped.ready_within(300ms));
  stop.request_stop();
  ASSERT_TRUE(stopped.ready_within(scaled(2000ms))) << "the stop request was not heard";
  r = stopped.future.get();
  EXPECT_TRUE(!r.ok() && r.code() == dlock::errc::cancelled) << (r.ok() ? "acquired" : r.error().what());

  // A stop requested before the call: no try at all (no script call on any node).
  std::vector<long long> calls;
  for (std::size_t n = 0; n < N; ++n) calls.push_back(dlock::test::script_calls(group.raw(n)));
  Outcome early;
  lock.async_acquire(deaf(), early.done(), stop.get_token());
  ASSERT_TRUE(early.ready_within(scaled(2000ms)));
  r = early.future.get();
  EXPECT_TRUE(!r.ok() && r.code() == dlock::errc::cancelled) << (r.ok() ? "acquired" : r.error().what());
  for (std::size_t n = 0; n < N; ++n) {
    EXPECT_EQ(dlock::test::script_calls(group.raw(n)), calls[n]) << "node " << n << " was sent a try";
  }

  const std::string channel = key_of("async-end") + ":ch";
  for (std::size_t n = 0; n < N; ++n) {
    EXPECT_TRUE(eventually([&] { return dlock::test::channel_subscribers(group.raw(n), channel) == 0; }, scaled(5000ms)))
        << "node " << n << " kept a subscription of an ended wait";
  }
  EXPECT_EQ(group.raw(1).cmd({"GET", key_of("async-end")}), held->owner());
  EXPECT_TRUE(held->release().ok());
}

// Asynchronous and blocking waiters of one process share one queue: served in the order they
// came, one handoff per release (recheck intervals are far longer than the test, so only
// notifications move the queue), and tokens rise from one holder to the next.
TEST_F(RedlockAsyncTest, AsyncAndBlockingWaitersTakeTurns) {
  Clients c = group.clients(options());
  dlock::Client* home = c.front().get();
  dlock::Redlock holder(pointers(c), "async-turns", watchdog(30s));
  dlock::Result<dlock::Lease> held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  constexpr int waiters = 6;
  struct State {
    std::vector<std::unique_ptr<dlock::Redlock>> locks;
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::uint64_t> tokens;
    std::atomic<int> finished{0};
  };
  auto state = std::make_shared<State>();
  for (int i = 0; i < waiters; ++i) {
    state->locks.push_back(std::make_unique<dlock::Redlock>(pointers(c), "async-turns", watchdog(30s)));
  }
  // Runs on a waiter's thread (blocking) or on the home loop (`done`).
  auto record = [state, home](int i, dlock::Result<dlock::Lease>& r) {
    {
      std::lock_guard lock(state->mu);
      state->order.push_back(r.ok() ? i : -1);
      if (r.ok()) state->tokens.push_back(r->token().value);
    }
    if (!r.ok()) {
      ++state->finished;
    } else if (home->on_event_loop_thread()) {
      // From `done`: a release there cannot block; async_release tells its outcome.
      r->async_release([state](dlock::Result<void> released) {
        EXPECT_TRUE(released.ok()) << released.error().what();
        ++state->finished;
      });
    } else {
      EXPECT_TRUE(r->release().ok());
      ++state->finished;
    }
  };
  std::vector<std::jthread> threads;  // joined on every way out of the test
  const std::string channel = key_of("async-turns") + ":ch";
  for (int i = 0; i < waiters; ++i) {
    if (i % 2 == 0) {
      state->locks[static_cast<std::size_t>(i)]->async_acquire(deaf(), [record, i](dlock::Result<dlock::Lease> r) {
        record(i, r);
      });
    } else {
      threads.emplace_back([state, record, i] {
        dlock::Result<dlock::Lease> r = state->locks[static_cast<std::size_t>(i)]->acquire(deaf());
        record(i, r);
      });
    }
    if (i == 0) {
      ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(group.raw(0), channel) == 1; }, scaled(5000ms)));
    }
    std::this_thread::sleep_for(scaled(50ms));  // this waiter has joined the queue before the next one
  }
  for (std::size_t n = 0; n < N; ++n) {
    EXPECT_EQ(dlock::test::channel_subscribers(group.raw(n), channel), 1) << "node " << n;
  }
  const long long before = dlock::test::script_calls(group.raw(1));
  ASSERT_TRUE(held->release().ok());
  EXPECT_TRUE(eventually([&] { return state->finished.load() == waiters; }, scaled(10000ms)))
      << state->finished.load() << " of " << waiters << " served: the queue stalled until a recheck";
  for (auto& t : threads) t.join();
  std::lock_guard lock(state->mu);
  EXPECT_EQ(state->order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  for (std::size_t i = 1; i < state->tokens.size(); ++i) EXPECT_GT(state->tokens[i], state->tokens[i - 1]);
  // Per waiter on this node: its acquire, its fencing write-back (if any), its release; plus the
  // holder's release and a little room for a late copy of an old release. A herd (every waiter
  // trying on each release) makes more than twice as many.
  const long long calls = dlock::test::script_calls(group.raw(1)) - before;
  EXPECT_LE(calls, 1 + 3 * waiters + 3) << calls << " script calls for " << waiters << " handoffs";
}

// A head that waits for the release of a lock its predecessor here took, and leaves before that
// release (its deadline), passes the wait on: the next head sends no try that could only fail,
// and still takes the lock at the release.
TEST_F(RedlockAsyncTest, AHeadThatLeavesPassesTheWaitForALocalHoldersReleaseOn) {
  Clients c = group.clients(options());
  Clients elsewhere = group.clients(options());  // another process's Clients, in effect
  dlock::Redlock foreign(pointers(elsewhere), "handover", watchdog(30s));
  dlock::Result<dlock::Lease> held = foreign.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Redlock lock(pointers(c), "handover", watchdog(30s));
  Outcome first, leaving, next;
  lock.async_acquire(deaf(), first.done());
  const std::string channel = key_of("handover") + ":ch";
  ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(group.raw(0), channel) == 1; }, scaled(5000ms)));
  lock.async_acquire(deaf(scaled(1500ms)), leaving.done());
  std::this_thread::sleep_for(scaled(50ms));
  lock.async_acquire(deaf(), next.done());
  std::this_thread::sleep_for(scaled(50ms));
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(first.ready_within(scaled(3000ms)));
  dlock::Result<dlock::Lease> mine = first.future.get();
  ASSERT_TRUE(mine.ok()) << mine.error().what();
  std::this_thread::sleep_for(scaled(100ms));  // the fencing write-back, if any, has landed
  const long long before = dlock::test::script_calls(group.raw(1));
  ASSERT_TRUE(leaving.ready_within(scaled(3000ms)));
  auto gone = leaving.future.get();
  EXPECT_TRUE(!gone.ok() && gone.code() == dlock::errc::timeout) << (gone.ok() ? "acquired" : gone.error().what());
  std::this_thread::sleep_for(scaled(200ms));
  EXPECT_EQ(dlock::test::script_calls(group.raw(1)), before) << "the next head tried while the lock was held here";
  EXPECT_FALSE(next.ready_within(0ms));
  ASSERT_TRUE(mine->release().ok());
  ASSERT_TRUE(next.ready_within(scaled(3000ms))) << "the next head missed the release";
  dlock::Result<dlock::Lease> taken = next.future.get();
  ASSERT_TRUE(taken.ok()) << taken.error().what();
  EXPECT_GT(taken->token().value, mine->token().value);
  EXPECT_TRUE(taken->release().ok());
}

// Many asynchronous waiters on one lock cost no thread each: 50 of them, each releasing from
// its `done` (async_release), are all served in turn (a thread per waiter would show as 50 more
// threads in this process).
TEST_F(RedlockAsyncTest, ManyWaitersNeedNoThreadEach) {
  Clients c = group.clients(options());
  dlock::Redlock lock(pointers(c), "async-many", watchdog(30s));
  dlock::Result<dlock::Lease> held = lock.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  auto threads_now = [] {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
  };
  const std::size_t before = threads_now();
  constexpr int waiters = 50;
  struct Counts {
    std::atomic<int> served{0};
    std::atomic<int> failed{0};
  };
  auto counts = std::make_shared<Counts>();
  for (int i = 0; i < waiters; ++i) {
    lock.async_acquire(deaf(scaled(30000ms)), [counts](dlock::Result<dlock::Lease> r) {
      if (!r.ok()) {
        ++counts->failed;
        ++counts->served;
        return;
      }
      r->async_release([counts](dlock::Result<void> released) {
        if (!released.ok()) ++counts->failed;
        ++counts->served;
      });
    });
  }
  std::this_thread::sleep_for(100ms);
  EXPECT_LE(threads_now(), before + 2) << "waiting took threads";
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(eventually([&] { return counts->served.load() == waiters; }, scaled(30000ms)))
      << counts->served.load() << " of " << waiters << " served";
  EXPECT_EQ(counts->failed.load(), 0);
  EXPECT_TRUE(key_gone_everywhere("async-many"));
}

// Destroying the home Client ends an asynchronous wait with errc::shutdown, every waiter of a
// long queue included; a call after that fails at once, on the calling thread.
TEST_F(RedlockAsyncTest, ShutdownOfTheHomeClientEndsEveryWait) {
  Clients c = group.clients(options());
  dlock::Redlock holder(pointers(c), "async-shut", watchdog(30s));
  dlock::Result<dlock::Lease> held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Redlock lock(pointers(c), "async-shut", watchdog(30s));
  // A long queue: as each wait ends, the next becomes head and ends too (RedlockTurns::promote).
  constexpr int waiters = 500;
  std::vector<Outcome> outs(waiters);
  for (auto& out : outs) lock.async_acquire(deaf(), out.done());
  EXPECT_FALSE(outs.front().ready_within(300ms));
  c.front().reset();
  int shut = 0;
  for (auto& out : outs) {
    ASSERT_TRUE(out.ready_within(0ms)) << "the Client's destruction left a wait running";
    auto r = out.future.get();
    shut += !r.ok() && r.code() == dlock::errc::shutdown ? 1 : 0;
  }
  EXPECT_EQ(shut, waiters);

  auto ran_on = std::make_shared<std::thread::id>();
  auto code = std::make_shared<std::error_code>();
  lock.async_acquire(deaf(), [ran_on, code](dlock::Result<dlock::Lease> r) {
    *ran_on = std::this_thread::get_id();
    *code = r.code();
  });
  EXPECT_EQ(*ran_on, std::this_thread::get_id());
  EXPECT_EQ(*code, make_error_code(dlock::errc::shutdown));
}

}  // namespace
