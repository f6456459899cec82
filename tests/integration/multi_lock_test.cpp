// Integration tests of dlock::MultiLock against real redis-server processes.

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/multi_lock.hpp"
#include "locks/multi_lock_ordered.hpp"
#include "scripts/script.hpp"
#include "support/fairness_rounds.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace dlock::detail::scripts {
extern const Script multi_release;
}  // namespace dlock::detail::scripts

namespace {

using dlock::test::command_calls;
using dlock::test::key_of;
using dlock::test::no_wait;
using dlock::test::watchdog;

using namespace std::chrono_literals;
using dlock::test::RawConnection;
using dlock::test::eventually;
using dlock::test::ms_since;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class MultiLockTest : public dlock::test::ServerFixture {
 protected:
  std::string get(const std::string& key) { return raw->cmd({"GET", key}); }
  long long exists(const std::string& key) { return raw->cmd_int({"EXISTS", key}); }
};

TEST_F(MultiLockTest, NamesAreSortedDeduplicatedAndValidated) {
  dlock::MultiLock m(*client, {"c", "a", "c", "b"});
  EXPECT_EQ(m.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(m.keys(), (std::vector<std::string>{key_of("a"), key_of("b"), key_of("c")}));
  EXPECT_THROW(dlock::MultiLock(*client, {}), std::system_error);
  EXPECT_THROW(dlock::MultiLock(*client, {"a", "b{x}"}), std::system_error);
  EXPECT_THROW(dlock::MultiLock(*client, {"a", ""}), std::system_error);
}

TEST_F(MultiLockTest, AllOrNothing) {
  ASSERT_EQ(raw->cmd({"SET", key_of("b"), "foreign", "NX", "PX", "60000"}), "OK");
  dlock::MultiLock m(*client, {"a", "b", "c"});
  EXPECT_FALSE(m.try_lock());
  EXPECT_EQ(exists(key_of("a")), 0);
  EXPECT_EQ(exists(key_of("c")), 0);
  EXPECT_EQ(exists(key_of("a") + ":fence"), 0) << "a failed attempt must write nothing";
  EXPECT_EQ(get(key_of("b")), "foreign");

  auto busy = m.acquire(no_wait());
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.code(), dlock::errc::busy);

  raw->cmd({"DEL", key_of("b")});
  ASSERT_TRUE(m.try_lock());
  EXPECT_TRUE(m.owns_lock());
  const std::string owner = get(key_of("a"));
  EXPECT_NE(owner, "(nil)");
  EXPECT_EQ(get(key_of("b")), owner);
  EXPECT_EQ(get(key_of("c")), owner);
  for (const char* n : {"a", "b", "c"}) {
    const long long pttl = raw->cmd_int({"PTTL", key_of(n)});
    EXPECT_GT(pttl, 0) << n;
  }
  m.unlock();
  EXPECT_FALSE(m.lost());
  EXPECT_EQ(exists(key_of("a")), 0);
  EXPECT_EQ(exists(key_of("b")), 0);
  EXPECT_EQ(exists(key_of("c")), 0);
  EXPECT_EQ(get(key_of("b") + ":rel"), owner);
}

TEST_F(MultiLockTest, MultiLockAndMutexExcludeEachOther) {
  dlock::Mutex ma(*client, "a");
  dlock::MultiLock m(*client, {"a", "b"});
  ASSERT_TRUE(ma.try_lock());
  EXPECT_FALSE(m.try_lock());
  EXPECT_EQ(exists(key_of("b")), 0);
  ma.unlock();

  ASSERT_TRUE(m.try_lock());
  dlock::Client other(server->url());
  dlock::Mutex ma2(other, "a");
  dlock::Mutex mb2(other, "b");
  dlock::Mutex mc2(other, "c");
  EXPECT_FALSE(ma2.try_lock());
  EXPECT_FALSE(mb2.try_lock());
  EXPECT_TRUE(mc2.try_lock());
  mc2.unlock();
  m.unlock();
  EXPECT_TRUE(mb2.try_lock());
  mb2.unlock();
}

// Two MultiLocks over overlapping sets, in many threads of two Clients: both make progress, no
// deadlock, and no lock is ever held by two at once.
TEST_F(MultiLockTest, OverlappingSetsNoDeadlockNoOverlap) {
  constexpr int kThreadsPerSet = 4;
  constexpr int kIters = 12;
  dlock::Client other(server->url());
  dlock::MultiLock abc(*client, {"a", "b", "c"});
  dlock::MultiLock bcd(other, {"d", "c", "b"});
  std::map<std::string, std::atomic<int>> inside;
  for (const char* n : {"a", "b", "c", "d"}) inside[n].store(0);
  std::atomic<int> overlaps{0};
  std::atomic<int> failures{0};
  std::array<std::atomic<int>, 2> done{};
  auto worker = [&](dlock::MultiLock& m, int side) {
    try {
      for (int i = 0; i < kIters; ++i) {
        std::unique_lock<dlock::MultiLock> guard(m);
        for (const auto& n : m.names()) {
          if (inside[n].fetch_add(1) != 0) overlaps.fetch_add(1);
        }
        std::this_thread::sleep_for(1ms);
        for (const auto& n : m.names()) inside[n].fetch_sub(1);
        done[static_cast<std::size_t>(side)].fetch_add(1);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "worker: " << e.what();
      failures.fetch_add(1);
    }
  };
  const auto t0 = SteadyClock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreadsPerSet; ++t) {
    threads.emplace_back(worker, std::ref(abc), 0);
    threads.emplace_back(worker, std::ref(bcd), 1);
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(done[0].load(), kThreadsPerSet * kIters);
  EXPECT_EQ(done[1].load(), kThreadsPerSet * kIters);
  EXPECT_LT(ms_since(t0), 20s);
  for (const char* n : {"a", "b", "c", "d"}) EXPECT_EQ(exists(key_of(n)), 0) << n;
}

// A waiter on {a,b} is woken by the release of b (not the first lock), well before its recheck.
TEST_F(MultiLockTest, WaiterWokenByReleaseOfAnyLock) {
  dlock::Client other(server->url());
  dlock::Mutex mb(other, "b");
  auto held = mb.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::MultiLock m(*client, {"a", "b"});
  dlock::WaitOptions w;
  w.timeout = milliseconds(10000);
  w.recheck_interval = milliseconds(10000);
  auto fut = std::async(std::launch::async, [&] { return m.acquire(w); });
  // Let the waiter subscribe and make its first attempt.
  ASSERT_TRUE(eventually(
      [&] {
        auto r = raw->cmd_array({"PUBSUB", "NUMSUB", key_of("b") + ":ch"});
        return r.size() == 2 && r[1] == "1";
      },
      3000ms));
  std::this_thread::sleep_for(200ms);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  auto lease = fut.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(ms_since(t0), 1000ms);
  EXPECT_EQ(get(key_of("a")), lease->owner());
  EXPECT_EQ(get(key_of("b")), lease->owner());
}

// Deleting one lock behind the holder's back loses the whole hold; the rest is freed.
TEST_F(MultiLockTest, LossOfOneLockLosesTheSet) {
  dlock::LeaseOptions o = watchdog(900ms);
  std::atomic<int> lost_calls{0};
  o.events.on_lost = [&](dlock::LossReason) { lost_calls.fetch_add(1); };
  dlock::MultiLock m(*client, {"a", "b", "c"}, o);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  raw->cmd({"DEL", key_of("b")});
  ASSERT_TRUE(eventually([&] { return lease->lost(); }, 3000ms));
  // The lease reads as lost a moment before its on_lost has run on the loop thread (under TSan a
  // check in between saw no call): wait for the call, then see it came once.
  ASSERT_TRUE(eventually([&] { return lost_calls.load() >= 1; }, 3000ms));
  EXPECT_EQ(lost_calls.load(), 1);
  // The locks still ours were released by the renewal that found the loss.
  EXPECT_EQ(exists(key_of("a")), 0);
  EXPECT_EQ(exists(key_of("c")), 0);
  EXPECT_EQ(lease->release().code(), dlock::errc::lock_lost);

  // The same through the std members: lost() tells it.
  ASSERT_TRUE(m.try_lock());
  raw->cmd({"SET", key_of("c"), "intruder"});
  ASSERT_TRUE(eventually([&] { return m.lost(); }, 3000ms));
  m.unlock();
  EXPECT_TRUE(m.lost());
  EXPECT_EQ(get(key_of("c")), "intruder") << "never delete a lock that is not ours";
  EXPECT_EQ(exists(key_of("a")), 0);
}

// The release of a partly lost set reports lock_lost and still frees what was ours.
TEST_F(MultiLockTest, ReleaseOfPartlyLostSet) {
  dlock::LeaseOptions o;
  o.mode = dlock::LeaseMode::fixed_ttl;
  o.ttl = 20000ms;
  dlock::MultiLock m(*client, {"a", "b"}, o);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok());
  raw->cmd({"SET", key_of("b"), "intruder"});
  EXPECT_EQ(lease->release().code(), dlock::errc::lock_lost);
  EXPECT_EQ(exists(key_of("a")), 0);
  EXPECT_EQ(get(key_of("b")), "intruder");
}

TEST_F(MultiLockTest, FencingTokensStrictlyIncrease) {
  dlock::MultiLock m(*client, {"b", "a"});
  dlock::Mutex mb(*client, "b");
  dlock::FencingToken last{};
  dlock::FencingToken last_b{};
  for (int i = 0; i < 5; ++i) {
    auto lease = m.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    EXPECT_GT(lease->token(), last);
    last = lease->token();
    auto toks = m.tokens(*lease);
    ASSERT_TRUE(toks.ok()) << toks.error().what();
    ASSERT_EQ(toks->size(), 2u);
    EXPECT_EQ((*toks)[0], lease->token()) << "the Lease's token is the first lock's";
    EXPECT_EQ(std::to_string((*toks)[1].value), get(key_of("b") + ":fence"));
    EXPECT_GT((*toks)[1], last_b);
    last_b = (*toks)[1];
    ASSERT_TRUE(lease->release().ok());
    EXPECT_FALSE(m.tokens(*lease).ok());
    // A Mutex on b continues b's sequence.
    auto lb = mb.acquire(no_wait());
    ASSERT_TRUE(lb.ok());
    EXPECT_GT(lb->token(), last_b);
    last_b = lb->token();
  }
  ASSERT_TRUE(m.try_lock());
  EXPECT_GT(m.fencing_token(), last);
  m.unlock();
}

// A lock of the set expired on the server and was taken by another owner before this Client's
// next renewal noticed: the Lease still reads as held, but tokens() must not hand out the next
// holder's token (it read the counters with plain GETs).
TEST_F(MultiLockTest, TokensOfALockTakenOverBehindTheLeasesBackAreLost) {
  dlock::MultiLock m(*client, {"a", "b"}, watchdog(30s));
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  auto before = m.tokens(*lease);
  ASSERT_TRUE(before.ok()) << before.error().what();
  ASSERT_EQ(before->size(), 2u);
  // b's key expired and another owner took it: its counter moved on.
  ASSERT_EQ(raw->cmd({"SET", key_of("b"), "another-owner", "PX", "30000"}), "OK");
  raw->cmd_int({"INCR", key_of("b") + ":fence"});
  ASSERT_TRUE(lease->held()) << "the watchdog has not renewed yet";
  auto after = m.tokens(*lease);
  EXPECT_EQ(after.code(), make_error_code(dlock::errc::lock_lost))
      << (after.ok() ? "read the next holder's token " + std::to_string(after->back().value) : after.error().what());
}

TEST_F(MultiLockTest, WrongTypeWhenOneNameHoldsAHash) {
  raw->cmd({"HSET", key_of("b"), "f", "v"});
  dlock::MultiLock m(*client, {"a", "b", "c"});
  auto r = m.acquire(no_wait());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), dlock::errc::wrong_type) << r.error().what();
  // The message names the key that holds the hash, not merely the first of the set.
  EXPECT_NE(r.error().what().find("'" + key_of("b") + "' holds a hash"), std::string::npos) << r.error().what();
  EXPECT_EQ(exists(key_of("a")), 0);
  EXPECT_EQ(exists(key_of("c")), 0);
  EXPECT_THROW(m.try_lock(), std::system_error);
}

