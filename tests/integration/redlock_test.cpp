// Integration tests of dlock::Redlock against 5 real, independent redis-server processes.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/redlock.hpp"
#include "scripts/script.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_helpers.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/server_group.hpp"
#include "support/wait.hpp"

namespace dlock::detail::scripts {
extern const Script redlock_acquire;
extern const Script redlock_fence;
extern const Script redlock_release;
extern const Script redlock_renew;
}  // namespace dlock::detail::scripts

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::LossProbe;
using dlock::test::ms_since;
using dlock::test::no_wait;
using dlock::test::pointers;
using dlock::test::scaled;
using dlock::test::watchdog;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Clients = std::vector<std::unique_ptr<dlock::Client>>;

class RedlockTest : public ::testing::Test {
 protected:
  static constexpr std::size_t N = 5;

  // Nodes come back quickly after a restart, and a stopped node is given up on in bounded time.
  static dlock::ClientOptions options(milliseconds command_timeout = scaled(2000ms)) {
    dlock::ClientOptions o;
    o.command_timeout = command_timeout;
    o.connect_timeout = command_timeout;
    o.reconnect.initial = 10ms;
    o.reconnect.max = 100ms;
    return o;
  }

  std::string get(std::size_t node, const std::string& key) { return group.raw(node).cmd({"GET", key}); }

  dlock::test::ServerGroup group{N};
};

TEST_F(RedlockTest, ValidatesItsArguments) {
  Clients c = group.clients(options());
  std::vector<dlock::Client*> p = pointers(c);
  EXPECT_THROW(dlock::Redlock({}, "x"), std::system_error);
  EXPECT_THROW(dlock::Redlock({p[0], p[1]}, "x"), std::system_error);          // even
  EXPECT_THROW(dlock::Redlock({p[0], p[1], p[0]}, "x"), std::system_error);    // twice
  EXPECT_THROW(dlock::Redlock({p[0], p[1], nullptr}, "x"), std::system_error);
  EXPECT_THROW(dlock::Redlock(p, "a{b}"), std::system_error);
  EXPECT_THROW(dlock::Redlock::connect("redis://127.0.0.1:1,redis://127.0.0.1:2"), std::system_error);
  dlock::Redlock lock(p, "x");
  EXPECT_EQ(lock.node_count(), 5u);
  EXPECT_EQ(lock.quorum(), 3u);
  EXPECT_EQ(lock.key(), key_of("x"));
  auto from_urls = dlock::Redlock::connect(group.urls()[0] + "," + group.urls()[1] + " , " + group.urls()[2]);
  EXPECT_EQ(from_urls.size(), 3u);
  // One server three times is one master, not a quorum of three.
  dlock::Client again1(group.urls()[0]), again2(group.urls()[0]);
  EXPECT_THROW(dlock::Redlock({p[0], &again1, &again2}, "x"), std::system_error);
  EXPECT_THROW(dlock::Redlock::connect(group.urls()[0] + "," + group.urls()[0] + "," + group.urls()[1]), std::system_error);
  // A ',' in a password is the password's: a URL ends only where the next scheme begins.
  const std::string port = group.urls()[0].substr(group.urls()[0].rfind(':') + 1);
  auto with_comma = dlock::Redlock::connect("redis://:pa,ss@127.0.0.1:" + port + "," + group.urls()[1] + "," + group.urls()[2]);
  ASSERT_EQ(with_comma.size(), 3u);
  EXPECT_EQ(with_comma[0]->address().password, "pa,ss");
}

TEST_F(RedlockTest, TakesTheKeyOnEveryNodeAndReleasesEverywhere) {
  Clients c = group.clients(options());
  dlock::Redlock lock(pointers(c), "all", watchdog(10s));
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  // A majority at once; the others as their replies come in (the try does not wait for them).
  auto holding = [&] {
    std::size_t n = 0;
    for (std::size_t i = 0; i < N; ++i) n += get(i, key_of("all")) == lease->owner() ? 1 : 0;
    return n;
  };
  EXPECT_GE(holding(), 3u);
  EXPECT_TRUE(eventually([&] { return holding() == N; }, scaled(1000ms)));
  EXPECT_GT(lease->remaining(), 9000ms);
  dlock::Redlock other(pointers(c), "all");
  EXPECT_EQ(other.acquire(no_wait()).code(), dlock::errc::busy);
  ASSERT_TRUE(lease->release().ok());
  // Released on a majority when release() returns, on the others as their replies come in.
  EXPECT_LE(holding(), 2u);
  EXPECT_TRUE(eventually([&] { return holding() == 0; }, scaled(1000ms)));
  // The standard adapters.
  {
    std::unique_lock lk(lock);
    EXPECT_TRUE(lock.owns_lock());
    EXPECT_FALSE(other.try_lock_for(50ms));
  }
  EXPECT_FALSE(lock.owns_lock());
  EXPECT_FALSE(lock.lost());
  EXPECT_TRUE(other.try_lock());
  other.unlock();
}

