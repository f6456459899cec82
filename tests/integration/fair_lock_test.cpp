// Integration tests of dlock::FairLock against real redis-server processes.
//
// Every test starts its own server (support/redis_server.hpp) and looks behind dlock's back
// through a plain hiredis connection (support/raw_connection.hpp): the queue's length, the
// waiters' channels and stored leases, the server's command statistics.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/fair_lock.hpp"
#include "scripts/script.hpp"
#include "support/lock_helpers.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace dlock::detail::scripts {
extern const Script fair_force_unlock;
extern const Script fair_acquire;
}

namespace {

using dlock::test::LossProbe;
using dlock::test::key_of;
using dlock::test::channel_subscribers;
using dlock::test::script_calls;
using dlock::test::no_wait;
using dlock::test::watchdog;

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RawConnection;
using dlock::test::eventually;
using dlock::test::ms_since;
using dlock::test::scaled;
using dlock::test::SteadyClock;
using std::chrono::milliseconds;

std::string queue_of(const std::string& name) { return key_of(name) + ":queue"; }
std::string timeouts_of(const std::string& name) { return key_of(name) + ":timeouts"; }
std::string grant_of(const std::string& name) { return key_of(name) + ":grant"; }
std::string fence_of(const std::string& name) { return key_of(name) + ":fence"; }

// The channel a waiter listens on: P{N}:ch:<process>, <process> being its owner token's part
// between '@' and the last ':' (the documented layout, include/dlock/fair_lock.hpp).
std::string channel_of(const std::string& name, const std::string& waiter_id) {
  const auto at = waiter_id.find('@');
  const auto colon = waiter_id.rfind(':');
  return key_of(name) + ":ch:" + waiter_id.substr(at + 1, colon - at - 1);
}

long long to_count(const std::string& s) { return s == "(nil)" ? 0 : std::stoll(s); }

// Waits up to `timeout`, rechecking only every 10 s: whatever is faster came from a notification.
dlock::WaitOptions notified(milliseconds timeout = 20s) { return dlock::WaitOptions{timeout, 10000ms}; }

dlock::FairLockOptions waiter_ttl(milliseconds ttl) {
  dlock::FairLockOptions o;
  o.waiter_ttl = ttl;
  return o;
}

class FairLockTest : public dlock::test::ServerFixture {
 protected:
  std::string get(const std::string& key) { return raw->cmd({"GET", key}); }
  long long exists(const std::string& key) { return raw->cmd_int({"EXISTS", key}); }
  long long queued(const std::string& name) { return raw->cmd_int({"LLEN", queue_of(name)}); }
  // Waits until `n` waiters are queued for `name`.
  bool queue_reaches(const std::string& name, long long n) {
    return eventually([&] { return queued(name) == n; }, 5000ms);
  }
};

// ------------------------------------------------------------------------------- the script

// fair_acquire.lua run by hand on a lock a release handed to the caller (its 'granted' message
// missed): the try answers the counter's token, a missing or zero counter is seeded, and a
// counter that is no counter is refused by name before the lease's TTL is restarted (the caller
// then gives its place up, and with it the lock).
TEST_F(FairLockTest, AHandedOverTryTakesItsTokenFromASoundCounterOnly) {
  const std::string name = "handed";
  const std::string source = dlock::detail::scripts::fair_acquire.source;
  const std::string me = "aa@p0:1";
  auto call = [&] {
    return raw->cmd_array({"EVAL", source, "5", key_of(name), fence_of(name), queue_of(name), timeouts_of(name),
                           grant_of(name), me, "30000", "60000", "1", key_of(name) + ":ch:"});
  };
  ASSERT_EQ(raw->cmd({"SET", key_of(name), me, "PX", "5000"}), "OK");
  ASSERT_EQ(raw->cmd({"SET", fence_of(name), "1234"}), "OK");
  EXPECT_EQ(call(), (std::vector<std::string>{"1", "1234"}));
  EXPECT_GT(raw->cmd_int({"PTTL", key_of(name)}), 5000) << "the lease's TTL restarts";

  const long long now_us = raw->server_ms() * 1000;
  for (const char* lost : {"", "0"}) {
    if (*lost) ASSERT_EQ(raw->cmd({"SET", fence_of(name), lost}), "OK");
    else ASSERT_EQ(raw->cmd_int({"DEL", fence_of(name)}), 1);
    auto r = call();
    ASSERT_EQ(r.size(), 2u) << "counter '" << lost << "'";
    EXPECT_EQ(r[0], "1");
    EXPECT_GE(std::stoll(r[1]), now_us) << "counter '" << lost << "': not seeded";
    EXPECT_EQ(raw->cmd({"GET", fence_of(name)}), r[1]);
  }

  ASSERT_EQ(raw->cmd({"SET", key_of(name), me, "PX", "5000"}), "OK");
  for (const char* bad : {"-5", "abc", "9007199254740992"}) {
    ASSERT_EQ(raw->cmd({"SET", fence_of(name), bad}), "OK");
    EXPECT_EQ(call(), (std::vector<std::string>{"-1", "string (not a counter)", fence_of(name)})) << bad;
    EXPECT_LE(raw->cmd_int({"PTTL", key_of(name)}), 5000) << bad << ": the TTL was restarted";
    EXPECT_EQ(raw->cmd({"GET", fence_of(name)}), bad);
  }
}

// fair_acquire.lua run by hand: the place it reports (0 head, 1 next, 2 further back) comes from
// the list for the first two places and from the deadlines zset further back, without scanning
// the queue. A refresh keeps each waiter's place (no second entry), and a caller whose queue
// list was lost (deleted or evicted while its deadline stayed) queues again instead of being
// told it is further back in a queue that no longer holds it.
TEST_F(FairLockTest, AcquireScriptReportsPlacesWithoutScanningTheQueue) {
  const std::string name = "places";
  const std::string source = dlock::detail::scripts::fair_acquire.source;
  auto call = [&](const std::string& id, const std::string& queue) {
    return raw->cmd_array({"EVAL", source, "5", key_of(name), fence_of(name), queue_of(name), timeouts_of(name),
                           grant_of(name), id, "30000", "60000", queue, key_of(name) + ":ch:"});
  };
  // Ids in the owner-token layout "<hex>@<process>:<ms>" (the channel rule reads it).
  const std::vector<std::string> ids = {"aa@p0:1", "bb@p1:1", "cc@p2:1", "dd@p3:1", "ee@p4:1"};
  ASSERT_EQ(call(ids[0], "1")[0], "1");  // free: acquired, not queued
  const std::vector<std::string> places = {"0", "1", "2", "2"};
  for (int round = 0; round < 2; ++round) {  // queue, then refresh: the same places
    for (std::size_t i = 1; i < ids.size(); ++i) {
      auto r = call(ids[i], "1");
      ASSERT_EQ(r.size(), 3u);
      EXPECT_EQ(r[0], "0");
      EXPECT_EQ(r[2], places[i - 1]) << "waiter " << i << ", round " << round;
    }
    EXPECT_EQ(queued(name), 4) << "round " << round;
  }
  // A try_lock (no queueing) of a queued waiter still reports its place; of a stranger, -1.
  EXPECT_EQ(call(ids[4], "0")[2], "2");
  EXPECT_EQ(call("ff@p5:1", "0")[2], "-1");
  EXPECT_EQ(queued(name), 4);

  // The list is lost while the deadlines stay: the caller queues again, at the head now.
  ASSERT_EQ(raw->cmd_int({"DEL", queue_of(name)}), 1);
  EXPECT_EQ(raw->cmd({"ZSCORE", timeouts_of(name), ids[4]}) != "(nil)", true);
  auto again = call(ids[4], "1");
  EXPECT_EQ(again[2], "0");
  EXPECT_EQ(raw->cmd({"LINDEX", queue_of(name), "0"}), ids[4]);
  EXPECT_EQ(queued(name), 1);
}

// ------------------------------------------------------------------------------- FIFO order

// Eight threads queue one after the other (half share one Client, half have their own); after
// the release they get the lock exactly in arrival order, each woken by a notification.
// A waiter TTL below 30 ms would expire between a waiter's refreshes; one beyond max_duration
// (100 years) would overflow the clock arithmetic: both are refused with what is allowed.
TEST_F(FairLockTest, WaiterTtlOutOfRangeIsRefused) {
  for (milliseconds ttl : {milliseconds(29), milliseconds(0), dlock::max_duration + 1ms, milliseconds::max()}) {
    try {
      dlock::FairLock f(*client, "ttl-range", dlock::LeaseOptions{}, waiter_ttl(ttl));
      ADD_FAILURE() << "accepted a waiter TTL of " << ttl.count() << " ms";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), make_error_code(dlock::errc::invalid_argument)) << e.what();
      EXPECT_NE(std::string(e.what()).find("waiter TTL"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(dlock::FairLock(*client, "ttl-range", dlock::LeaseOptions{}, waiter_ttl(dlock::max_duration)));
}

TEST_F(FairLockTest, FifoOrderAcrossThreadsAndClients) {
  constexpr int kWaiters = 8;
  const std::string name = "fifo-threads";
  dlock::FairLock holder(*client, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  std::vector<std::unique_ptr<dlock::Client>> own;
  for (int i = 0; i < kWaiters; ++i) own.push_back(std::make_unique<dlock::Client>(server->url()));
  dlock::FairLock shared_lock(*client, name);  // one object, many threads (the std members)
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto record = [&] {
        std::lock_guard g(mu);
        order.push_back(i);
      };
      if (i % 2 == 0) {
        // try_lock_for through the std adapter of a FairLock object shared by these threads.
        if (!shared_lock.try_lock_for(20s)) {
          std::lock_guard g(mu);
          errors.push_back("waiter " + std::to_string(i) + " timed out");
          return;
        }
        record();
        std::this_thread::sleep_for(10ms);
        shared_lock.unlock();
      } else {
        dlock::FairLock mine(*own[i], name);
        auto r = mine.acquire(notified());
        if (!r.ok()) {
          std::lock_guard g(mu);
          errors.push_back("waiter " + std::to_string(i) + ": " + r.error().what());
          return;
        }
        record();
        std::this_thread::sleep_for(10ms);
        (void)r->release();
      }
    });
    ASSERT_TRUE(queue_reaches(name, i + 1)) << "waiter " << i << " never queued";
  }
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  for (auto& t : threads) t.join();
  EXPECT_TRUE(errors.empty()) << errors.front();
  std::vector<int> expected;
  for (int i = 0; i < kWaiters; ++i) expected.push_back(i);
  EXPECT_EQ(order, expected) << "waiters were not served in arrival order";
  // Each handoff is a notification to the new head, not a poll (recheck 10 s, renewal ~1.7 s).
  EXPECT_LT(ms_since(t0), 3000ms);
  EXPECT_EQ(exists(key_of(name)), 0);
  EXPECT_EQ(queued(name), 0);
  EXPECT_EQ(raw->cmd_int({"ZCARD", timeouts_of(name)}), 0);
}

// Waiters in separate OS processes, interleaved with threads of this process: served in order.
// The head (a process) is frozen (SIGSTOP) when the lock is released and thawed 800 ms later: the
// release hands the lock to it all the same (its place is still valid), and the waiters behind it,
// renewing their places meanwhile, find it held.
TEST_F(FairLockTest, FifoOrderAcrossProcesses) {
  constexpr int kWaiters = 6;
  const std::string name = "fifo-procs";
  const std::string url = server->url();
  const auto fair = waiter_ttl(2100ms);  // places renewed every 700 ms
  dlock::FairLock holder(*client, name, {}, fair);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  std::vector<std::unique_ptr<ChildProcess>> children;
  std::vector<std::thread> threads;
  std::atomic<int> thread_errors{0};
  for (int i = 0; i < kWaiters; ++i) {
    if (i % 2 == 0) {
      children.push_back(std::make_unique<ChildProcess>([url, name, fair, i]() -> int {
        dlock::Client c(url);
        dlock::FairLock l(c, name, {}, fair);
        auto r = l.acquire(notified());
        if (!r.ok()) return 2;
        if (!c.command({"RPUSH", "order", std::to_string(i)}).ok()) return 3;
        std::this_thread::sleep_for(10ms);
        return r->release().ok() ? 0 : 4;
      }));
    } else {
      threads.emplace_back([&, i] {
        dlock::Client c(url);
        dlock::FairLock l(c, name, {}, fair);
        auto r = l.acquire(notified());
        if (!r.ok() || !c.command({"RPUSH", "order", std::to_string(i)}).ok()) {
          thread_errors.fetch_add(1);
          return;
        }
        std::this_thread::sleep_for(10ms);
        if (!r->release().ok()) thread_errors.fetch_add(1);
      });
    }
    ASSERT_TRUE(queue_reaches(name, i + 1)) << "waiter " << i << " never queued";
  }
  const auto ids = raw->cmd_array({"LRANGE", queue_of(name), "0", "-1"});
  ASSERT_EQ(ids.size(), static_cast<size_t>(kWaiters));
  const long long tries_before = script_calls(*raw);
  children.front()->signal(SIGSTOP);
  ASSERT_TRUE(held->release().ok());
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(raw->cmd_int({"LLEN", "order"}), 0) << "a waiter took the lock ahead of the (frozen) head";
  EXPECT_EQ(get(key_of(name)), ids[0]) << "the release did not hand the lock to the (frozen) head";
  EXPECT_EQ(queued(name), kWaiters - 1);
  // Besides the release, waiters behind the head tried (renewing their places) meanwhile: the
  // check above was not vacuous.
  EXPECT_GE(script_calls(*raw) - tries_before, 1 + 2);
  children.front()->signal(SIGCONT);

  for (auto& ch : children) {
    auto code = ch->wait_for(30s);
    ASSERT_TRUE(code.has_value()) << "child " << ch->pid() << " did not finish";
    EXPECT_EQ(*code, 0) << "child " << ch->pid();
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(thread_errors.load(), 0);
  std::vector<std::string> expected;
  for (int i = 0; i < kWaiters; ++i) expected.push_back(std::to_string(i));
  EXPECT_EQ(raw->cmd_array({"LRANGE", "order", "0", "-1"}), expected);
  EXPECT_EQ(queued(name), 0);
}

// ----------------------------------------------------------------------- dead and leaving waiters

// The head of the queue is SIGKILLed while it waits. Once its place expired (waiter TTL 1 s; the
// next waiter's renewals purge it), the release hands the lock to the next waiter straight away.
TEST_F(FairLockTest, KilledWaiterIsSkippedWithinItsExpiry) {
  const std::string name = "killed";
  const std::string url = server->url();
  const auto fair = waiter_ttl(1000ms);
  dlock::FairLock holder(*client, name, {}, fair);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  ChildProcess doomed([url, name, fair]() -> int {
    dlock::Client c(url);
    dlock::FairLock l(c, name, {}, fair);
    auto r = l.acquire(notified(60s));
    return r.ok() ? 0 : 2;
  });
  ASSERT_TRUE(queue_reaches(name, 1));
  const std::string dead_id = raw->cmd({"LINDEX", queue_of(name), "0"});

  dlock::Client next_client(url);
  dlock::FairLock next(next_client, name, {}, fair);
  auto fut = std::async(std::launch::async, [&] {
    auto r = next.acquire(notified(10s));
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(queue_reaches(name, 2));

  doomed.signal(SIGKILL);
  EXPECT_EQ(doomed.wait(), 128 + SIGKILL);
  // Its place lasts at most 1 s after its last renewal.
  std::this_thread::sleep_for(1100ms);
  const auto released_at = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());

  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready) << "the queue stayed stuck behind a dead waiter";
  auto [r, got_at] = fut.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_LT(got_at - released_at, 1000ms) << "the release did not hand the lock over";
  EXPECT_EQ(get(key_of(name)), r->owner());
  EXPECT_EQ(queued(name), 0);
  EXPECT_EQ(raw->cmd({"ZSCORE", timeouts_of(name), dead_id}), "(nil)");
  EXPECT_EQ(raw->cmd_int({"HEXISTS", grant_of(name), dead_id}), 0) << "the dead waiter left its stored lease";
  EXPECT_TRUE(r->release().ok());
}

// WaitOptions::recheck_interval of zero means the default, never a polling loop (options.hpp).
// FairLock's head waiter used it as given: a zero interval made it retry every millisecond
// (fair_retry_delay's floor), ~1,000 script calls a second against a held lock.
TEST_F(FairLockTest, ZeroRecheckIntervalIsTheDefaultNotAPollingLoop) {
  dlock::FairLock holder_lock(*client, "no-poll");
  auto held = holder_lock.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client other(server->url());
  dlock::FairLock waiter(other, "no-poll");
  const long long before = script_calls(*raw);
  auto r = waiter.acquire(dlock::WaitOptions{1000ms, 0ms});
  EXPECT_EQ(r.code(), dlock::errc::timeout) << (r.ok() ? "acquired" : r.error().what());
  // Queueing try, a retry or two at the default 500 ms, the withdrawal: a handful, not ~1,000.
  EXPECT_LE(script_calls(*raw) - before, 10);
  EXPECT_TRUE(held->release().ok());
}

// A try_lock_for that times out leaves the queue before it returns; the waiter behind it becomes
// the head and is the one the release wakes.
TEST_F(FairLockTest, TimedOutTryLockForRemovesItsEntry) {
  const std::string name = "timeout";
  const auto fair = waiter_ttl(30000ms);  // a place left behind would block the queue for 30 s
  dlock::FairLock holder(*client, name, {}, fair);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::Client c1(server->url());
  dlock::FairLock quitter(c1, name, {}, fair);
  auto quit = std::async(std::launch::async, [&] {
    const auto t0 = SteadyClock::now();
    const bool got = quitter.try_lock_for(800ms);
    return std::make_pair(got, ms_since(t0));
  });
  ASSERT_TRUE(queue_reaches(name, 1));
  const std::string quitter_id = raw->cmd({"LINDEX", queue_of(name), "0"});

  dlock::Client c2(server->url());
  dlock::FairLock patient(c2, name, {}, fair);
  auto wait = std::async(std::launch::async, [&] {
    auto r = patient.acquire(notified());
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(queue_reaches(name, 2));

  auto [got, took] = quit.get();
  EXPECT_FALSE(got);
  EXPECT_GE(took, 790ms);
  EXPECT_LT(took, 1500ms);
  // Gone at once: checked right after try_lock_for returned.
  EXPECT_EQ(queued(name), 1);
  EXPECT_NE(raw->cmd({"LINDEX", queue_of(name), "0"}), quitter_id);
  EXPECT_EQ(raw->cmd({"ZSCORE", timeouts_of(name), quitter_id}), "(nil)");
  EXPECT_EQ(raw->cmd_int({"HEXISTS", grant_of(name), quitter_id}), 0) << "its stored lease was left behind";

  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(wait.wait_for(5s), std::future_status::ready) << "the release did not reach the new head";
  auto [r, at] = wait.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_LT(at - t0, 1000ms);
  EXPECT_TRUE(r->release().ok());
}

// A waiter cancelled through its stop_token leaves the queue, its stored lease, and no lock. Its
// FairLock object keeps the channel subscribed for its next waits, until it is destroyed.
TEST_F(FairLockTest, CancelledWaiterLeavesTheQueue) {
  const std::string name = "cancel";
  dlock::FairLock holder(*client, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::Client wc(server->url());
  std::string channel;
  {
    dlock::FairLock waiter(wc, name);
    std::stop_source stop;
    auto fut = std::async(std::launch::async, [&] { return waiter.acquire(dlock::WaitOptions{}, stop.get_token()); });
    ASSERT_TRUE(queue_reaches(name, 1));
    const std::string id = raw->cmd({"LINDEX", queue_of(name), "0"});
    channel = channel_of(name, id);
    EXPECT_EQ(channel_subscribers(*raw, channel), 1);
    EXPECT_EQ(raw->cmd({"HGET", grant_of(name), id}), "30000") << "the lease a release would hand over";

    const auto t0 = SteadyClock::now();
    stop.request_stop();
    ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
    auto r = fut.get();
    EXPECT_EQ(r.code(), make_error_code(dlock::errc::cancelled)) << r.error().what();
    EXPECT_LT(ms_since(t0), 1000ms);
    EXPECT_EQ(queued(name), 0);
    EXPECT_EQ(raw->cmd_int({"ZCARD", timeouts_of(name)}), 0);
    EXPECT_EQ(exists(grant_of(name)), 0);
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(channel_subscribers(*raw, channel), 1) << "the FairLock object keeps its channel for its next waits";
  }
  EXPECT_TRUE(eventually([&] { return channel_subscribers(*raw, channel) == 0; }, 2000ms))
      << "the channel outlived its FairLock object";
  ASSERT_TRUE(held->release().ok());
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(exists(key_of(name)), 0) << "the cancelled waiter took the lock after all";
  EXPECT_EQ(wc.active_leases(), 0u);
}

// A stop requested before the call ends the wait at once, many times over: nothing is queued
// or taken (and the stop callback, which runs inside the call, races nothing: TSan).
TEST_F(FairLockTest, AStopRequestedBeforeTheCallEndsTheWait) {
  const std::string name = "stopped-early";
  dlock::FairLock holder(*client, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::FairLock waiter(*client, name);
  std::stop_source stop;
  stop.request_stop();
  for (int i = 0; i < 50; ++i) {
    auto got = std::make_shared<std::promise<dlock::Result<dlock::Lease>>>();
    auto fut = got->get_future();
    waiter.async_acquire(dlock::WaitOptions{}, [got](dlock::Result<dlock::Lease> r) { got->set_value(std::move(r)); },
                         stop.get_token());
    ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
    auto r = fut.get();
    EXPECT_EQ(r.code(), make_error_code(dlock::errc::cancelled)) << (r.ok() ? "acquired" : r.error().what());
  }
  EXPECT_EQ(queued(name), 0);
  ASSERT_TRUE(held->release().ok());
}

// try_lock() never overtakes a live waiter, even when the lock itself is free; a place expires
// on the server's clock.
TEST_F(FairLockTest, TryLockDoesNotOvertakeQueuedWaiters) {
  const std::string name = "no-barging";
  dlock::FairLock l(*client, name);
  // A waiter placed by hand, whose place ends 1.5 s from now on the server's clock.
  const long long deadline = raw->server_ms() + 1500;
  ASSERT_EQ(raw->cmd_int({"RPUSH", queue_of(name), "ghost"}), 1);
  ASSERT_EQ(raw->cmd_int({"ZADD", timeouts_of(name), std::to_string(deadline), "ghost"}), 1);
  const auto t0 = SteadyClock::now();
  EXPECT_FALSE(l.try_lock()) << "try_lock() took a free lock ahead of a queued waiter";
  auto busy = l.acquire(no_wait());
  EXPECT_EQ(busy.code(), make_error_code(dlock::errc::busy)) << busy.error().what();
  EXPECT_EQ(queued(name), 1) << "try_lock() must not queue";

  SteadyClock::time_point got_at{};
  ASSERT_TRUE(eventually([&] {
    if (!l.try_lock()) return false;
    got_at = SteadyClock::now();
    return true;
  }, 4000ms, 20ms)) << "the expired place was never dropped";
  EXPECT_GE(got_at - t0, 1300ms) << "the place was dropped before its deadline";
  EXPECT_TRUE(l.owns_lock());
  EXPECT_EQ(queued(name), 0);
  l.unlock();
  EXPECT_EQ(exists(key_of(name)), 0);
}

// ------------------------------------------------------------------------ only the head is woken

// Six waiters, each with its own Client, queued behind a holder. Each release hands the lock
// straight to the head: exactly one script on the server per handoff (the release; the head sends
// no try of its own, and nobody else is woken), and each fencing token is the previous one + 1.
TEST_F(FairLockTest, ReleaseHandsTheLockToTheHeadOnly) {
  constexpr int kWaiters = 6;
  const std::string name = "herd";
  const auto fair = waiter_ttl(30000ms);  // renewals every 10 s: none during the test
  dlock::FairLock holder(*client, name, {}, fair);
  {
    auto warm = holder.acquire(no_wait());  // loads fair_acquire and fair_release
    ASSERT_TRUE(warm.ok()) << warm.error().what();
    ASSERT_TRUE(warm->release().ok());
  }
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  struct Waiter {
    std::unique_ptr<dlock::Client> client;
    std::promise<dlock::FencingToken> acquired;
    std::promise<void> release_now;
    std::thread thread;
  };
  std::vector<Waiter> waiters(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    Waiter& w = waiters[i];
    w.client = std::make_unique<dlock::Client>(server->url());
    w.thread = std::thread([&w, &name, fair] {
      dlock::FairLock l(*w.client, name, {}, fair);
      auto r = l.acquire(notified());
      if (!r.ok()) {
        w.acquired.set_value(dlock::FencingToken{});
        return;
      }
      w.acquired.set_value(r->token());
      w.release_now.get_future().wait();
      (void)r->release();
    });
    ASSERT_TRUE(queue_reaches(name, i + 1)) << "waiter " << i << " never queued";
  }
  // One channel for this process: each Client subscribed it once.
  const auto ids = raw->cmd_array({"LRANGE", queue_of(name), "0", "-1"});
  ASSERT_EQ(ids.size(), static_cast<size_t>(kWaiters));
  EXPECT_EQ(channel_subscribers(*raw, channel_of(name, ids[0])), kWaiters);
  EXPECT_EQ(raw->cmd_int({"HLEN", grant_of(name)}), kWaiters);
  std::this_thread::sleep_for(100ms);

  std::vector<std::future<dlock::FencingToken>> got;
  for (auto& w : waiters) got.push_back(w.acquired.get_future());
  auto previous = held->token();
  for (int i = 0; i < kWaiters; ++i) {
    const long long before = script_calls(*raw);
    const auto t0 = SteadyClock::now();
    if (i == 0) {
      ASSERT_TRUE(held->release().ok());
    } else {
      waiters[i - 1].release_now.set_value();
    }
    ASSERT_EQ(got[i].wait_for(5s), std::future_status::ready) << "waiter " << i << " was not handed the lock";
    EXPECT_LT(ms_since(t0), 1000ms) << "waiter " << i << " was not handed the lock by the release";
    const auto token = got[i].get();
    ASSERT_TRUE(static_cast<bool>(token)) << "waiter " << i << " failed";
    EXPECT_EQ(token.value, previous.value + 1) << "handoff " << i << ": the fence did not count it once";
    EXPECT_EQ(std::to_string(token.value), get(fence_of(name)));
    EXPECT_EQ(get(key_of(name)), ids[i]) << "handoff " << i << " went to another waiter than the head";
    previous = token;
    std::this_thread::sleep_for(150ms);  // time for any other waiter to react
    const long long after = script_calls(*raw);
    EXPECT_EQ(after - before, 1) << "release " << i << ": scripts run besides the release";
    EXPECT_EQ(queued(name), kWaiters - 1 - i);
    EXPECT_EQ(raw->cmd_int({"HLEN", grant_of(name)}), kWaiters - 1 - i);
  }
  waiters.back().release_now.set_value();
  for (auto& w : waiters) w.thread.join();
  EXPECT_EQ(exists(key_of(name)), 0);
  EXPECT_EQ(exists(grant_of(name)), 0);
}

// -------------------------------------------------------------------------------- handover

// The head gets the lock with the lease TTL it stored when it queued (not the releaser's), and
// its acquire returns without a try of its own: the release is the only script run.
TEST_F(FairLockTest, HandoffGoesStraightToTheHeadWithItsOwnLease) {
  const std::string name = "handoff";
  dlock::FairLock holder(*client, name);
  {
    auto warm = holder.acquire(no_wait());  // loads fair_acquire and fair_release
    ASSERT_TRUE(warm.ok()) << warm.error().what();
    ASSERT_TRUE(warm->release().ok());
  }
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::Client wc(server->url());
  dlock::LeaseOptions lease;
  lease.ttl = 7000ms;
  dlock::FairLock waiter(wc, name, lease);
  auto fut = std::async(std::launch::async, [&] {
    auto r = waiter.acquire(notified());
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(queue_reaches(name, 1));
  const std::string id = raw->cmd({"LINDEX", queue_of(name), "0"});
  EXPECT_EQ(raw->cmd({"HGET", grant_of(name), id}), "7000");
  EXPECT_GT(raw->cmd_int({"PTTL", grant_of(name)}), 0) << "the stored leases must expire with the places";
  std::this_thread::sleep_for(100ms);

  const long long before = script_calls(*raw);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  auto [r, at] = fut.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_LT(at - t0, 1000ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(script_calls(*raw) - before, 1) << "the head tried on its own instead of taking the handover";
  EXPECT_EQ(r->owner(), id);
  EXPECT_EQ(get(key_of(name)), id);
  EXPECT_EQ(std::to_string(r->token().value), get(fence_of(name)));
  EXPECT_GT(r->token(), held->token());
  const long long pttl = raw->cmd_int({"PTTL", key_of(name)});
  EXPECT_GT(pttl, 6000);
  EXPECT_LE(pttl, 7000);
  EXPECT_TRUE(r->held());
  EXPECT_GT(r->remaining(), 5000ms);
  EXPECT_LE(r->remaining(), 7000ms);
  EXPECT_EQ(wc.active_leases(), 1u) << "the handed-over lease is not on the watchdog";
  EXPECT_EQ(queued(name), 0);
  EXPECT_EQ(exists(grant_of(name)), 0);
  EXPECT_TRUE(r->release().ok());
  EXPECT_EQ(exists(key_of(name)), 0);
  EXPECT_EQ(wc.active_leases(), 0u);
}

// Hands the lock to `id` as fair_release.lua does, but publishes nothing: a 'granted' message
// lost, or still on its way.
void silent_handover(RawConnection& raw, const std::string& name, const std::string& id) {
  const std::string ttl = raw.cmd({"HGET", grant_of(name), id});
  ASSERT_NE(ttl, "(nil)") << "no lease stored for " << id;
  raw.cmd({"INCR", fence_of(name)});
  ASSERT_EQ(raw.cmd({"SET", key_of(name), id, "PX", ttl}), "OK");
  ASSERT_EQ(raw.cmd({"LPOP", queue_of(name)}), id);
  raw.cmd({"ZREM", timeouts_of(name), id});
  raw.cmd({"HDEL", grant_of(name), id});
}

// The waiter whose handover message never arrives finds the lock its own at its next try (its
// recheck): acquired with that handover's token, and the key's TTL restarted.
TEST_F(FairLockTest, LostGrantMessageIsRecoveredByTheNextTry) {
  const std::string name = "lost-grant";
  ASSERT_EQ(raw->cmd({"SET", key_of(name), "someone-else", "PX", "30000"}), "OK");
  dlock::Client wc(server->url());
  dlock::FairLock waiter(wc, name);
  auto fut = std::async(std::launch::async, [&] { return waiter.acquire(dlock::WaitOptions{20s, 300ms}); });
  ASSERT_TRUE(queue_reaches(name, 1));
  const std::string id = raw->cmd({"LINDEX", queue_of(name), "0"});
  silent_handover(*raw, name, id);
  ASSERT_EQ(raw->cmd_int({"PEXPIRE", key_of(name), "20000"}), 1);  // shorter: the try must restore it
  const std::string fence = get(fence_of(name));

  ASSERT_EQ(fut.wait_for(3s), std::future_status::ready) << "the waiter never noticed it holds the lock";
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->owner(), id);
  EXPECT_EQ(std::to_string(r->token().value), fence) << "not the handover's token";
  EXPECT_EQ(get(fence_of(name)), fence) << "the recovery counted a second acquisition";
  EXPECT_GT(raw->cmd_int({"PTTL", key_of(name)}), 25000) << "the lease TTL was not restarted";
  EXPECT_TRUE(r->release().ok());
  EXPECT_EQ(exists(key_of(name)), 0);
}

// The same, with the fencing counter lost after the handover (a restart without persistence that
// kept the lock key): the recovered lease gets a token above the handover's, not none.
TEST_F(FairLockTest, LostGrantRecoveredAfterTheCounterWasLostGetsAHigherToken) {
  const std::string name = "lost-grant-fence";
  ASSERT_EQ(raw->cmd({"SET", key_of(name), "someone-else", "PX", "30000"}), "OK");
  dlock::Client wc(server->url());
  dlock::FairLock waiter(wc, name);
  auto fut = std::async(std::launch::async, [&] { return waiter.acquire(dlock::WaitOptions{20s, 300ms}); });
  ASSERT_TRUE(queue_reaches(name, 1));
  const std::string id = raw->cmd({"LINDEX", queue_of(name), "0"});
  silent_handover(*raw, name, id);
  const auto handed = std::stoull(get(fence_of(name)));
  ASSERT_EQ(raw->cmd_int({"DEL", fence_of(name)}), 1);

  ASSERT_EQ(fut.wait_for(3s), std::future_status::ready);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->owner(), id);
  EXPECT_GT(r->token().value, handed);
  EXPECT_EQ(std::to_string(r->token().value), get(fence_of(name)));
  EXPECT_TRUE(r->release().ok());
}

// The subscriber connections are killed and the lock released at once: the 'granted' message
// finds nobody listening. The waiter (recheck 10 s) still gets the lock promptly: after the
// Notifier subscribes again, every wait re-checks and finds the lock its own.
TEST_F(FairLockTest, GrantLostWithTheSubscriberConnectionIsRecovered) {
  const std::string name = "lost-pubsub";
  dlock::FairLock holder(*client, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client wc(server->url());
  dlock::FairLock waiter(wc, name);
  auto fut = std::async(std::launch::async, [&] { return waiter.acquire(notified()); });
  ASSERT_TRUE(queue_reaches(name, 1));
  const std::string id = raw->cmd({"LINDEX", queue_of(name), "0"});
  std::this_thread::sleep_for(100ms);

  EXPECT_GE(raw->cmd_int({"CLIENT", "KILL", "TYPE", "pubsub"}), 1);
  ASSERT_TRUE(held->release().ok());
  EXPECT_EQ(get(key_of(name)), id) << "the release did not hand the lock over";
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready) << "the lost handover was never recovered";
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->owner(), id);
  EXPECT_EQ(std::to_string(r->token().value), get(fence_of(name)));
  EXPECT_TRUE(r->release().ok());
  EXPECT_EQ(exists(key_of(name)), 0);
}

// A waiter is handed the lock just as its wait times out (the message not yet read): its cleanup
// (fair_dequeue.lua) drops that lock and hands it on to the next waiter, which gets it at once
// (recheck 10 s: by the message). Nothing is left behind.
TEST_F(FairLockTest, WaiterTimingOutAsItIsGrantedLeaksNothing) {
  const std::string name = "grant-timeout";
  ASSERT_EQ(raw->cmd({"SET", key_of(name), "someone-else", "PX", "30000"}), "OK");
  dlock::Client qc(server->url());
  dlock::FairLock quitter(qc, name);
  const auto q0 = SteadyClock::now();
  auto quit = std::async(std::launch::async, [&] { return quitter.acquire(dlock::WaitOptions{700ms, 10000ms}); });
  ASSERT_TRUE(queue_reaches(name, 1));
  const std::string quitter_id = raw->cmd({"LINDEX", queue_of(name), "0"});

  dlock::Client pc(server->url());
  dlock::FairLock patient(pc, name);
  auto wait = std::async(std::launch::async, [&] {
    auto r = patient.acquire(notified());
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(queue_reaches(name, 2));
  std::this_thread::sleep_until(q0 + 600ms);
  silent_handover(*raw, name, quitter_id);
  const auto granted_token = std::stoull(get(fence_of(name)));

  auto r = quit.get();
  const auto quit_at = SteadyClock::now();
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::timeout)) << (r.ok() ? "acquired" : r.error().what());
  if (r.ok()) (void)r->release();
  ASSERT_EQ(wait.wait_for(5s), std::future_status::ready) << "the dropped handover never reached the next waiter";
  auto [p, at] = wait.get();
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_LT(at - quit_at, 1000ms);
  EXPECT_GT(p->token().value, granted_token);
  EXPECT_EQ(get(key_of(name)), p->owner());
  EXPECT_EQ(qc.active_leases(), 0u);
  EXPECT_TRUE(p->release().ok());
  EXPECT_EQ(exists(key_of(name)), 0);
  EXPECT_EQ(queued(name), 0);
  EXPECT_EQ(exists(grant_of(name)), 0);
}

// The same race with real releases, at offsets around the waiter's deadline: whichever way each
// round goes, the lock ends up free or with the next waiter, never stuck with the quitter.
TEST_F(FairLockTest, ReleasesAroundAWaitersDeadlineLeakNothing) {
  const std::string name = "grant-race";
  dlock::Client hc(server->url());
  dlock::Client qc(server->url());
  dlock::Client pc(server->url());
  dlock::FairLock holder(hc, name);
  dlock::FairLock quitter(qc, name);
  dlock::FairLock patient(pc, name);
  int quitter_won = 0;
  for (int round = 0; round < 12; ++round) {
    auto held = holder.acquire(dlock::WaitOptions{5s, 100ms});
    ASSERT_TRUE(held.ok()) << held.error().what();
    const auto q0 = SteadyClock::now();
    auto quit = std::async(std::launch::async, [&] { return quitter.acquire(dlock::WaitOptions{300ms, 10000ms}); });
    ASSERT_TRUE(queue_reaches(name, 1));
    auto wait = std::async(std::launch::async, [&] { return patient.acquire(notified(10s)); });
    ASSERT_TRUE(queue_reaches(name, 2));
    std::this_thread::sleep_until(q0 + 300ms + milliseconds(round - 6));
    ASSERT_TRUE(held->release().ok());
    auto q = quit.get();
    if (q.ok()) {
      ++quitter_won;
      std::this_thread::sleep_for(2ms);
      ASSERT_TRUE(q->release().ok());
    } else {
      EXPECT_EQ(q.code(), make_error_code(dlock::errc::timeout)) << q.error().what();
    }
    ASSERT_EQ(wait.wait_for(3s), std::future_status::ready) << "round " << round << ": the lock got stuck";
    auto p = wait.get();
    ASSERT_TRUE(p.ok()) << "round " << round << ": " << p.error().what();
    EXPECT_EQ(get(key_of(name)), p->owner());
    ASSERT_TRUE(p->release().ok());
    EXPECT_EQ(exists(key_of(name)), 0) << "round " << round;
    EXPECT_EQ(queued(name), 0) << "round " << round;
    EXPECT_EQ(exists(grant_of(name)), 0) << "round " << round;
    EXPECT_EQ(qc.active_leases(), 0u) << "round " << round;
  }
  std::printf("quitter got the lock in %d of 12 rounds\n", quitter_won);
}

// --------------------------------------------------------------------------- exclusion and fencing

// Threads (sharing a Client and with their own) and processes increment a counter with a
// non-atomic GET/SET under the lock: no update is lost, nobody is ever inside with another.
TEST_F(FairLockTest, ExclusionUnderLoadAcrossThreadsAndProcesses) {
  constexpr int kThreads = 4;
  constexpr int kChildren = 2;
  constexpr int kIters = 15;
  const std::string name = "counter";
  const std::string url = server->url();
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int i = 0; i < kChildren; ++i) {
    children.push_back(std::make_unique<ChildProcess>([url, name]() -> int {
      dlock::Client c(url);
      if (!c.ping().ok()) return 2;
      dlock::FairLock l(c, name);
      for (int k = 0; k < kIters; ++k) {
        std::lock_guard<dlock::FairLock> guard(l);
        auto in = c.command({"INCR", "inside"});
        if (!in.ok() || in->integer() != 1) return 3;
        auto v = c.command({"GET", "n"});
        if (!v.ok()) return 4;
        const long long n = v->is_nil() ? 0 : std::stoll(v->str());
        if (!c.command({"SET", "n", std::to_string(n + 1)}).ok()) return 5;
        auto out = c.command({"DECR", "inside"});
        if (!out.ok() || out->integer() != 0) return 6;
      }
      return 0;
    }));
  }
  dlock::FairLock shared_lock(*client, name);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::optional<dlock::Client> own;
        std::optional<dlock::FairLock> own_lock;
        if (t % 2 == 1) {
          own.emplace(url);
          own_lock.emplace(*own, name);
        }
        dlock::FairLock& l = own_lock ? *own_lock : shared_lock;
        RawConnection conn(*server);
        for (int k = 0; k < kIters; ++k) {
          std::lock_guard<dlock::FairLock> guard(l);
          if (conn.cmd_int({"INCR", "inside"}) != 1) failures.fetch_add(1);
          const long long n = to_count(conn.cmd({"GET", "n"}));
          std::this_thread::yield();
          conn.cmd({"SET", "n", std::to_string(n + 1)});
          if (conn.cmd_int({"DECR", "inside"}) != 0) failures.fetch_add(1);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker " << t << ": " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& ch : children) {
    auto code = ch->wait_for(40s);
    ASSERT_TRUE(code.has_value()) << "child " << ch->pid() << " did not finish";
    EXPECT_EQ(*code, 0) << "child " << ch->pid();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(to_count(get("n")), (kThreads + kChildren) * kIters);
  EXPECT_EQ(to_count(get("inside")), 0);
  EXPECT_EQ(exists(key_of(name)), 0);
  EXPECT_EQ(queued(name), 0);
}

// Tokens increase strictly across successive holders — FairLocks of several Clients and a Mutex
// of the same name (they share the counter) — and after the counter is lost.
TEST_F(FairLockTest, FencingTokensStrictlyIncrease) {
  const std::string name = "fence";
  const std::string url = server->url();
  dlock::Mutex mutex(*client, name);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      dlock::Client c(url);
      dlock::FairLock l(c, name);
      for (int k = 0; k < 10; ++k) {
        auto r = l.acquire(dlock::WaitOptions{20s, 500ms});
        if (!r.ok()) {
          failures.fetch_add(1);
          continue;
        }
        // Recorded under the lock: the list is in the order of the holds.
        if (!c.command({"RPUSH", "tokens", std::to_string(r->token().value)}).ok()) failures.fetch_add(1);
        if (!r->release().ok()) failures.fetch_add(1);
        (void)t;
      }
    });
  }
  for (int k = 0; k < 5; ++k) {
    std::lock_guard<dlock::Mutex> g(mutex);
    raw->cmd({"RPUSH", "tokens", std::to_string(mutex.fencing_token().value)});
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto tokens = raw->cmd_array({"LRANGE", "tokens", "0", "-1"});
  ASSERT_EQ(tokens.size(), 35u);
  for (size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_LT(std::stoull(tokens[i - 1]), std::stoull(tokens[i])) << "at hold " << i;
  }
  // The counter is lost (a restart without persistence): it is re-seeded above every old token.
  ASSERT_EQ(raw->cmd_int({"DEL", key_of(name) + ":fence"}), 1);
  dlock::FairLock l(*client, name);
  auto r = l.acquire(no_wait());
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_GT(r->token().value, std::stoull(tokens.back()));
  auto again = l.acquire(dlock::WaitOptions{0ms, 500ms});
  EXPECT_EQ(again.code(), make_error_code(dlock::errc::busy));
  EXPECT_TRUE(r->release().ok());
}

// ------------------------------------------------------------------------------ leases and loss

// The watchdog keeps the hold past its TTL; deleting the key behind the holder's back is reported
// as a loss (taken) within about a renewal interval, and the release then says lock_lost.
TEST_F(FairLockTest, LossReportedWhenKeyDeleted) {
  LossProbe probe;
  auto opts = watchdog(600ms);  // renewed every 200 ms
  probe.attach(opts);
  dlock::FairLock l(*client, "loss", opts);
  auto lease = l.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  std::this_thread::sleep_for(900ms);  // 1.5x the TTL
  EXPECT_EQ(get(l.key()), lease->owner());
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(client->active_leases(), 1u);

  ASSERT_EQ(raw->cmd_int({"DEL", l.key()}), 1);
  ASSERT_TRUE(eventually([&] { return probe.calls.load() >= 1; }, 2000ms)) << "on_lost never ran";
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_TRUE(lease->lost());
  EXPECT_EQ(client->active_leases(), 0u);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(exists(l.key()), 0) << "a renewal re-created the lost lock";
  EXPECT_EQ(probe.calls.load(), 1);
  auto rel = lease->release();
  EXPECT_EQ(rel.code(), make_error_code(dlock::errc::lock_lost)) << rel.error().what();
}

// The forced unlock script removes the holder's key, wakes the head of the queue (not a poll:
// recheck 10 s), and the old holder, listening for revocation, learns of its loss at once (its
// next renewal would be 10 s away).
TEST_F(FairLockTest, ForceUnlockWakesTheHeadAndReportsLossToTheHolder) {
  const std::string name = "forced";
  LossProbe probe;
  auto opts = watchdog(30000ms);
  opts.listen_for_revocation = true;
  probe.attach(opts);
  dlock::FairLock holder(*client, name, opts);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client wc(server->url());
  dlock::FairLock waiter(wc, name);
  auto fut = std::async(std::launch::async, [&] {
    auto r = waiter.acquire(notified());
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(queue_reaches(name, 1));
  std::this_thread::sleep_for(100ms);

  const auto t0 = SteadyClock::now();
  const auto& s = dlock::detail::scripts::fair_force_unlock;
  auto reply = raw->cmd_array({"EVAL", s.source, "2", key_of(name), queue_of(name), key_of(name) + ":ch",
                               key_of(name) + ":ch:"});
  ASSERT_EQ(reply.size(), 2u);
  EXPECT_EQ(reply[0], "1");
  EXPECT_EQ(reply[1], held->owner());
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  auto [r, at] = fut.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_LT(at - t0, 1000ms);
  EXPECT_GT(r->token(), held->token());
  ASSERT_TRUE(eventually([&] { return probe.calls.load() >= 1; }, 2000ms)) << "the old holder never learned";
  EXPECT_LT(ms_since(t0), 1500ms);
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_EQ(held->release().code(), make_error_code(dlock::errc::lock_lost));
  EXPECT_EQ(get(key_of(name)), r->owner()) << "the old holder's release touched the new holder's key";
  EXPECT_TRUE(r->release().ok());
}

// ---------------------------------------------------------------------------- errors and API

// A key of another type at the lock's key or its queue: wrong_type, from acquire() and as a
// std::system_error from the std members.
TEST_F(FairLockTest, KeyOfAnotherTypeIsWrongType) {
  ASSERT_EQ(raw->cmd_int({"HSET", key_of("hash"), "owner", "1"}), 1);  // e.g. a ReentrantMutex
  dlock::FairLock h(*client, "hash");
  auto r = h.acquire(no_wait());
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::wrong_type)) << r.error().what();
  auto waited = h.acquire(dlock::WaitOptions{300ms, 100ms});
  EXPECT_EQ(waited.code(), make_error_code(dlock::errc::wrong_type)) << waited.error().what();
  try {
    h.lock();
    ADD_FAILURE() << "lock() on a hash did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), make_error_code(dlock::errc::wrong_type)) << e.what();
  }
  EXPECT_EQ(raw->cmd({"TYPE", key_of("hash")}), "hash");
  EXPECT_EQ(raw->cmd_int({"EXISTS", queue_of("hash")}), 0);

  ASSERT_EQ(raw->cmd({"SET", queue_of("q"), "not-a-list"}), "OK");
  dlock::FairLock q(*client, "q");
  auto rq = q.acquire(no_wait());
  EXPECT_EQ(rq.code(), make_error_code(dlock::errc::wrong_type)) << rq.error().what();
  EXPECT_EQ(exists(key_of("q")), 0) << "a lock was taken despite the broken queue";
}

// The Lease API, std adapters and async form behave as Mutex's do.
TEST_F(FairLockTest, StdAdaptersAndAsyncAcquire) {
  dlock::FairLock l(*client, "api");
  {
    std::unique_lock<dlock::FairLock> lk(l);
    EXPECT_TRUE(l.owns_lock());
    EXPECT_TRUE(static_cast<bool>(l.fencing_token()));
    EXPECT_GT(l.remaining(), 0ms);
    EXPECT_THROW(l.lock(), std::system_error) << "lock() of a held FairLock by its own thread";
    auto other = std::async(std::launch::async, [&] { return l.try_lock_for(200ms); });
    EXPECT_FALSE(other.get());
  }
  EXPECT_FALSE(l.owns_lock());
  EXPECT_EQ(exists(l.key()), 0);
  EXPECT_EQ(queued("api"), 0);

  std::promise<dlock::Result<dlock::Lease>> done;
  l.async_acquire(dlock::WaitOptions{}, [&](dlock::Result<dlock::Lease> r) { done.set_value(std::move(r)); });
  auto fut = done.get_future();
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  auto r = fut.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(get(l.key()), r->owner());
  EXPECT_EQ(raw->cmd_int({"TTL", l.key() + ":fence"}), -1) << "the fencing counter must not expire";
  EXPECT_TRUE(r->release().ok());
  EXPECT_TRUE(r->release().ok()) << "a repeated release is harmless";
  EXPECT_EQ(exists(l.key()), 0);
}

// A waiter whose Client is destroyed returns errc::shutdown promptly.
TEST_F(FairLockTest, DestroyingClientFailsPendingAcquireWithShutdown) {
  const std::string name = "shutdown";
  dlock::FairLock holder(*client, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  auto wc = std::make_unique<dlock::Client>(server->url());
  // Shared with a detached thread: an acquire that never returns leaks the thread rather than
  // hanging the test binary.
  auto waiter = std::make_shared<dlock::FairLock>(*wc, name, dlock::LeaseOptions{}, waiter_ttl(30000ms));
  struct Outcome {
    std::mutex mu;
    std::optional<std::error_code> code;
  };
  auto out = std::make_shared<Outcome>();
  std::thread([waiter, out] {
    auto r = waiter->acquire(dlock::WaitOptions{std::nullopt, 10000ms});
    std::lock_guard g(out->mu);
    out->code = r.code();
  }).detach();
  ASSERT_TRUE(queue_reaches(name, 1));
  std::this_thread::sleep_for(100ms);
  const auto t0 = SteadyClock::now();
  wc.reset();
  EXPECT_LT(ms_since(t0), 5000ms);
  ASSERT_TRUE(eventually([&] {
    std::lock_guard g(out->mu);
    return out->code.has_value();
  }, 5000ms)) << "an acquire() pending when its Client was destroyed never returned";
  std::lock_guard g(out->mu);
  EXPECT_EQ(*out->code, make_error_code(dlock::errc::shutdown)) << out->code->message();
  EXPECT_EQ(get(key_of(name)), held->owner());
  // The waiter left the queue as the Client shut down; before, its place stayed for its
  // waiter_ttl (30 s here), and a release in that time handed the lock to it.
  EXPECT_EQ(queued(name), 0);
  EXPECT_EQ(raw->cmd_int({"ZCARD", timeouts_of(name)}), 0);
  EXPECT_EQ(raw->cmd_int({"HLEN", grant_of(name)}), 0);
}

// The waiter behind the head is told the holder's TTL. Here the head gives up while a holder
// that will never release (a crashed one: its key just expires) keeps the lock: the waiter
// now heads the queue of a lock that becomes free without a word. It used to sleep until its
// next refresh (waiter_ttl / 3 = 10 s here); now it tries when the holder's TTL ends.
TEST_F(FairLockTest, NextWaiterTriesWhenTheHolderExpiresAfterTheHeadLeft) {
  const std::string name = "position-one";
  const milliseconds holder_ttl = 2000ms;
  ASSERT_EQ(raw->cmd({"SET", key_of(name), "crashed-holder", "PX", std::to_string(holder_ttl.count())}), "OK");
  const auto set_at = SteadyClock::now();
  dlock::Client other(server->url());
  dlock::FairLock head(other, name);
  auto head_wait = std::async(std::launch::async, [&] { return head.acquire(dlock::WaitOptions{800ms, 10000ms}); });
  ASSERT_TRUE(queue_reaches(name, 1));
  dlock::FairLock behind(*client, name, {}, waiter_ttl(30000ms));
  auto behind_wait = std::async(std::launch::async, [&] { return behind.acquire(notified(20s)); });
  ASSERT_TRUE(queue_reaches(name, 2));
  auto head_result = head_wait.get();
  EXPECT_EQ(head_result.code(), make_error_code(dlock::errc::timeout));
  EXPECT_EQ(queued(name), 1) << "the head left the queue";
  ASSERT_EQ(behind_wait.wait_for(scaled(4000ms)), std::future_status::ready)
      << "the waiter slept through the free lock";
  auto lease = behind_wait.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(ms_since(set_at), holder_ttl + scaled(1500ms));
  EXPECT_TRUE(lease->release().ok());
}

// A release whose handover fails (here the holder's ACL loses INCR, so counting the head's token
// fails) leaves the lock held and writes no release marker: Redis keeps what a script wrote
// before an error, and the marker, written first, made a retried release answer "already
// released" while the key was still this owner's. (A counter that is no counter no longer
// fails a release: fence_counter_test.cpp.)
TEST_F(FairLockTest, FailedHandoverLeavesNoReleaseMarker) {
  const std::string name = "failed-handover";
  ASSERT_EQ(raw->cmd({"ACL", "SETUSER", "holder", "on", ">pw", "~*", "&*", "+@all"}), "OK");
  dlock::Client as_holder("redis://holder:pw@" + server->host() + ":" + std::to_string(server->port()));
  dlock::FairLock holder(as_holder, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client other(server->url());
  dlock::FairLock waiter(other, name);
  auto waiting = std::async(std::launch::async, [&] { return waiter.acquire(dlock::WaitOptions{1500ms, 10000ms}); });
  ASSERT_TRUE(queue_reaches(name, 1));
  ASSERT_EQ(raw->cmd({"ACL", "SETUSER", "holder", "-incr"}), "OK");
  auto released = held->release();
  EXPECT_FALSE(released.ok()) << "the handover's INCR failed, yet the release succeeded";
  if (!released.ok()) {
    EXPECT_EQ(released.code(), make_error_code(dlock::errc::auth)) << released.error().what();
  }
  EXPECT_EQ(get(key_of(name)), held->owner()) << "the lock is still held";
  EXPECT_EQ(exists(key_of(name) + ":rel"), 0) << "a release that failed left its marker";
  EXPECT_EQ(queued(name), 1) << "the waiter keeps its place";
  EXPECT_EQ(waiting.get().code(), make_error_code(dlock::errc::timeout));
}

// A Client that holds a FairLock and also waits for it (another thread) is destroyed: its
// shutdown releases the lock, which goes to the head of the queue. Its own waiter was that head,
// and was granted the lock as the Client went away: the key then sat out its lease TTL (30 s)
// with nobody holding it. Now the waiter leaves the queue first, and the lock goes to the next
// waiter, another Client's.
TEST_F(FairLockTest, ShutdownHandsTheLockPastItsOwnWaiterToTheNext) {
  const std::string name = "shutdown-handoff";
  auto going = std::make_unique<dlock::Client>(server->url());
  auto holder = std::make_shared<dlock::FairLock>(*going, name);
  auto held = holder->acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  auto own_waiter = std::make_shared<dlock::FairLock>(*going, name);
  auto own = std::async(std::launch::async, [own_waiter] { return own_waiter->acquire(notified(60s)); });
  ASSERT_TRUE(queue_reaches(name, 1));
  dlock::FairLock next(*client, name);
  auto theirs = std::async(std::launch::async, [&] { return next.acquire(notified(60s)); });
  ASSERT_TRUE(queue_reaches(name, 2));

  const auto t0 = SteadyClock::now();
  going.reset();
  ASSERT_EQ(own.wait_for(scaled(5s)), std::future_status::ready);
  auto own_result = own.get();
  EXPECT_EQ(own_result.code(), make_error_code(dlock::errc::shutdown))
      << (own_result.ok() ? "acquired on a Client being destroyed" : own_result.error().what());
  ASSERT_EQ(theirs.wait_for(scaled(5s)), std::future_status::ready)
      << "the lock went to the destroyed Client's waiter; key holds " << get(key_of(name));
  auto lease = theirs.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(ms_since(t0), scaled(3000ms));
  EXPECT_EQ(get(key_of(name)), lease->owner());
  EXPECT_EQ(queued(name), 0);
  EXPECT_TRUE(lease->release().ok());
}

TEST_F(FairLockTest, InvalidArgumentsThrow) {
  EXPECT_THROW(dlock::FairLock(*client, "a{b}"), std::system_error);
  EXPECT_THROW(dlock::FairLock(*client, "ok", {}, waiter_ttl(5ms)), std::system_error);
}

// ------------------------------------------------------------------------------------ Cluster

// On Redis Cluster the handover is announced with SPUBLISH on the shard that owns the lock's slot,
// where the waiter's process SSUBSCRIBEd its channel: the waiter gets the lock from the release
// alone (one script on that shard), and the FairLock keeps that one sharded subscription.
TEST(FairLockClusterTest, HandoverOnShardedChannels) {
  dlock::test::RedisCluster cluster(3, 0);
  const std::string name = "cluster-handoff";
  dlock::Client hc(cluster.url());
  dlock::Client wc(cluster.url_with_seed(1));
  ASSERT_TRUE(hc.ping(10s).ok());
  ASSERT_TRUE(wc.ping(10s).ok());
  RawConnection owner(cluster.node(cluster.owner_of_key(key_of(name))));
  dlock::FairLock holder(hc, name);
  {
    auto warm = holder.acquire(no_wait());  // loads fair_acquire and fair_release on the shard
    ASSERT_TRUE(warm.ok()) << warm.error().what();
    ASSERT_TRUE(warm->release().ok());
  }
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::FairLock waiter(wc, name);
  for (int round = 0; round < 2; ++round) {
    auto fut = std::async(std::launch::async, [&] { return waiter.acquire(notified()); });
    ASSERT_TRUE(eventually([&] { return owner.cmd_int({"LLEN", queue_of(name)}) == 1; }, 5000ms));
    const std::string id = owner.cmd({"LINDEX", queue_of(name), "0"});
    auto numsub = owner.cmd_array({"PUBSUB", "SHARDNUMSUB", channel_of(name, id)});
    ASSERT_EQ(numsub.size(), 2u);
    // Once per Client of this process that waited: the waiter's, and from round 1 the holder's.
    EXPECT_EQ(numsub[1], round == 0 ? "1" : "2") << "not subscribed on the lock's shard";
    std::this_thread::sleep_for(100ms);

    const long long before = script_calls(owner);
    const auto t0 = SteadyClock::now();
    ASSERT_TRUE(held->release().ok());
    ASSERT_EQ(fut.wait_for(5s), std::future_status::ready) << "round " << round;
    auto r = fut.get();
    ASSERT_TRUE(r.ok()) << r.error().what();
    EXPECT_LT(ms_since(t0), 1000ms) << "round " << round << ": not handed over by the release";
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(script_calls(owner) - before, 1) << "round " << round << ": the waiter tried on its own";
    EXPECT_EQ(owner.cmd({"GET", key_of(name)}), r->owner());
    EXPECT_GT(r->token(), held->token());
    // The holder queues behind the new holder, and gets it back the same way next round.
    auto back = std::async(std::launch::async, [&] { return holder.acquire(notified()); });
    ASSERT_TRUE(eventually([&] { return owner.cmd_int({"LLEN", queue_of(name)}) == 1; }, 5000ms));
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(r->release().ok());
    ASSERT_EQ(back.wait_for(5s), std::future_status::ready);
    held = back.get();
    ASSERT_TRUE(held.ok()) << held.error().what();
  }
  ASSERT_TRUE(held->release().ok());
  EXPECT_EQ(owner.cmd_int({"EXISTS", key_of(name)}), 0);
  EXPECT_EQ(owner.cmd_int({"EXISTS", grant_of(name)}), 0);
}

}  // namespace