TEST_F(MultiLockTest, ReleaseIsIdempotent) {
  dlock::MultiLock m(*client, {"a", "b"});
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok());
  const std::string owner = lease->owner();
  ASSERT_TRUE(lease->release().ok());
  EXPECT_TRUE(lease->release().ok());
  EXPECT_FALSE(lease->held());
  EXPECT_FALSE(lease->lost());

  // The script itself: a retried release (first reply lost) answers 2; a stranger gets 0.
  const auto& s = dlock::detail::scripts::multi_release;
  auto eval = [&](const std::string& who) {
    return raw->cmd_int({"EVAL", s.source, "6", key_of("a"), key_of("a") + ":rel", key_of("a") + ":waiters",
                         key_of("b"), key_of("b") + ":rel", key_of("b") + ":waiters", who, "30000", "client-id",
                         key_of("a") + ":ch", key_of("b") + ":ch"});
  };
  EXPECT_EQ(eval(owner), 2);
  EXPECT_EQ(eval("someone-else"), 0);

  // unlock() twice through the std members is harmless too.
  ASSERT_TRUE(m.try_lock());
  m.unlock();
  m.unlock();
  EXPECT_FALSE(m.lost());
  EXPECT_EQ(exists(key_of("a")), 0);
}

// ------------------------------------------------- the ordered path (Cluster, keys across slots)
//
// A standalone server has no slots, so these tests force the ordered path through the internal
// hook; the Redis commands it sends are the ones it sends on a Cluster (one slot group each).