// A renewal sets the key again on a node that lost it, but never after this owner released it
// there, even where the release found the key already gone (a renewal crossing the release).
TEST_F(RedlockTest, RenewalSetsAMissingKeyAgainButNeverResurrectsAReleasedOne) {
  Clients c = group.clients(options());
  dlock::Redlock lock(pointers(c), "resurrect", watchdog(10s));
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const std::string key = key_of("resurrect");
  const std::string token = std::to_string(lease->token().value);
  auto renew_on = [&](std::size_t node) {
    const auto& s = dlock::detail::scripts::redlock_renew;
    return group.raw(node).cmd({"EVAL", s.source, "3", key, key + ":rel", key + ":fence", lease->owner(), "10000", token});
  };
  // Every node took it (the try returned once a majority had).
  for (std::size_t i = 0; i < N; ++i) {
    ASSERT_TRUE(eventually([&] { return get(i, key) == lease->owner(); }, scaled(1000ms))) << "node " << i;
  }
  ASSERT_EQ(group.raw(1).cmd_int({"DEL", key}), 1);
  EXPECT_EQ(renew_on(1), "3");  // gone: set again
  EXPECT_EQ(get(1, key), lease->owner());
  ASSERT_EQ(group.raw(2).cmd_int({"DEL", key}), 1);  // lost on node 2 just before the release
  ASSERT_TRUE(lease->release().ok());  // returns once a majority released
  for (std::size_t i = 0; i < N; ++i) {
    ASSERT_TRUE(eventually([&] { return get(i, key) == "(nil)"; }, scaled(1000ms))) << "node " << i;
  }
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_EQ(renew_on(i), "0") << "node " << i;  // a renewal that crossed the release
    EXPECT_EQ(get(i, key), "(nil)") << "node " << i;
  }
}

// The release markers on one node, run as the client runs the scripts.
//  - A failed try's cleanup that overtook its acquire (another connection of the Client, with
//    connections_per_node >= 2) leaves a tombstone, and the late acquire does not take the key:
//    it was held by nobody until its TTL.
//  - The tombstone never overwrites another owner's marker: that owner's retried release
//    answered 0 (not ours) instead of 2 (already released).
//  - An acquire that comes after its own owner's release marker does not take the key either.
TEST_F(RedlockTest, ReleaseMarkersAndTombstonesOnOneNode) {
  auto& raw = group.raw(0);
  const std::string key = key_of("markers");
  auto release = [&](const std::string& owner) {
    const auto& s = dlock::detail::scripts::redlock_release;
    return raw.cmd({"EVAL", s.source, "2", key, key + ":rel", owner, key + ":ch", "30000"});
  };
  auto acquire = [&](const std::string& owner) {
    const auto& s = dlock::detail::scripts::redlock_acquire;
    return raw.cmd_array({"EVAL", s.source, "3", key, key + ":fence", key + ":rel", owner, "10000", "0"});
  };
  auto renew = [&](const std::string& owner) {
    const auto& s = dlock::detail::scripts::redlock_renew;
    return raw.cmd({"EVAL", s.source, "3", key, key + ":rel", key + ":fence", owner, "10000", "7"});
  };
  // The cleanup first, then the acquire it was meant to undo.
  EXPECT_EQ(release("owner-a"), "0");
  EXPECT_EQ(raw.cmd({"GET", key + ":rel"}), "-owner-a");
  EXPECT_EQ(acquire("owner-a"), (std::vector<std::string>{"0", "0"}));
  EXPECT_EQ(raw.cmd_int({"EXISTS", key}), 0) << "the overtaken acquire took the key";
  // Another owner takes and releases it; a tombstone for a third does not replace its marker.
  EXPECT_EQ(acquire("owner-b").at(0), "1");
  EXPECT_EQ(release("owner-b"), "1");
  EXPECT_EQ(release("owner-c"), "0");
  EXPECT_EQ(raw.cmd({"GET", key + ":rel"}), "owner-b");
  EXPECT_EQ(release("owner-b"), "2") << "owner-b's retried release";
  // owner-a's renewal crossing its release on the wire does not resurrect its key.
  ASSERT_EQ(raw.cmd({"SET", key + ":rel", "-owner-a"}), "OK");
  EXPECT_EQ(renew("owner-a"), "0");
  EXPECT_EQ(raw.cmd_int({"EXISTS", key}), 0);
  // A hold's renewal set the key on a node its acquire had not reached yet (reply 3), the
  // hold's release then found it (1), and the acquire comes last: it does not take the key.
  // The client reads that release's 1 as having come after the node's acquire and sends no
  // second release, so a key taken here would be held by nobody until its TTL.
  ASSERT_EQ(raw.cmd_int({"DEL", key + ":rel"}), 1);
  EXPECT_EQ(renew("owner-d"), "3");
  EXPECT_EQ(release("owner-d"), "1");
  EXPECT_EQ(acquire("owner-d"), (std::vector<std::string>{"0", "0"}));
  EXPECT_EQ(raw.cmd_int({"EXISTS", key}), 0) << "the acquire overtaken by the hold's release took the key";
}

TEST_F(RedlockTest, ExtendSetsTheNewTtlOnEveryNode) {
  Clients c = group.clients(options());
  dlock::Redlock lock(pointers(c), "extend", watchdog(3000ms));
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_TRUE(lease->extend(60000ms).ok());
  // A majority has the new TTL when extend() returns, every node soon after.
  auto extended = [&] {
    std::size_t n = 0;
    for (std::size_t i = 0; i < N; ++i) n += group.raw(i).cmd_int({"PTTL", key_of("extend")}) > 50000 ? 1 : 0;
    return n;
  };
  EXPECT_GE(extended(), 3u);
  EXPECT_TRUE(eventually([&] { return extended() == N; }, scaled(1000ms)));
  EXPECT_GT(lease->remaining(), 50000ms);
  EXPECT_EQ(lease->extend(0ms).code(), dlock::errc::invalid_argument);
  // Taken over on a majority: extend() says so, and the lease is lost.
  for (std::size_t i : {0, 1, 2}) ASSERT_EQ(group.raw(i).cmd({"SET", key_of("extend"), "foreign"}), "OK");
  EXPECT_EQ(lease->extend(60000ms).code(), dlock::errc::not_owner);
  EXPECT_TRUE(eventually([&] { return lease->lost(); }, scaled(1000ms)));
}