using dlock::detail::MultiLockAccess;

using dlock::test::scaled;

TEST_F(MultiLockTest, OneScriptUnlessOnClusterAcrossSlots) {
  dlock::MultiLock m(*client, {"a", "b", "c"});
  EXPECT_FALSE(MultiLockAccess::ordered(m)) << "standalone: one script";
  MultiLockAccess::force_ordered(m);
  EXPECT_TRUE(MultiLockAccess::ordered(m));
  // Slot groups: keys of one slot together, groups in the order of their first key.
  const auto groups = dlock::detail::slot_groups({"p{x}1", "p{y}", "p{x}2"});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<std::string>{"p{x}1", "p{x}2"}));
  EXPECT_EQ(groups[1], (std::vector<std::string>{"p{y}"}));
  EXPECT_EQ(dlock::detail::slot_groups(m.keys()).size(), 3u) << "a, b and c hash to three slots";
}

// A waiter whose try gave back the group it had taken (a later group was busy) hears its own
// give-back on that group's channel, and must not take it for the release it waits for: before,
// it tried again at once, three round trips per round, for as long as the busy lock was held.
TEST_F(MultiLockTest, OrderedWaiterSleepsThroughItsOwnGiveBack) {
  dlock::Client other(server->url());
  dlock::Mutex mc(other, "c");
  auto held_c = mc.acquire(no_wait());
  ASSERT_TRUE(held_c.ok()) << held_c.error().what();
  dlock::MultiLock m(*client, {"c", "a"});  // groups {a} then {c}: a is taken, c is busy
  MultiLockAccess::force_ordered(m);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] { return m.acquire(dlock::WaitOptions{30s, 30s}, stop.get_token()); });
  dlock::test::StopAtExit<std::future<dlock::Result<dlock::Lease>>> stop_at_exit{stop, &waiting};
  ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(*raw, key_of("a") + ":ch") == 1; }, 3s));
  std::this_thread::sleep_for(300ms);  // its try after subscribing
  const long long before = dlock::test::script_calls(*raw);
  std::this_thread::sleep_for(1000ms);
  EXPECT_LE(dlock::test::script_calls(*raw) - before, 3) << "the waiter kept trying while c was held";
  EXPECT_EQ(exists(key_of("a")), 0) << "a waiting MultiLock holds no part of its set";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(held_c->release().ok());
  ASSERT_EQ(waiting.wait_for(scaled(2s)), std::future_status::ready) << "the release of c did not wake it";
  auto lease = waiting.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, scaled(2s));
  EXPECT_TRUE(lease->release().ok());
}

// Two ordered MultiLocks over overlapping sets, each blocked on a lock of its own ({a,c} on c,
// {a,d} on d): each one's give-back of a is heard by the other. Before a waiter listened only to
// the lock it found busy, the two woke each other round after round while c and d were held.
TEST_F(MultiLockTest, OrderedWaitersOverOverlappingSetsDoNotWakeEachOther) {
  dlock::Client other(server->url()), second(server->url());
  dlock::Mutex mc(other, "c"), md(other, "d");
  auto held_c = mc.acquire(no_wait());
  auto held_d = md.acquire(no_wait());
  ASSERT_TRUE(held_c.ok() && held_d.ok());
  dlock::MultiLock ac(*client, {"a", "c"}), ad(second, {"a", "d"});
  MultiLockAccess::force_ordered(ac);
  MultiLockAccess::force_ordered(ad);
  std::stop_source stop;
  auto one = std::async(std::launch::async, [&] { return ac.acquire(dlock::WaitOptions{30s, 30s}, stop.get_token()); });
  auto two = std::async(std::launch::async, [&] { return ad.acquire(dlock::WaitOptions{30s, 30s}, stop.get_token()); });
  dlock::test::StopAtExit<> stop_at_exit{stop};
  ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(*raw, key_of("a") + ":ch") == 2; }, 3s));
  std::this_thread::sleep_for(300ms);
  const long long before = dlock::test::script_calls(*raw);
  std::this_thread::sleep_for(1000ms);
  EXPECT_LE(dlock::test::script_calls(*raw) - before, 6) << "the two waiters kept waking each other";
  ASSERT_TRUE(held_c->release().ok());
  ASSERT_EQ(one.wait_for(scaled(2s)), std::future_status::ready) << "the release of c did not wake {a,c}";
  auto got_one = one.get();
  ASSERT_TRUE(got_one.ok()) << got_one.error().what();
  ASSERT_TRUE(got_one->release().ok());
  ASSERT_TRUE(held_d->release().ok());
  ASSERT_EQ(two.wait_for(scaled(2s)), std::future_status::ready) << "the release of d did not wake {a,d}";
  auto got_two = two.get();
  ASSERT_TRUE(got_two.ok()) << got_two.error().what();
  EXPECT_TRUE(got_two->release().ok());
}