TEST_F(RedlockTest, MutualExclusionAcrossThreads) {
  Clients c = group.clients(options());
  dlock::Redlock lock(pointers(c), "threads", watchdog(10s));
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::mutex mu;
  std::vector<std::uint64_t> tokens;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        std::lock_guard guard(lock);
        if (inside.fetch_add(1) != 0) overlap = true;
        {
          std::lock_guard g(mu);
          tokens.push_back(lock.fencing_token().value);
        }
        std::this_thread::sleep_for(1ms);
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overlap.load());
  ASSERT_EQ(tokens.size(), 40u);
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_GT(tokens[i], tokens[i - 1]) << "hold " << i;
}

TEST_F(RedlockTest, MutualExclusionAcrossProcesses) {
  const std::vector<std::string> urls = group.urls();
  auto worker = [urls] {
    std::string list;
    for (const auto& u : urls) list += (list.empty() ? "" : ",") + u;
    auto clients = dlock::Redlock::connect(list);
    for (auto& c : clients) {
      if (!c->ping().ok()) return 2;
    }
    dlock::Redlock lock(pointers(clients), "procs", watchdog(10s));
    std::uint64_t last = 0;
    for (int i = 0; i < 15; ++i) {
      std::lock_guard guard(lock);
      if (lock.fencing_token().value <= last) return 3;
      last = lock.fencing_token().value;
      // A read-modify-write that loses updates unless the holds exclude each other.
      auto v = clients[0]->command({"GET", "counter"});
      if (!v.ok()) return 4;
      const long long n = v->is_nil() ? 0 : v->as_integer().value_or(-1000);
      std::this_thread::sleep_for(2ms);
      if (!clients[0]->command({"SET", "counter", std::to_string(n + 1)}).ok()) return 5;
    }
    return 0;
  };
  dlock::test::ChildProcess a(worker), b(worker);
  EXPECT_EQ(a.wait(), 0);
  EXPECT_EQ(b.wait(), 0);
  EXPECT_EQ(get(0, "counter"), "30");
}

TEST_F(RedlockTest, TwoOfFiveDownStillWorks) {
  Clients c = group.clients(options());
  group.server(1).kill();
  group.server(3).kill();
  LossProbe probe;
  dlock::LeaseOptions lo = watchdog(1000ms);
  probe.attach(lo);
  dlock::Redlock lock(pointers(c), "two-down", lo);
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  for (std::size_t i : {0, 2, 4}) EXPECT_EQ(get(i, key_of("two-down")), lease->owner());
  // The watchdog keeps it on the 3 live nodes well past its TTL.
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  for (std::size_t i : {0, 2, 4}) EXPECT_EQ(get(i, key_of("two-down")), lease->owner());
  dlock::Redlock other(pointers(c), "two-down");
  EXPECT_EQ(other.acquire(no_wait()).code(), dlock::errc::busy);
  ASSERT_TRUE(lease->release().ok());
  for (std::size_t i : {0, 2, 4}) EXPECT_EQ(get(i, key_of("two-down")), "(nil)");
}

// Two spellings of one server (here: the server itself and a proxy to it) are not detected
// (redlock.hpp). The lock stays exclusive, as the one server grants the key once per
// acquisition (its second spelling finds it taken), but it survives fewer failures than its
// node count says: with either server down, no majority is left.
TEST_F(RedlockTest, TwoSpellingsOfOneServerGrantTheKeyOnce) {
  dlock::test::FaultProxy alias(group.server(0).host(), group.server(0).port());
  auto spelled = [&] {
    Clients c;
    c.push_back(std::make_unique<dlock::Client>(group.urls()[0], options()));
    c.push_back(std::make_unique<dlock::Client>(alias.url(), options()));
    c.push_back(std::make_unique<dlock::Client>(group.urls()[1], options()));
    return c;
  };
  Clients mine = spelled();
  Clients theirs = spelled();
  dlock::Redlock lock(pointers(mine), "alias", watchdog(10s));
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_EQ(get(0, key_of("alias")), lease->owner());
  EXPECT_EQ(get(1, key_of("alias")), lease->owner());
  dlock::Redlock other(pointers(theirs), "alias");
  EXPECT_EQ(other.acquire(no_wait()).code(), dlock::errc::busy) << "one server counted twice for another owner";
  ASSERT_TRUE(lease->release().ok());
  dlock::Result<dlock::Lease> next = other.acquire(no_wait());
  ASSERT_TRUE(next.ok()) << next.error().what();
  ASSERT_TRUE(next->release().ok());

  group.server(1).kill();
  dlock::Result<dlock::Lease> without_b = other.acquire(no_wait());
  EXPECT_FALSE(without_b.ok()) << "a majority of three nodes out of one server";
  group.server(1).start();
  group.server(0).kill();
  dlock::Result<dlock::Lease> without_a = other.acquire(no_wait());
  EXPECT_FALSE(without_a.ok()) << "a majority of three nodes without the server spelt twice";
  EXPECT_EQ(without_a.code(), dlock::errc::connection) << without_a.error().what();
}