// A MultiLock waiter blocked on b is not woken by every release of a, which it found free.
TEST_F(MultiLockTest, WaiterIsWokenOnlyByTheLockItFoundBusy) {
  dlock::Client other(server->url());
  dlock::Mutex mb(other, "b"), ma(other, "a");
  auto held_b = mb.acquire(no_wait());
  ASSERT_TRUE(held_b.ok()) << held_b.error().what();
  dlock::MultiLock m(*client, {"a", "b"});
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] { return m.acquire(dlock::WaitOptions{30s, 30s}, stop.get_token()); });
  dlock::test::StopAtExit<> stop_at_exit{stop};
  ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(*raw, key_of("b") + ":ch") == 1; }, 3s));
  std::this_thread::sleep_for(300ms);
  const long long before = dlock::test::script_calls(*raw);
  constexpr int kChurn = 100;
  for (int i = 0; i < kChurn; ++i) {
    auto l = ma.acquire(no_wait());
    ASSERT_TRUE(l.ok()) << l.error().what();
    ASSERT_TRUE(l->release().ok());
  }
  std::this_thread::sleep_for(100ms);
  // The churn's own acquire and release scripts, and at most a few of the waiter's tries.
  EXPECT_LE(dlock::test::script_calls(*raw) - before, 2 * kChurn + 3) << "woken by releases of a lock it found free";
  ASSERT_TRUE(held_b->release().ok());
  ASSERT_EQ(waiting.wait_for(scaled(2s)), std::future_status::ready) << "the release of b did not wake it";
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_TRUE(got->release().ok());
}

// All or nothing: a busy lock makes the try give back what it took BEFORE it reports busy, and
// a waiting MultiLock holds no part of its set (a Mutex on one of its names gets in).
TEST_F(MultiLockTest, OrderedAllOrNothingAndPartialHoldsReleasedAtOnce) {
  dlock::Client other(server->url());
  dlock::Mutex mc(other, "c");
  auto held_c = mc.acquire(no_wait());
  ASSERT_TRUE(held_c.ok()) << held_c.error().what();
  dlock::MultiLock m(*client, {"d", "c", "b", "a"});
  MultiLockAccess::force_ordered(m);

  for (int i = 0; i < 20; ++i) {
    auto busy = m.acquire(no_wait());
    ASSERT_EQ(busy.code(), make_error_code(dlock::errc::busy)) << busy.error().what();
    // Checked on another connection right after the reply: a and b (taken before c) are free.
    ASSERT_EQ(exists(key_of("a")), 0) << "try " << i;
    ASSERT_EQ(exists(key_of("b")), 0) << "try " << i;
    ASSERT_EQ(exists(key_of("d")), 0) << "d comes after the busy c: never taken";
  }
  EXPECT_EQ(client->active_leases(), 0u);

  // While the MultiLock waits for c, a Mutex on a gets in: no part is held while waiting.
  auto waiting = std::async(std::launch::async, [&] { return m.acquire(dlock::WaitOptions{20s, 10s}); });
  dlock::Mutex ma(other, "a");
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(eventually(
      [&] {
        auto a = ma.acquire(no_wait());
        return a.ok() && a->release().ok();
      },
      scaled(3s)));

  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held_c->release().ok());  // its "released" wakes the waiter at once
  ASSERT_EQ(waiting.wait_for(scaled(5s)), std::future_status::ready);
  auto lease = waiting.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(ms_since(t0), scaled(2s));
  for (const char* n : {"a", "b", "c", "d"}) EXPECT_EQ(get(key_of(n)), lease->owner()) << n;
  auto tokens = m.tokens(*lease);
  ASSERT_TRUE(tokens.ok()) << tokens.error().what();
  ASSERT_EQ(tokens->size(), 4u);
  EXPECT_EQ(lease->token(), tokens->front()) << "the Lease's token is the first name's";
  EXPECT_EQ(client->active_leases(), 4u) << "one renewal record per slot group";
  ASSERT_TRUE(lease->release().ok());
  for (const char* n : {"a", "b", "c", "d"}) EXPECT_EQ(exists(key_of(n)), 0) << n;
  EXPECT_EQ(client->active_leases(), 0u);
}

// An ordered try still out when its wait ended (the server was paused) takes every group once
// the server answers; nobody receives that hold, so it is given back. Before, giving it back
// used the parent record's scripts, which a hold in parts does not have: a null dereference on
// the event-loop thread (SIGSEGV).
TEST_F(MultiLockTest, OrderedTryThatWinsAfterItsWaitEndedIsGivenBack) {
  dlock::ClientOptions options;
  options.command_timeout = scaled(6000ms);  // the try outlives the wait, not the pause
  dlock::Client slow(server->url(), options);
  ASSERT_TRUE(slow.ping().ok());
  dlock::MultiLock m(slow, {"a", "b", "c"});
  MultiLockAccess::force_ordered(m);
  server->pause();
  const milliseconds wait = scaled(400ms);
  const auto t0 = SteadyClock::now();
  auto none = m.acquire(dlock::WaitOptions{wait});
  const milliseconds took = ms_since(t0);
  server->resume();
  EXPECT_EQ(none.code(), make_error_code(dlock::errc::timeout)) << (none.ok() ? "acquired" : none.error().what());
  EXPECT_LT(took, wait + scaled(1000ms)) << "the wait outlived its deadline";
  // Taken (every group: c, the last, carries a release marker) and given back.
  ASSERT_TRUE(eventually(
      [&] {
        return exists(key_of("c") + ":rel") == 1 && exists(key_of("a")) + exists(key_of("b")) + exists(key_of("c")) == 0 &&
               slow.active_leases() == 0;
      },
      scaled(4s)))
      << "a=" << exists(key_of("a")) << " c=" << exists(key_of("c")) << " c:rel=" << exists(key_of("c") + ":rel")
      << " active=" << slow.active_leases();
  auto next = m.acquire(no_wait());
  ASSERT_TRUE(next.ok()) << next.error().what();
  EXPECT_TRUE(next->release().ok());
}