TEST_F(RedlockTest, ThreeOfFiveDownFailsCleanly) {
  Clients c = group.clients(options());
  std::vector<std::string> down;
  for (std::size_t i : {0, 2, 4}) {
    down.push_back(std::to_string(group.server(i).port()));
    group.server(i).kill();
  }
  dlock::Redlock lock(pointers(c), "three-down");
  dlock::WaitOptions w;
  w.timeout = 5000ms;
  const auto t0 = SteadyClock::now();
  dlock::Result<dlock::Lease> r = lock.acquire(w);
  ASSERT_FALSE(r.ok());
  // Fails at once, without waiting out the timeout: no majority can be reached.
  EXPECT_LT(ms_since(t0), scaled(1500ms));
  EXPECT_EQ(r.code(), dlock::errc::connection);
  const std::string msg = r.error().what();
  EXPECT_NE(msg.find("3 of 5 nodes failed"), std::string::npos) << msg;
  for (const auto& port : down) EXPECT_NE(msg.find(":" + port), std::string::npos) << msg;
  // What the try took on the live nodes is given back (sent before acquire() returned).
  for (std::size_t i : {1, 3}) {
    EXPECT_TRUE(eventually([&] { return get(i, key_of("three-down")) == "(nil)"; }, scaled(1000ms))) << "node " << i;
  }
  EXPECT_THROW(lock.try_lock(), std::system_error);
  EXPECT_THROW(lock.lock(), std::system_error);
}

TEST_F(RedlockTest, ParallelAcquisitionDoesNotWaitForStoppedNodes) {
  const milliseconds node_timeout = scaled(1500ms);
  Clients c = group.clients(options(node_timeout));
  dlock::Redlock lock(pointers(c), "parallel", watchdog(10s));
  group.server(1).pause();
  group.server(3).pause();
  // Asked one after the other, the stopped nodes would cost a full per-node timeout each.
  auto t0 = SteadyClock::now();
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  const milliseconds took = ms_since(t0);
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(took, node_timeout / 3);
  for (std::size_t i : {0, 2, 4}) EXPECT_EQ(get(i, key_of("parallel")), lease->owner());
  t0 = SteadyClock::now();
  ASSERT_TRUE(lease->release().ok());
  EXPECT_LT(ms_since(t0), node_timeout / 3);

  // With a third node stopped no majority is left: the try ends after the per-node timeout.
  group.server(2).pause();
  t0 = SteadyClock::now();
  dlock::Result<dlock::Lease> none = lock.acquire(no_wait());
  const milliseconds failed_after = ms_since(t0);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(none.code() == dlock::errc::timeout || none.code() == dlock::errc::connection) << none.error().what();
  EXPECT_GE(failed_after, node_timeout * 8 / 10);
  EXPECT_LT(failed_after, node_timeout + scaled(2000ms));
  for (std::size_t i : {1, 2, 3}) group.server(i).resume();
}

// A wait's deadline bounds its tries too: with a majority paused, a try waits for its nodes'
// command timeout, and the wait used to return only then (with a connection error). A try that
// wins after the caller gave up is released on every node, not left to the watchdog.
TEST_F(RedlockTest, WaitEndsAtItsDeadlineWhileATryIsOutAndALateWinIsReleased) {
  const milliseconds node_timeout = scaled(4000ms);
  Clients c = group.clients(options(node_timeout));
  dlock::Redlock lock(pointers(c), "late-try", watchdog(10s));
  for (std::size_t i : {0, 1, 2}) group.server(i).pause();
  const milliseconds wait = scaled(600ms);
  auto t0 = SteadyClock::now();
  dlock::Result<dlock::Lease> none = lock.acquire(dlock::WaitOptions{wait});
  const milliseconds took = ms_since(t0);
  EXPECT_TRUE(!none.ok() && none.code() == dlock::errc::timeout) << (none.ok() ? "acquired" : none.error().what());
  EXPECT_GE(took, wait - 5ms);
  EXPECT_LT(took, wait + scaled(800ms)) << "the try on paused nodes outlived the wait's deadline";

  // The nodes come back before their command timeout: the abandoned try now wins them, and the
  // lease nobody holds must be given back everywhere.
  for (std::size_t i : {0, 1, 2}) group.server(i).resume();
  // Released, not merely never taken: a majority carries the release marker of the try.
  EXPECT_TRUE(eventually(
      [&] {
        std::size_t marked = 0;
        for (std::size_t i = 0; i < N; ++i) {
          if (group.raw(i).cmd_int({"EXISTS", key_of("late-try")}) != 0) return false;
          marked += group.raw(i).cmd_int({"EXISTS", key_of("late-try") + ":rel"}) != 0 ? 1 : 0;
        }
        return marked >= lock.quorum();
      },
      scaled(3000ms)))
      << "a try that won after its wait ended kept the lock";
  dlock::Result<dlock::Lease> next = lock.acquire(no_wait());
  ASSERT_TRUE(next.ok()) << next.error().what();
  EXPECT_TRUE(next->release().ok());
}