// Two sets over overlapping names, given in opposite orders, taken from many threads of two
// Clients: every thread finishes (no deadlock) and no name is ever held twice.
TEST_F(MultiLockTest, OrderedOverlappingSetsInOppositeOrdersNeverDeadlock) {
  constexpr int kThreadsPerSet = 4;
  constexpr int kIters = 10;
  dlock::Client other(server->url());
  dlock::MultiLock forward(*client, {"a", "b", "c", "d"});
  dlock::MultiLock backward(other, {"e", "d", "c", "b"});
  dlock::MultiLock single_script(other, {"c", "a"});  // the one-script path joins in
  MultiLockAccess::force_ordered(forward);
  MultiLockAccess::force_ordered(backward);
  std::map<std::string, std::atomic<int>> inside;
  for (const char* n : {"a", "b", "c", "d", "e"}) inside[n].store(0);
  std::atomic<int> overlaps{0}, failures{0}, done{0};
  auto worker = [&](dlock::MultiLock& m) {
    for (int i = 0; i < kIters; ++i) {
      auto lease = m.acquire(dlock::WaitOptions{scaled(30s), 200ms});
      if (!lease.ok()) {
        ADD_FAILURE() << "acquire: " << lease.error().what();
        failures.fetch_add(1);
        return;
      }
      for (const auto& n : m.names()) {
        if (inside[n].fetch_add(1) != 0) overlaps.fetch_add(1);
      }
      std::this_thread::sleep_for(1ms);
      for (const auto& n : m.names()) inside[n].fetch_sub(1);
      if (!lease->release().ok()) failures.fetch_add(1);
      done.fetch_add(1);
    }
  };
  const auto t0 = SteadyClock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreadsPerSet; ++t) {
    threads.emplace_back(worker, std::ref(forward));
    threads.emplace_back(worker, std::ref(backward));
  }
  threads.emplace_back(worker, std::ref(single_script));
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(done.load(), (2 * kThreadsPerSet + 1) * kIters);
  EXPECT_LT(ms_since(t0), scaled(30s));
  for (const char* n : {"a", "b", "c", "d", "e"}) EXPECT_EQ(exists(key_of(n)), 0) << n;
  EXPECT_EQ(client->active_leases(), 0u);
  EXPECT_EQ(other.active_leases(), 0u);
}

// Each slot group is renewed on its own; losing one loses the Lease once and frees the others
// at once. extend() and remaining() act on every group.
TEST_F(MultiLockTest, OrderedHoldIsRenewedExtendedAndLostAsAWhole) {
  dlock::LeaseOptions o = watchdog(900ms);  // renewed every 300 ms
  std::atomic<int> lost_calls{0};
  o.events.on_lost = [&](dlock::LossReason) { lost_calls.fetch_add(1); };
  dlock::MultiLock m(*client, {"a", "b", "c"}, o);
  MultiLockAccess::force_ordered(m);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  std::this_thread::sleep_for(1500ms);  // well past the TTL: only renewals keep it
  EXPECT_TRUE(lease->held());
  EXPECT_GT(lease->remaining(), 0ms);
  for (const char* n : {"a", "b", "c"}) EXPECT_EQ(get(key_of(n)), lease->owner()) << n;

  ASSERT_TRUE(lease->extend(20000ms).ok());
  for (const char* n : {"a", "b", "c"}) EXPECT_GT(raw->cmd_int({"PTTL", key_of(n)}), 15000) << n;
  EXPECT_GT(lease->remaining(), 15000ms);

  raw->cmd({"DEL", key_of("b")});
  ASSERT_TRUE(lease->extend(20000ms).code() == make_error_code(dlock::errc::not_owner));
  ASSERT_TRUE(eventually([&] { return lease->lost(); }, scaled(3s)));
  ASSERT_TRUE(eventually([&] { return exists(key_of("a")) == 0 && exists(key_of("c")) == 0; }, scaled(3s)))
      << "the groups still held were not freed";
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(lost_calls.load(), 1) << "on_lost runs once for the whole set";
  EXPECT_EQ(lease->release().code(), make_error_code(dlock::errc::lock_lost));
  EXPECT_EQ(client->active_leases(), 0u);
}