// A stop request ends a wait while its try is out on paused nodes (it used to wait for the
// nodes' command timeout), and a try that wins later is released.
TEST_F(RedlockTest, StopRequestEndsAWaitWhileATryIsOut) {
  const milliseconds node_timeout = scaled(4000ms);
  Clients c = group.clients(options(node_timeout));
  dlock::Redlock lock(pointers(c), "stop-try", watchdog(10s));
  for (std::size_t i : {0, 1, 2}) group.server(i).pause();
  std::stop_source stop;
  auto result = std::async(std::launch::async, [&] { return lock.acquire(dlock::WaitOptions{30s}, stop.get_token()); });
  std::this_thread::sleep_for(scaled(300ms));
  stop.request_stop();
  const bool ended = result.wait_for(scaled(1000ms)) == std::future_status::ready;
  for (std::size_t i : {0, 1, 2}) group.server(i).resume();
  ASSERT_TRUE(ended) << "the stop request waited for the try on paused nodes";
  auto r = result.get();
  EXPECT_TRUE(!r.ok() && r.code() == dlock::errc::cancelled) << (r.ok() ? "acquired" : r.error().what());
  EXPECT_TRUE(eventually(
      [&] {
        for (std::size_t i = 0; i < N; ++i) {
          if (group.raw(i).cmd_int({"EXISTS", key_of("stop-try")}) != 0) return false;
        }
        return true;
      },
      scaled(3000ms)))
      << "a try that won after the stop kept the lock";
}

// Destroying the Client that hosts a held lease's watchdog (the first node's) releases the lease
// on every master, not only on that one: the others' keys used to sit out their TTL.
TEST_F(RedlockTest, ShutdownOfTheHomeClientReleasesAHeldLeaseOnEveryNode) {
  Clients c = group.clients(options());
  dlock::Redlock lock(pointers(c), "shut", watchdog(30s));
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_EQ(get(1, key_of("shut")), lease->owner());
  c.front().reset();  // the home node's Client: its shutdown releases what it still holds
  // The shutdown waits for a majority's answer; the others' releases are on their way.
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_TRUE(eventually([&] { return group.raw(i).cmd_int({"EXISTS", key_of("shut")}) == 0; }, scaled(2000ms)))
        << "node " << i << " kept the released key";
  }
}

TEST_F(RedlockTest, WaiterWokenByReleaseOnAnyNode) {
  Clients c = group.clients(options());
  group.server(0).kill();  // no notification can come from the first node
  dlock::Redlock holder(pointers(c), "wake", watchdog(30s));
  dlock::Result<dlock::Lease> held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Redlock waiter(pointers(c), "wake", watchdog(30s));
  std::atomic<bool> got{false};
  SteadyClock::time_point got_at{};
  std::thread t([&] {
    dlock::WaitOptions w;
    w.timeout = 20000ms;
    w.recheck_interval = 30000ms;  // only a notification can end the wait in time
    dlock::Result<dlock::Lease> r = waiter.acquire(w);
    got_at = SteadyClock::now();
    got = r.ok();
  });
  std::this_thread::sleep_for(300ms);  // the waiter is subscribed and asleep
  const auto released_at = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  t.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(got_at - released_at), scaled(1000ms));
}

// Waiters of one Redlock in one process take turns (redlock_turns.hpp): one subscription per node
// for all of them, served in the order they came, one try per release rather than one per waiter
// per node's notification. Recheck intervals are long, so only notifications move the queue.
TEST_F(RedlockTest, WaitersOfOneProcessTakeTurns) {
  Clients c = group.clients(options());
  dlock::Redlock holder(pointers(c), "turns", watchdog(30s));
  dlock::Result<dlock::Lease> held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  constexpr int waiters = 5;
  std::vector<std::unique_ptr<dlock::Redlock>> locks;
  for (int i = 0; i < waiters; ++i) locks.push_back(std::make_unique<dlock::Redlock>(pointers(c), "turns", watchdog(30s)));
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  const std::string channel = key_of("turns") + ":ch";
  for (int i = 0; i < waiters; ++i) {
    threads.emplace_back([&, i] {
      dlock::WaitOptions w;
      w.timeout = 20000ms;
      w.recheck_interval = 30000ms;
      dlock::Result<dlock::Lease> r = locks[i]->acquire(w);
      {
        std::lock_guard lock(mu);
        order.push_back(r.ok() ? i : -1);
      }
      if (r.ok()) {
        std::this_thread::sleep_for(5ms);
        EXPECT_TRUE(r->release().ok());
      }
    });
    if (i == 0) {
      ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(group.raw(0), channel) == 1; }, 5000ms));
    }
    std::this_thread::sleep_for(50ms);  // this waiter has joined the queue before the next one
  }
  for (std::size_t n = 0; n < N; ++n) {
    EXPECT_EQ(dlock::test::channel_subscribers(group.raw(n), channel), 1) << "node " << n;
  }
  const long long before = dlock::test::script_calls(group.raw(1));
  const auto released_at = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  for (auto& t : threads) t.join();
  EXPECT_LT(ms_since(released_at), scaled(10000ms)) << "the queue moved on a recheck, not on notifications";
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  // Per waiter on this node: its acquire, its fencing write-back (if any), its release; plus the
  // holder's release, and a little room for a wake-up by a late copy of an old release on a
  // loaded machine. A herd (every waiter trying on each release) makes more than twice as many.
  const long long calls = dlock::test::script_calls(group.raw(1)) - before;
  EXPECT_LE(calls, 1 + 3 * waiters + 3) << calls << " script calls for " << waiters << " handoffs";
  for (std::size_t n = 0; n < N; ++n) {
    EXPECT_TRUE(eventually([&] { return dlock::test::channel_subscribers(group.raw(n), channel) == 0; }, 5000ms))
        << "node " << n << " still has a subscriber after the queue emptied";
  }
}

// The operating rule: a node that restarts empty stays out for the maximum lease. Meanwhile the
// holder's renewals set its key on every other live node, so exclusion holds.
TEST_F(RedlockTest, EmptyRestartKeptOutForTheLeaseKeepsExclusion) {
  const milliseconds ttl = 1500ms;
  Clients a_clients = group.clients(options());
  group.server(3).kill();
  group.server(4).kill();
  LossProbe probe;
  dlock::LeaseOptions lo = watchdog(ttl);
  probe.attach(lo);
  dlock::Redlock a(pointers(a_clients), "kept-out", lo);
  dlock::Result<dlock::Lease> lease = a.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();  // on nodes 0, 1, 2: a bare majority

  group.server(2).kill();  // crashes, loses A's key...
  group.server(3).start();  // ...while the other two come back (empty)
  group.server(4).start();
  std::this_thread::sleep_for(ttl);  // node 2 kept out for the maximum lease
  Clients b_clients = group.clients(options());
  dlock::Redlock b(pointers(b_clients), "kept-out");
  EXPECT_EQ(b.acquire(no_wait()).code(), dlock::errc::busy);
  group.restart_empty(2);  // back, empty
  EXPECT_EQ(b.acquire(no_wait()).code(), dlock::errc::busy);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  for (std::size_t i : {0, 1, 3, 4}) EXPECT_EQ(get(i, key_of("kept-out")), lease->owner()) << "node " << i;
  // The next renewal sets the key on node 2 again.
  EXPECT_TRUE(eventually([&] { return get(2, key_of("kept-out")) == lease->owner(); }, ttl / 3 + scaled(1000ms)));
}

// Without the rule exclusion can break, and the old holder learns it at its next renewal.
TEST_F(RedlockTest, ImmediateEmptyRestartCanBreakExclusionAndTheOldHolderIsTold) {
  const milliseconds ttl = 3000ms;
  const milliseconds renew = 1000ms;
  Clients a_clients = group.clients(options());
  group.server(3).kill();
  group.server(4).kill();
  LossProbe probe;
  dlock::LeaseOptions lo = watchdog(ttl);
  lo.renew_interval = renew;
  probe.attach(lo);
  dlock::Redlock a(pointers(a_clients), "unsafe", lo);
  dlock::Result<dlock::Lease> a_lease = a.acquire(no_wait());
  ASSERT_TRUE(a_lease.ok()) << a_lease.error().what();  // nodes 0, 1, 2

  group.restart_empty(2);  // at once: A's key on node 2 is gone
  group.server(3).start();
  group.server(4).start();
  Clients b_clients = group.clients(options());
  dlock::Redlock b(pointers(b_clients), "unsafe", watchdog(ttl));
  dlock::Result<dlock::Lease> b_lease = b.acquire(no_wait());
  const auto b_at = SteadyClock::now();
  if (b_lease.ok()) {
    // Exclusion broke: B holds nodes 2, 3, 4 while A still holds 0 and 1.
    for (std::size_t i : {2, 3, 4}) EXPECT_EQ(get(i, key_of("unsafe")), b_lease->owner());
    ASSERT_TRUE(eventually([&] { return probe.calls.load() == 1; }, renew + scaled(1500ms)))
        << "A was never told";
    EXPECT_LE(ms_since(b_at), renew + scaled(1500ms));
    EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
    EXPECT_TRUE(a_lease->lost());
    EXPECT_EQ(a_lease->release().code(), dlock::errc::lock_lost);
    EXPECT_TRUE(b_lease->held());
  } else {
    // A's renewal reached the empty nodes first and set its key there again: B is kept out.
    EXPECT_EQ(b_lease.code(), dlock::errc::busy) << b_lease.error().what();
    std::size_t a_nodes = 0;
    for (std::size_t i = 0; i < N; ++i) a_nodes += get(i, key_of("unsafe")) == a_lease->owner() ? 1 : 0;
    EXPECT_GE(a_nodes, 3u);
    EXPECT_TRUE(a_lease->held());
  }
}

// Tokens increase across holders as redlock.hpp guarantees: the previous holder's write-back
// reached a majority W, and the next holder's majority meets W in a node that kept its counter.
TEST_F(RedlockTest, FencingTokensIncreaseAcrossHoldersDespiteEmptyRestarts) {
  Clients c = group.clients(options());
  // An attempt that cannot reach a node fails that node at once (waits do not ride out
  // outages): after restarts, let the Clients reconnect first.
  auto reconnected = [&] {
    for (std::size_t i = 0; i < N; ++i) {
      if (group.server(i).running() && !c[i]->ping(scaled(5000ms)).ok()) return false;
    }
    return true;
  };
  dlock::WaitOptions w;
  w.timeout = scaled(5000ms);
  // Each holder is a fresh object (no hint from earlier holds): only the nodes carry the order.
  auto next_token = [&] {
    dlock::Redlock holder(pointers(c), "fence");
    dlock::Result<dlock::Lease> l = holder.acquire(w);
    if (!l.ok()) ADD_FAILURE() << l.error().what();
    return l.ok() ? l->token().value : 0;
  };

  // Node 0's counter is ahead (it granted holds the others did not see). With nodes 3 and 4
  // down the first majority is 0, 1, 2, and the token the maximum of theirs.
  ASSERT_EQ(group.raw(0).cmd({"SET", key_of("fence") + ":fence", "100"}), "OK");
  for (std::size_t i : {1, 2}) ASSERT_EQ(group.raw(i).cmd({"SET", key_of("fence") + ":fence", "50"}), "OK");
  group.server(3).kill();
  group.server(4).kill();
  std::uint64_t prev = next_token();
  EXPECT_EQ(prev, 101u);

  // Nodes 3 and 4 come back with low counters, node 0 goes down: only the write-back of 101 to
  // nodes 1 and 2 carries the order to the next majority (without it: a token of 51). Each
  // node that comes back gets a low counter here: an empty one would seed its counter from
  // its clock, which would carry the order by itself and hide a broken write-back.
  group.server(3).start();
  group.server(4).start();
  group.server(0).kill();
  ASSERT_TRUE(reconnected());
  auto low_counter = [&](std::size_t i) {
    ASSERT_EQ(group.raw(i).cmd({"SET", key_of("fence") + ":fence", "1"}), "OK") << "node " << i;
  };
  low_counter(3);
  low_counter(4);
  std::uint64_t t = next_token();
  EXPECT_GT(t, prev);
  prev = t;

  // Two nodes restart empty at once (node 0, which was down, and node 1): the write-back to
  // nodes 1-4 leaves 2, 3 and 4 in every majority's reach.
  group.restart_empty(0);
  group.restart_empty(1);
  ASSERT_TRUE(reconnected());
  low_counter(0);
  low_counter(1);
  t = next_token();
  EXPECT_GT(t, prev);
  prev = t;

  // Then one node after another restarts empty between holders.
  for (std::size_t round = 0; round < N; ++round) {
    group.restart_empty(round);
    ASSERT_TRUE(reconnected());
    low_counter(round);
    t = next_token();
    EXPECT_GT(t, prev) << "round " << round;
    prev = t;
  }
}