// The release names the Client's wait queue for the set as its first key (multi_release.lua),
// which the hold-back is keyed by; the set's queue is not any lock's key.
TEST_F(MultiLockTest, ReleasingProcessLetsAWaiterElsewhereGoFirst) {
  dlock::MultiLock mine(*client, {"courtesy-a", "courtesy-b", "courtesy-c"});
  dlock::Client other_client(server->url());
  dlock::MultiLock theirs(other_client, {"courtesy-a", "courtesy-b", "courtesy-c"});
  const dlock::WaitOptions wait{10000ms, 10000ms};
  const int won = dlock::test::rounds_the_other_client_went_first(
      *raw, key_of("courtesy-a") + ":ch", [&] { return mine.acquire(wait); }, [&] { return theirs.acquire(wait); });
  EXPECT_GE(won, 8) << "the other Client's waiter went first in only " << won << " of 10 rounds";
}

// Issue #6 (Redis calls per EVALSHA cost throughput): a GET per lock key finds it free and
// checks its type at once; TYPE runs only when that GET failed (the wrong-type reply is kept).
TEST_F(MultiLockTest, UncontendedPairRunsNoTypeCheck) {
  dlock::MultiLock m(*client, {"calls-a", "calls-b", "calls-c"});
  auto first = m.acquire(no_wait());  // seeds the fencing counters
  ASSERT_TRUE(first.ok() && first->release().ok());
  raw->cmd({"CONFIG", "RESETSTAT"});
  auto a = m.acquire(no_wait());
  ASSERT_TRUE(a.ok()) << a.error().what();
  ASSERT_TRUE(a->release().ok());
  EXPECT_EQ(command_calls(*raw, "type"), 0);
  EXPECT_EQ(command_calls(*raw, "exists"), 0);

  ASSERT_EQ(raw->cmd_int({"RPUSH", key_of("calls-b"), "x"}), 1);
  auto wrong = m.acquire(no_wait());
  EXPECT_EQ(wrong.code(), make_error_code(dlock::errc::wrong_type));
  EXPECT_NE(wrong.error().what().find("list"), std::string::npos) << wrong.error().what();
  EXPECT_EQ(exists(key_of("calls-a")), 0) << "a failed attempt must write nothing";
}

// A release reports how many subscribers its notifications reached (2 + n, n the most on one
// channel). The Client's form names its wait queue for the set first (odd #KEYS): the releasing
// Client keys its hold-back by that first key; the ordered path's pairs-only form is the same.
TEST_F(MultiLockTest, ReleaseReportsTheSubscribersItNotified) {
  dlock::MultiLock m(*client, {"n-a", "n-b"});
  RawConnection listener(*server);
  ASSERT_EQ(listener.cmd_array({"SUBSCRIBE", key_of("n-b") + ":ch"}).size(), 3u);
  const auto& s = dlock::detail::scripts::multi_release;
  const std::string a = key_of("n-a"), b = key_of("n-b");
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(raw->cmd_int({"EVAL", s.source, "7", "dlock:multi:{n-a}{n-b}", a, a + ":rel", a + ":waiters", b,
                          b + ":rel", b + ":waiters", lease->owner(), "30000", "client-id", a + ":ch", b + ":ch"}),
            3);
  EXPECT_EQ(exists(a) + exists(b), 0);
  auto again = m.acquire(no_wait());
  ASSERT_TRUE(again.ok());
  auto release_again = [&] {
    return raw->cmd_int({"EVAL", s.source, "6", a, a + ":rel", a + ":waiters", b, b + ":rel", b + ":waiters",
                         again->owner(), "30000", "client-id", a + ":ch", b + ":ch"});
  };
  EXPECT_EQ(release_again(), 3);
  EXPECT_EQ(release_again(), 2)
      << "a retried release";
}

}  // namespace