// Every node restarts empty between two holders: no node carries the order, so each seeds its
// missing counter from its clock in microseconds, as a Mutex's is. Before, the counters began
// again at 0 and the next holder got a LOWER token than the last (1 after 1).
TEST_F(RedlockTest, FencingTokensKeepRisingWhenEveryNodeRestartsEmpty) {
  Clients c = group.clients(options());
  dlock::WaitOptions w;
  w.timeout = scaled(5000ms);
  auto next_token = [&] {
    dlock::Redlock holder(pointers(c), "all-empty");  // fresh: no hint from earlier holds
    dlock::Result<dlock::Lease> l = holder.acquire(w);
    if (!l.ok()) {
      ADD_FAILURE() << l.error().what();
      return std::uint64_t{0};
    }
    EXPECT_TRUE(l->release().ok());
    return l->token().value;
  };
  const std::uint64_t first = next_token();
  const std::uint64_t second = next_token();
  EXPECT_GT(second, first);
  // Counters are exact integers, not Lua's rounded doubles (a 16-digit token that went through
  // tostring() came back as '1.7646123451235e+15'). A node outside the majority may run its
  // acquire after the holder has returned (nothing waits for it; seen once as '(nil)' here), so
  // each counter is awaited first.
  for (std::size_t i = 0; i < N; ++i) {
    const std::string fence = key_of("all-empty") + ":fence";
    EXPECT_TRUE(eventually([&] { return group.raw(i).cmd_int({"EXISTS", fence}) == 1; }, scaled(2000ms)))
        << "node " << i << " never got a counter";
    const std::string counter = group.raw(i).cmd({"GET", fence});
    EXPECT_EQ(counter.find_first_not_of("0123456789"), std::string::npos) << "node " << i << ": " << counter;
  }
  for (std::size_t i = 0; i < N; ++i) group.restart_empty(i);
  for (std::size_t i = 0; i < N; ++i) ASSERT_TRUE(c[i]->ping(scaled(5000ms)).ok()) << "node " << i;
  const std::uint64_t after = next_token();
  EXPECT_GT(after, second) << "every node restarted empty and the token went down";
}

// The fencing write-back is a round trip of its own, needed only while the counters disagree:
// when a majority's counters already hold the chosen token (they answered it), the try counts
// at once, and only the nodes behind it get the token, unawaited. Counters that disagree
// within the majority still get it first, and the acquisition waits for a majority's answer.
TEST_F(RedlockTest, TheFencingWriteBackIsSentOnlyWhenTheCountersDisagree) {
  Clients c = group.clients(options());
  const std::string fence = key_of("in-step") + ":fence";
  for (std::size_t i = 0; i < N; ++i) ASSERT_EQ(group.raw(i).cmd({"SET", fence, "500"}), "OK") << "node " << i;
  // Seen from the servers: MONITOR shows the write-back as the fence script, by its SHA (or by
  // its source, in the EVAL that follows a NOSCRIPT).
  std::vector<std::unique_ptr<dlock::test::RawConnection>> monitors;
  for (std::size_t i = 0; i < N; ++i) {
    monitors.push_back(std::make_unique<dlock::test::RawConnection>(group.server(i)));
    ASSERT_EQ(monitors.back()->cmd({"MONITOR"}), "OK");
  }
  {
    dlock::Redlock lock(pointers(c), "in-step", watchdog(30s));
    dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    EXPECT_EQ(lease->token().value, 501u);
    // Every node granted, the stragglers too (so that each node's counter moved).
    for (std::size_t i = 0; i < N; ++i) {
      EXPECT_TRUE(eventually([&] { return get(i, key_of("in-step")) == lease->owner(); }, scaled(2000ms))) << "node " << i;
      EXPECT_EQ(get(i, fence), "501") << "node " << i;
    }
    ASSERT_TRUE(lease->release().ok());
  }
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_TRUE(eventually([&] { return get(i, key_of("in-step")) == "(nil)"; }, scaled(2000ms))) << "node " << i;
  }
  std::this_thread::sleep_for(scaled(100ms));  // room for a write-back that is still on its way
  for (std::size_t i = 0; i < N; ++i) {
    ASSERT_EQ(group.raw(i).cmd({"SET", "monitor-end", "1"}), "OK");
    int scripts = 0;
    int write_backs = 0;
    for (;;) {
      const std::string line = monitors[i]->next_reply();
      if (line.find("\"monitor-end\"") != std::string::npos) break;
      if (line.find("\"EVALSHA\"") == std::string::npos && line.find("\"EVAL\"") == std::string::npos) continue;
      ++scripts;
      const bool fence_script = line.find(dlock::detail::scripts::redlock_fence.sha1) != std::string::npos ||
                                line.find("chosen fencing token") != std::string::npos;
      if (fence_script) ++write_backs;
    }
    EXPECT_GE(scripts, 2) << "node " << i << ": MONITOR missed the acquire and the release";
    EXPECT_EQ(write_backs, 0) << "node " << i << " was sent the fencing write-back";
  }
  monitors.clear();

  // Nodes 0 and 1 are busy (another owner's key) with counters far behind: nodes 2, 3 and 4
  // answer the token, the try counts at once, and the two nodes behind get it afterwards.
  for (std::size_t i : {0, 1}) {
    ASSERT_EQ(group.raw(i).cmd({"SET", fence, "100"}), "OK");
    ASSERT_EQ(group.raw(i).cmd({"SET", key_of("in-step"), "someone-else", "PX", "60000"}), "OK");
  }
  {
    dlock::Redlock lock(pointers(c), "in-step", watchdog(30s));
    dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    EXPECT_EQ(lease->token().value, 502u);
    for (std::size_t i : {0, 1}) {
      EXPECT_TRUE(eventually([&] { return get(i, fence) == "502"; }, scaled(2000ms)))
          << "node " << i << " was left behind: " << get(i, fence);
    }
    EXPECT_TRUE(lease->release().ok());
  }
  for (std::size_t i : {0, 1}) ASSERT_EQ(group.raw(i).cmd({"DEL", key_of("in-step")}), "1");

  // Apart: with nodes 3 and 4 down the majority is 0, 1 and 2, and only node 0 answers the
  // maximum. The acquisition counts once the write-back reached all three.
  group.server(3).kill();
  group.server(4).kill();
  ASSERT_EQ(group.raw(0).cmd({"SET", fence, "700"}), "OK");
  for (std::size_t i : {1, 2}) ASSERT_EQ(get(i, fence), "502") << "node " << i;
  dlock::Redlock lock(pointers(c), "in-step", watchdog(30s));
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_EQ(lease->token().value, 701u);
  for (std::size_t i : {1, 2}) EXPECT_EQ(get(i, fence), "701") << "node " << i << " did not get the token";
  EXPECT_TRUE(lease->release().ok());
}

// A majority answering with an error reply (here OOM: maxmemory reached under noeviction) is
// the servers' answer, reported with its own code; it was reported as errc::connection.
TEST_F(RedlockTest, ErrorRepliesOfAMajorityKeepTheirCode) {
  Clients c = group.clients(options());
  struct Restore {
    dlock::test::ServerGroup& g;
    ~Restore() {
      for (std::size_t i : {0, 1, 2}) g.raw(i).cmd({"CONFIG", "SET", "maxmemory", "0"});
    }
  } restore{group};
  for (std::size_t i : {0, 1, 2}) {
    ASSERT_EQ(group.raw(i).cmd({"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
    ASSERT_EQ(group.raw(i).cmd({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  }
  dlock::Redlock lock(pointers(c), "oom");
  dlock::Result<dlock::Lease> r = lock.acquire(no_wait());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::server)) << r.error().what();
  EXPECT_NE(r.error().what().find("OOM"), std::string::npos) << r.error().what();
}

TEST_F(RedlockTest, LossReportedWhenAMajorityIsTakenOver) {
  const milliseconds ttl = 1500ms;
  Clients c = group.clients(options());
  LossProbe probe;
  dlock::LeaseOptions lo = watchdog(ttl);
  probe.attach(lo);
  dlock::Redlock lock(pointers(c), "taken", lo);
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  // A minority overwritten behind its back: still a majority, still held.
  for (std::size_t i : {0, 1}) ASSERT_EQ(group.raw(i).cmd({"SET", key_of("taken"), "foreign", "PX", "60000"}), "OK");
  std::this_thread::sleep_for(ttl);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  // A majority: the next renewal reports it.
  ASSERT_EQ(group.raw(2).cmd({"SET", key_of("taken"), "foreign", "PX", "60000"}), "OK");
  EXPECT_TRUE(eventually([&] { return probe.calls.load() == 1; }, ttl / 3 + scaled(1000ms)));
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_EQ(lease->release().code(), dlock::errc::lock_lost);
  EXPECT_EQ(probe.calls.load(), 1);
}

TEST_F(RedlockTest, LossReportedWhenAMajorityIsUnreachable) {
  const milliseconds ttl = 1500ms;
  Clients c = group.clients(options());
  LossProbe probe;
  dlock::LeaseOptions lo = watchdog(ttl);
  probe.attach(lo);
  dlock::Redlock lock(pointers(c), "gone", lo);
  dlock::Result<dlock::Lease> lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto t0 = SteadyClock::now();
  for (std::size_t i : {0, 2, 3}) group.server(i).kill();
  EXPECT_TRUE(eventually([&] { return probe.calls.load() == 1; }, ttl + scaled(1500ms)));
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::expired));
  EXPECT_TRUE(lease->lost());
  // Not before its validity could have run out: the last renewal was at most ttl/3 before.
  EXPECT_GE(ms_since(t0), ttl * 2 / 3 - 50ms);
}

}  // namespace
