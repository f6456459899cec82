// Integration tests of dlock::Mutex and dlock::Lease against real redis-server processes.
//
// Every test starts its own server (support/redis_server.hpp) and talks to it through dlock and,
// behind dlock's back, through a plain hiredis connection (support/raw_connection.hpp).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
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
#include "support/fairness_rounds.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_helpers.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"
#include "support/redis_server.hpp"

namespace {

using dlock::test::LossProbe;
using dlock::test::key_of;
using dlock::test::no_wait;
using dlock::test::watchdog;

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::eventually;
using dlock::test::scaled;
using dlock::test::ms_since;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

long long to_count(const std::string& s) { return s == "(nil)" ? 0 : std::stoll(s); }

// Number of subscribers to a lock's release channel, as the server sees it.
long long subscribers(RawConnection& raw, const std::string& name) {
  return dlock::test::channel_subscribers(raw, key_of(name) + ":ch");
}

dlock::LeaseOptions fixed_ttl(milliseconds ttl) {
  dlock::LeaseOptions o;
  o.mode = dlock::LeaseMode::fixed_ttl;
  o.ttl = ttl;
  return o;
}

// Counts on_lost calls and remembers the last reason.

class MutexTest : public dlock::test::ServerFixture {
 protected:
  std::string get(const std::string& key) { return raw->cmd({"GET", key}); }
  long long exists(const std::string& key) { return raw->cmd_int({"EXISTS", key}); }
};

// ------------------------------------------------------------------------------ exclusion

// 1a. Eight threads share one Mutex object of one Client and do a non-atomic GET/SET increment.
TEST_F(MutexTest, ThreadsSharingOneMutexLoseNoUpdate) {
  constexpr int kThreads = 8;
  constexpr int kIters = 25;
  dlock::Mutex m(*client, "counter");
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        RawConnection conn(*server);
        for (int i = 0; i < kIters; ++i) {
          std::lock_guard<dlock::Mutex> guard(m);
          const int now = inside.fetch_add(1) + 1;
          int seen = max_inside.load();
          while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
          }
          const long long v = to_count(conn.cmd({"GET", "counter"}));
          std::this_thread::yield();
          conn.cmd({"SET", "counter", std::to_string(v + 1)});
          inside.fetch_sub(1);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker thread: " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_EQ(to_count(get("counter")), kThreads * kIters);
  EXPECT_EQ(exists(m.key()), 0) << "the lock key outlived the last unlock()";
}

// 1b. Eight threads, each with its own Client and Mutex object, incrementing via Client::command.
TEST_F(MutexTest, ThreadsWithOwnClientsLoseNoUpdate) {
  constexpr int kThreads = 8;
  constexpr int kIters = 20;
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  const std::string url = server->url();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        dlock::Client c(url);
        dlock::Mutex m(c, "counter");
        for (int i = 0; i < kIters; ++i) {
          std::lock_guard<dlock::Mutex> guard(m);
          const int now = inside.fetch_add(1) + 1;
          int seen = max_inside.load();
          while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
          }
          auto got = c.command({"GET", "counter"});
          const long long v = got->is_nil() ? 0 : std::stoll(got->str());
          std::this_thread::yield();
          auto set = c.command({"SET", "counter", std::to_string(v + 1)});
          if (!set.ok()) throw std::runtime_error("SET failed: " + set.error().what());
          inside.fetch_sub(1);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker thread: " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_EQ(to_count(get("counter")), kThreads * kIters);
  EXPECT_EQ(exists(key_of("counter")), 0);
}

// 2. Three OS processes, each with its own Client made after fork().
TEST_F(MutexTest, ProcessesLoseNoUpdate) {
  constexpr int kChildren = 3;
  constexpr int kIters = 40;
  const std::string url = server->url();
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int i = 0; i < kChildren; ++i) {
    children.push_back(std::make_unique<ChildProcess>([url]() -> int {
      dlock::Client c(url);
      if (!c.ping().ok()) return 2;
      dlock::Mutex m(c, "proc-counter");
      for (int k = 0; k < kIters; ++k) {
        std::lock_guard<dlock::Mutex> guard(m);
        // A cross-process "inside" counter: must be 1 while we hold the lock.
        auto in = c.command({"INCR", "inside"});
        if (!in.ok() || in->integer() != 1) return 3;
        auto got = c.command({"GET", "proc-counter"});
        if (!got.ok()) return 4;
        const long long v = got->is_nil() ? 0 : std::stoll(got->str());
        if (!c.command({"SET", "proc-counter", std::to_string(v + 1)}).ok()) return 5;
        auto out = c.command({"DECR", "inside"});
        if (!out.ok() || out->integer() != 0) return 6;
      }
      return 0;
    }));
  }
  for (auto& ch : children) {
    auto code = ch->wait_for(60s);
    ASSERT_TRUE(code.has_value()) << "child " << ch->pid() << " did not finish";
    EXPECT_EQ(*code, 0) << "child " << ch->pid() << " reported a problem";
  }
  EXPECT_EQ(to_count(get("proc-counter")), kChildren * kIters);
  EXPECT_EQ(to_count(get("inside")), 0);
  EXPECT_EQ(exists(key_of("proc-counter")), 0);
}

// ------------------------------------------------------------------------ TTL and watchdog

// 3. A fixed-TTL lease expires; another Mutex gets in; the holder is told exactly once.
TEST_F(MutexTest, FixedTtlExpiryFreesLockAndReportsLossOnce) {
  LossProbe probe;
  auto opts = fixed_ttl(300ms);
  probe.attach(opts);
  dlock::Mutex a(*client, "ttl", opts);
  dlock::Client other_client(server->url());
  dlock::Mutex b(other_client, "ttl");

  const auto t0 = SteadyClock::now();
  auto lease = a.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(get(a.key()), lease->owner());

  const auto try_start = SteadyClock::now();
  EXPECT_FALSE(b.try_lock());
  EXPECT_LT(ms_since(try_start), 1000ms) << "try_lock() must not wait";

  SteadyClock::time_point got_at{};
  ASSERT_TRUE(eventually([&] {
    if (!b.try_lock()) return false;
    got_at = SteadyClock::now();
    return true;
  }, 3000ms, 20ms)) << "the expired lock never became free";
  // The key was set with PX 300 after t0, so nobody can get it earlier than that.
  EXPECT_GE(got_at - t0, 290ms);
  EXPECT_TRUE(b.owns_lock());

  ASSERT_TRUE(eventually([&] { return probe.calls.load() >= 1; }, 2000ms)) << "on_lost never ran";
  EXPECT_TRUE(lease->lost());
  EXPECT_FALSE(lease->held());
  ASSERT_TRUE(lease->loss_reason().has_value());
  EXPECT_EQ(*lease->loss_reason(), dlock::LossReason::expired);
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::expired));
  std::this_thread::sleep_for(300ms);  // would a second on_lost follow?
  EXPECT_EQ(probe.calls.load(), 1);
  EXPECT_EQ(lease->remaining(), 0ms);
  b.unlock();
  EXPECT_TRUE(b.last_error().code == std::error_code{}) << b.last_error().what();
}

// A waiter queued behind a holder of its own process, whose lease then ends without a release (a
// fixed TTL that runs out: nothing is published): its sleep is bounded by that lease, as a
// waiter's behind a holder elsewhere is by the holder's TTL, not by its recheck interval. It used
// to sleep the whole interval (4-6 s here), while a waiter of another Client took the lock first.
TEST_F(MutexTest, AWaiterBehindAHolderOfItsOwnProcessWakesWhenThatLeaseRunsOut) {
  dlock::Client other_client(server->url());
  dlock::Mutex blocker(other_client, "own-holder");
  auto first = blocker.acquire();
  ASSERT_TRUE(first.ok()) << first.error().what();
  dlock::Mutex m1(*client, "own-holder", fixed_ttl(400ms));
  dlock::Mutex m2(*client, "own-holder", fixed_ttl(400ms));
  dlock::WaitOptions long_recheck;
  long_recheck.timeout = 20000ms;
  long_recheck.recheck_interval = 8000ms;
  auto t1 = std::async(std::launch::async, [&] { return m1.acquire(long_recheck); });
  std::this_thread::sleep_for(200ms);
  auto t2 = std::async(std::launch::async, [&] {
    auto r = m2.acquire(long_recheck);
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  std::this_thread::sleep_for(200ms);
  const auto released = SteadyClock::now();  // the first waiter's SET PX 400 comes after this
  ASSERT_TRUE(first->release().ok());
  ASSERT_EQ(t1.wait_for(scaled(3s)), std::future_status::ready);
  auto l1 = t1.get();  // kept, not released: its key expires
  ASSERT_TRUE(l1.ok()) << l1.error().what();
  ASSERT_EQ(t2.wait_for(scaled(3s)), std::future_status::ready)
      << "the second waiter slept through the end of its own process's lease";
  auto [l2, at] = t2.get();
  ASSERT_TRUE(l2.ok()) << l2.error().what();
  EXPECT_GE(at - released, 390ms);  // not before the first lease ran out
}

// 4. The watchdog keeps a 300 ms lease for 1.5 s (5x its TTL).
TEST_F(MutexTest, WatchdogKeepsLockPastItsTtl) {
  LossProbe probe;
  auto opts = watchdog(300ms);
  probe.attach(opts);
  dlock::Mutex m(*client, "wd", opts);
  auto lease = m.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const std::string owner = lease->owner();
  EXPECT_EQ(client->active_leases(), 1u);

  const auto t0 = SteadyClock::now();
  long long min_pttl = 1 << 30;
  int samples = 0;
  while (SteadyClock::now() - t0 < 1500ms) {
    const long long pttl = raw->cmd_int({"PTTL", m.key()});
    min_pttl = std::min(min_pttl, pttl);
    EXPECT_GT(pttl, 0) << "after " << ms_since(t0).count() << " ms";
    EXPECT_LE(pttl, 300);
    EXPECT_EQ(get(m.key()), owner);
    ++samples;
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_GT(samples, 20);
  EXPECT_GT(min_pttl, 0);
  EXPECT_TRUE(lease->held());
  EXPECT_FALSE(lease->lost());
  EXPECT_GT(lease->remaining(), 0ms);
  EXPECT_EQ(probe.calls.load(), 0);

  auto rel = lease->release();
  EXPECT_TRUE(rel.ok()) << rel.error().what();
  EXPECT_EQ(exists(m.key()), 0);
  EXPECT_FALSE(lease->held());
  EXPECT_EQ(client->active_leases(), 0u);
  // Renewal must not outlive the release and re-create the key.
  std::this_thread::sleep_for(250ms);
  EXPECT_EQ(exists(m.key()), 0);
  EXPECT_EQ(probe.calls.load(), 0);
}

// The watchdog's alarm is set again only for an earlier time (RenewalScheduler::arm): after a
// long lease is released, its alarm stays set for its renewal, seconds away. A short lease taken
// then is due well before it and must get an alarm of its own, or it expires unrenewed.
TEST_F(MutexTest, AShortLeaseTakenAfterALongOneWasReleasedIsRenewedInTime) {
  dlock::Mutex long_lived(*client, "wd-long", watchdog(30s));
  auto first = long_lived.acquire();
  ASSERT_TRUE(first.ok()) << first.error().what();
  ASSERT_TRUE(first->release().ok());

  // 1.5 s: renewed every 0.5 s, so a stall of a second (a loaded machine) is still no loss;
  // watched for twice its TTL, while the long lease's alarm is 10 s away.
  LossProbe probe;
  auto opts = watchdog(1500ms);
  probe.attach(opts);
  dlock::Mutex short_lived(*client, "wd-short", opts);
  auto lease = short_lived.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < 3000ms) {
    EXPECT_GT(raw->cmd_int({"PTTL", short_lived.key()}), 0) << "after " << ms_since(t0).count() << " ms";
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  EXPECT_TRUE(lease->release().ok());
}

// The leases of one Mutex share its scripts, keys and loss callbacks (one immutable spec, to keep
// a held lock small): each lease must still renew and release its own hold of the right key,
// with its own owner token, and a loss must reach exactly the lease that lost.
TEST_F(MutexTest, LeasesOfOneMutexShareItsScriptsButKeepTheirOwnHolds) {
  LossProbe probe_a, probe_b;
  auto opts_a = watchdog(300ms), opts_b = watchdog(300ms);
  probe_a.attach(opts_a);
  probe_b.attach(opts_b);
  dlock::Mutex a(*client, "shared-a", opts_a);
  dlock::Mutex b(*client, "shared-b", opts_b);

  auto first = a.acquire(no_wait());
  ASSERT_TRUE(first.ok()) << first.error().what();
  ASSERT_TRUE(first->release().ok());
  auto second = a.acquire(no_wait());  // a second lease from the same spec
  ASSERT_TRUE(second.ok()) << second.error().what();
  auto other = b.acquire(no_wait());
  ASSERT_TRUE(other.ok()) << other.error().what();
  EXPECT_NE(first->owner(), second->owner());
  EXPECT_EQ(second->name(), "shared-a");
  EXPECT_EQ(other->name(), "shared-b");

  // Past three TTLs: both keys are kept alive, each by its own lease's renewals.
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < 1000ms) {
    EXPECT_EQ(get(a.key()), second->owner());
    EXPECT_EQ(get(b.key()), other->owner());
    EXPECT_GT(raw->cmd_int({"PTTL", a.key()}), 0);
    EXPECT_GT(raw->cmd_int({"PTTL", b.key()}), 0);
    std::this_thread::sleep_for(50ms);
  }
  // The released first lease does not touch the second's hold.
  EXPECT_TRUE(first->release().ok());
  EXPECT_EQ(get(a.key()), second->owner());

  // A loss of b's key reaches b's lease only, once.
  raw->cmd({"DEL", b.key()});
  EXPECT_TRUE(eventually([&] { return other->lost(); }, 2s));
  // The lease reads as lost a moment before its on_lost has run (on the loop thread): wait for
  // the call (under TSan the check came in between).
  EXPECT_TRUE(eventually([&] { return probe_b.calls.load() >= 1; }, 2s));
  EXPECT_EQ(probe_b.calls.load(), 1);
  EXPECT_EQ(probe_a.calls.load(), 0);
  EXPECT_TRUE(second->held());

  EXPECT_TRUE(second->release().ok());
  EXPECT_EQ(exists(a.key()), 0);
  std::this_thread::sleep_for(250ms);  // no renewal re-creates it
  EXPECT_EQ(exists(a.key()), 0);
  EXPECT_EQ(probe_a.calls.load(), 0);
}

// 5a. The key is deleted behind the holder's back: on_lost(taken) within about a renew interval.
TEST_F(MutexTest, LossReportedWhenKeyDeleted) {
  LossProbe probe;
  auto opts = watchdog(600ms);  // renew interval 200 ms
  probe.attach(opts);
  dlock::Mutex m(*client, "del", opts);
  auto lease = m.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_EQ(raw->cmd_int({"DEL", m.key()}), 1);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(eventually([&] { return probe.calls.load() >= 1; }, 2000ms)) << "on_lost never ran";
  EXPECT_LT(ms_since(t0), 2000ms);
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_TRUE(lease->lost());
  EXPECT_FALSE(lease->held());
  ASSERT_TRUE(lease->loss_reason().has_value());
  EXPECT_EQ(*lease->loss_reason(), dlock::LossReason::taken);
  EXPECT_EQ(client->active_leases(), 0u);
  // The renewal that found it gone must not re-create it.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(exists(m.key()), 0);
  EXPECT_EQ(probe.calls.load(), 1);
  auto rel = lease->release();
  EXPECT_EQ(rel.code(), make_error_code(dlock::errc::lock_lost)) << rel.error().what();
}

// 5a'. A forced unlock (DEL + "revoked" on the channel, as `dlock unlock --force` does) reaches
// a holder that listens at once, long before its next renewal (30 s TTL: renewal every 10 s).
TEST_F(MutexTest, ListeningHolderLearnsOfForcedUnlockAtOnce) {
  LossProbe probe;
  dlock::LeaseOptions opts;  // ttl 30 s
  opts.listen_for_revocation = true;
  probe.attach(opts);
  dlock::Mutex m(*client, "revoke", opts);
  auto lease = m.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  // Wait until the holder's subscription is in place (it is made right after the acquisition).
  ASSERT_TRUE(eventually([&] { return raw->cmd_array({"PUBSUB", "NUMSUB", m.key() + ":ch"}).at(1) == "1"; }, 2000ms));
  ASSERT_EQ(raw->cmd_int({"DEL", m.key()}), 1);
  ASSERT_EQ(raw->cmd_int({"PUBLISH", m.key() + ":ch", "revoked"}), 1);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(eventually([&] { return probe.calls.load() >= 1; }, 2000ms)) << "on_lost never ran";
  EXPECT_LT(ms_since(t0), 2000ms);
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  // A "revoked" message alone, with the key still ours, must not end a hold.
  LossProbe other;
  dlock::LeaseOptions o2;
  o2.listen_for_revocation = true;
  other.attach(o2);
  dlock::Mutex m2(*client, "revoke-spoof", o2);
  auto held = m2.acquire();
  ASSERT_TRUE(held.ok()) << held.error().what();
  ASSERT_TRUE(eventually([&] { return raw->cmd_array({"PUBSUB", "NUMSUB", m2.key() + ":ch"}).at(1) == "1"; }, 2000ms));
  raw->cmd({"PUBLISH", m2.key() + ":ch", "revoked"});
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(other.calls.load(), 0);
  EXPECT_TRUE(held->held());
  EXPECT_TRUE(held->release().ok());
  // Released: the holder's subscription is gone too.
  EXPECT_TRUE(eventually([&] { return raw->cmd_array({"PUBSUB", "NUMSUB", m2.key() + ":ch"}).at(1) == "0"; }, 2000ms));
}

// 5b. The server restarts empty: the holder learns that its lock is gone.
TEST_F(MutexTest, LossReportedWhenServerRestartsEmpty) {
  LossProbe probe;
  auto opts = watchdog(600ms);
  probe.attach(opts);
  dlock::Mutex m(*client, "restart-empty", opts);
  auto lease = m.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  server->restart_empty();
  raw.emplace(*server);
  ASSERT_TRUE(eventually([&] { return probe.calls.load() >= 1; }, 3000ms)) << "on_lost never ran";
  // `taken` when a renewal reached the new server, `expired` if reconnecting took longer than
  // the lease's validity: both are correct reports of the loss.
  const int reason = probe.reason.load();
  EXPECT_TRUE(reason == static_cast<int>(dlock::LossReason::taken) ||
              reason == static_cast<int>(dlock::LossReason::expired))
      << reason;
  EXPECT_TRUE(lease->lost());
  EXPECT_FALSE(lease->held());
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(probe.calls.load(), 1);
  EXPECT_EQ(exists(m.key()), 0) << "a renewal re-created the lost lock on the empty server";
}

// ------------------------------------------------------------------------------- release

// 6a. The key now holds another owner's token: release is refused and leaves that key alone.
TEST_F(MutexTest, ReleaseByNonOwnerIsRefused) {
  dlock::Mutex a(*client, "nonowner");
  auto lease = a.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_EQ(raw->cmd({"SET", a.key(), "othertoken@elsewhere:1", "PX", "30000"}), "OK");
  auto rel = lease->release();
  EXPECT_EQ(rel.code(), make_error_code(dlock::errc::lock_lost)) << rel.error().what();
  EXPECT_EQ(get(a.key()), "othertoken@elsewhere:1");
  EXPECT_GT(raw->cmd_int({"PTTL", a.key()}), 0);
  EXPECT_FALSE(lease->held());
  EXPECT_TRUE(lease->lost());
  EXPECT_EQ(client->active_leases(), 0u);
}

// 6b. Repeated release of one lease is harmless, also after someone else took the lock.
TEST_F(MutexTest, RepeatedReleaseIsHarmless) {
  dlock::Mutex a(*client, "rerelease");
  dlock::Mutex b(*client, "rerelease");
  auto lease_a = a.acquire();
  ASSERT_TRUE(lease_a.ok()) << lease_a.error().what();
  auto r1 = lease_a->release();
  EXPECT_TRUE(r1.ok()) << r1.error().what();
  EXPECT_EQ(exists(a.key()), 0);
  auto r2 = lease_a->release();
  EXPECT_TRUE(r2.ok()) << r2.error().what();
  EXPECT_EQ(exists(a.key()), 0);

  auto lease_b = b.acquire(no_wait());
  ASSERT_TRUE(lease_b.ok()) << lease_b.error().what();
  auto r3 = lease_a->release();
  EXPECT_TRUE(r3.ok()) << r3.error().what();
  EXPECT_EQ(get(a.key()), lease_b->owner()) << "a repeated release deleted the next holder's key";
  EXPECT_TRUE(lease_b->held());
  EXPECT_FALSE(lease_a->lost());
  EXPECT_TRUE(lease_b->release().ok());
  EXPECT_EQ(exists(a.key()), 0);
}

// 6c. Releasing a fixed-TTL lease that expired reports lock_lost and does not touch the next
// holder's key.
TEST_F(MutexTest, ReleaseOfExpiredLeaseReportsLockLost) {
  dlock::Mutex a(*client, "expired-release", fixed_ttl(200ms));
  dlock::Mutex b(*client, "expired-release");
  auto lease_a = a.acquire();
  ASSERT_TRUE(lease_a.ok()) << lease_a.error().what();
  ASSERT_TRUE(eventually([&] { return lease_a->lost(); }, 2000ms)) << "the expired lease never reported loss";
  ASSERT_TRUE(eventually([&] { return exists(a.key()) == 0; }, 2000ms));
  auto lease_b = b.acquire(dlock::WaitOptions{2000ms, 100ms});
  ASSERT_TRUE(lease_b.ok()) << lease_b.error().what();
  auto rel = lease_a->release();
  EXPECT_EQ(rel.code(), make_error_code(dlock::errc::lock_lost)) << rel.error().what();
  EXPECT_EQ(get(a.key()), lease_b->owner());
  EXPECT_TRUE(lease_b->held());
}

// 6d. Same, when the server already expired the key but nobody took it since: lock_lost too.
TEST_F(MutexTest, ReleaseOfExpiredLeaseWithKeyGoneReportsLockLost) {
  dlock::Mutex a(*client, "expired-release-2", fixed_ttl(200ms));
  auto lease_a = a.acquire();
  ASSERT_TRUE(lease_a.ok()) << lease_a.error().what();
  ASSERT_TRUE(eventually([&] { return exists(a.key()) == 0 && lease_a->lost(); }, 2000ms));
  auto rel = lease_a->release();
  EXPECT_EQ(rel.code(), make_error_code(dlock::errc::lock_lost)) << rel.error().what();
}

// ---------------------------------------------------------------- scripts and restarts

// 7. SCRIPT FLUSH: acquire, renew and release fall back from EVALSHA to EVAL.
TEST_F(MutexTest, WorksAfterScriptFlush) {
  dlock::Mutex m(*client, "flush", watchdog(300ms));
  {
    auto first = m.acquire(no_wait());  // loads the scripts
    ASSERT_TRUE(first.ok()) << first.error().what();
    ASSERT_TRUE(first->release().ok());
  }
  ASSERT_EQ(raw->cmd({"SCRIPT", "FLUSH"}), "OK");
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_EQ(get(m.key()), lease->owner());

  ASSERT_EQ(raw->cmd({"SCRIPT", "FLUSH"}), "OK");
  // The watchdog's renewals (ttl 300 ms, every 100 ms) keep working after the flush.
  std::this_thread::sleep_for(700ms);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(get(m.key()), lease->owner());
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 0);

  ASSERT_EQ(raw->cmd({"SCRIPT", "FLUSH"}), "OK");
  auto rel = lease->release();
  EXPECT_TRUE(rel.ok()) << rel.error().what();
  EXPECT_EQ(exists(m.key()), 0);
}

// 8. After a server restart the Client reconnects and locks again.
TEST_F(MutexTest, RecoversAfterServerRestart) {
  dlock::Mutex m(*client, "restart");
  {
    auto lease = m.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    ASSERT_TRUE(lease->release().ok());
  }
  server->restart();
  raw.emplace(*server);
  std::optional<dlock::Result<dlock::Lease>> got;
  dlock::Error last;
  const bool ok = eventually([&] {
    got.emplace(m.acquire(no_wait()));
    if (got->ok()) return true;
    last = got->error();
    return false;
  }, 3000ms, 50ms);
  ASSERT_TRUE(ok) << "no acquire succeeded within 3 s after the restart; last error: " << last.what();
  dlock::Lease lease = std::move(*got).value();
  EXPECT_TRUE(lease.held());
  EXPECT_EQ(get(m.key()), lease.owner());
  EXPECT_TRUE(lease.release().ok());
  EXPECT_EQ(exists(m.key()), 0);
}

// ---------------------------------------------------------------------------- waiting

// 9a. A waiter that only wakes up every 10 s is woken by the holder's release notification.
TEST_F(MutexTest, WaiterWokenByReleaseNotification) {
  dlock::Mutex holder(*client, "notify");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::Client waiter_client(server->url());
  dlock::Mutex waiter(waiter_client, "notify");
  std::stop_source stop;
  auto fut = std::async(std::launch::async, [&] {
    auto r = waiter.acquire(dlock::WaitOptions{std::nullopt, 10000ms}, stop.get_token());
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(eventually([&] { return subscribers(*raw, "notify") >= 1; }, 3000ms)) << "the waiter never subscribed";
  std::this_thread::sleep_for(200ms);  // let its first attempt find the lock busy
  ASSERT_EQ(fut.wait_for(0ms), std::future_status::timeout) << "the waiter got a held lock";

  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  if (fut.wait_for(5s) != std::future_status::ready) {
    stop.request_stop();
    fut.wait();
    FAIL() << "the waiter was not woken by the release within 5 s";
  }
  auto [result, t1] = fut.get();
  ASSERT_TRUE(result.ok()) << result.error().what();
  EXPECT_LT(t1 - t0, 1000ms);
  EXPECT_EQ(get(holder.key()), result->owner());
  EXPECT_TRUE(result->release().ok());
}

// Fairness across processes. A release names the Client whose place on P{N}:waiters comes
// first (mutex_release.lua); here the other Client's waiter took its place first. The releasing
// Client's event loop, awake already (it just handled the release's reply), must not take the
// lock before the named Client does: the release tells it (2 + subscribers notified) that a
// waiter elsewhere was woken, and its own tries on that lock hold back for about two round trips.
TEST_F(MutexTest, ReleasingProcessLetsAWaiterElsewhereGoFirst) {
  dlock::Mutex mine(*client, "courtesy");
  dlock::Client other_client(server->url());
  dlock::Mutex theirs(other_client, "courtesy");
  const dlock::WaitOptions wait{10000ms, 10000ms};
  const int won = dlock::test::rounds_the_other_client_went_first(
      *raw, key_of("courtesy") + ":ch", [&] { return mine.acquire(wait); }, [&] { return theirs.acquire(wait); },
      [&] { return raw->cmd_int({"ZCARD", key_of("courtesy") + ":waiters"}); });
  // A slow round on a loaded machine may still go to the releasing Client, hence not all.
  EXPECT_GE(won, 8) << "the other Client's waiter went first in only " << won << " of 10 rounds";
}

// 9b. A foreign compare-and-delete publishes nothing; the waiter notices at its recheck.
TEST_F(MutexTest, WaiterNoticesForeignReleaseAtRecheck) {
  dlock::Mutex holder(*client, "foreign-release");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::Client waiter_client(server->url());
  dlock::Mutex waiter(waiter_client, "foreign-release");
  std::stop_source stop;
  auto fut = std::async(std::launch::async, [&] {
    auto r = waiter.acquire(dlock::WaitOptions{std::nullopt, 500ms}, stop.get_token());
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(eventually([&] { return subscribers(*raw, "foreign-release") >= 1; }, 3000ms));
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(fut.wait_for(0ms), std::future_status::timeout);

  const auto t0 = SteadyClock::now();
  EXPECT_EQ(raw->cmd({"EVAL",
                      "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) end return 0",
                      "1", holder.key(), held->owner()}),
            "1");
  if (fut.wait_for(5s) != std::future_status::ready) {
    stop.request_stop();
    fut.wait();
    FAIL() << "the waiter did not notice the foreign release within 5 s";
  }
  auto [result, t1] = fut.get();
  ASSERT_TRUE(result.ok()) << result.error().what();
  EXPECT_LT(t1 - t0, 2000ms);
  EXPECT_EQ(get(holder.key()), result->owner());

  // The old holder's lease was taken over: its release must not delete the new holder's key.
  auto old_release = held->release();
  EXPECT_EQ(old_release.code(), make_error_code(dlock::errc::lock_lost)) << old_release.error().what();
  EXPECT_EQ(get(holder.key()), result->owner());
  EXPECT_TRUE(result->release().ok());
}

// ------------------------------------------------------------------- errors and names

// 10. The lock key holds a hash.
TEST_F(MutexTest, KeyOfAnotherTypeIsWrongType) {
  ASSERT_EQ(raw->cmd_int({"HSET", key_of("x"), "f", "v"}), 1);
  dlock::Mutex m(*client, "x");
  auto r = m.acquire(no_wait());
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::wrong_type)) << r.error().what();
  auto r2 = m.acquire(dlock::WaitOptions{1000ms, 100ms});
  EXPECT_EQ(r2.code(), make_error_code(dlock::errc::wrong_type)) << r2.error().what();
  try {
    (void)m.try_lock();
    ADD_FAILURE() << "try_lock() did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), make_error_code(dlock::errc::wrong_type)) << e.what();
  }
  try {
    m.lock();
    ADD_FAILURE() << "lock() did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), make_error_code(dlock::errc::wrong_type)) << e.what();
  }
  EXPECT_EQ(raw->cmd({"TYPE", key_of("x")}), "hash");
  EXPECT_EQ(raw->cmd({"HGET", key_of("x"), "f"}), "v");
}

// 11. Lock names.
TEST_F(MutexTest, InvalidNamesAreRejected) {
  auto expect_invalid = [&](const std::string& name, const char* what) {
    try {
      dlock::Mutex m(*client, name);
      ADD_FAILURE() << "accepted " << what;
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), make_error_code(dlock::errc::invalid_argument)) << what << ": " << e.what();
    }
  };
  expect_invalid("", "an empty name");
  expect_invalid(std::string(513, 'a'), "a 513-byte name");
  expect_invalid("a{b", "a name with '{'");
  expect_invalid("a}b", "a name with '}'");
  expect_invalid("{ab}", "a name with a hash tag");
  expect_invalid("a\nb", "a name with a newline");

  const std::string longest(512, 'n');
  dlock::Mutex m(*client, longest);
  EXPECT_EQ(m.name(), longest);
  EXPECT_EQ(m.key(), key_of(longest));
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_EQ(get(key_of(longest)), lease->owner());
  EXPECT_TRUE(lease->release().ok());
}

// 11b. Durations beyond what clock arithmetic holds (dlock::max_duration, 100 years): a lease
// TTL or extend() that long is refused with a clear error; a wait that long is a wait without
// end. milliseconds::max() as "forever" once overflowed now + timeout: the deadline lay in the
// past and the wait timed out at once.
TEST_F(MutexTest, DurationsBeyondMaxDurationAreRefusedOrWaitWithoutEnd) {
  for (auto ttl : {milliseconds::max(), dlock::max_duration + 1ms}) {
    try {
      dlock::Mutex m(*client, "forever", fixed_ttl(ttl));
      ADD_FAILURE() << "accepted a TTL of " << ttl.count() << " ms";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), make_error_code(dlock::errc::invalid_argument)) << e.what();
      EXPECT_NE(std::string(e.what()).find("at most"), std::string::npos) << e.what();
    }
  }
  dlock::Mutex m(*client, "forever");
  auto held = m.acquire(dlock::test::no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  auto extended = held->extend(milliseconds::max());
  ASSERT_FALSE(extended.ok());
  EXPECT_EQ(extended.code(), dlock::errc::invalid_argument) << extended.error().what();
  EXPECT_TRUE(held->held());

  // Waits of "forever" spelled as the largest durations: each waits for the release.
  dlock::Client other(server->url());
  dlock::Mutex waiter(other, "forever");
  auto release_soon = [&] {
    return std::async(std::launch::async, [&] {
      std::this_thread::sleep_for(200ms);
      return held->release();
    });
  };
  {
    auto releasing = release_soon();
    dlock::WaitOptions w;
    w.timeout = milliseconds::max();
    w.recheck_interval = milliseconds::max();
    auto got = waiter.acquire(w);
    ASSERT_TRUE(got.ok()) << got.error().what();
    EXPECT_TRUE(releasing.get().ok());
    ASSERT_TRUE(got->release().ok());
  }
  held = m.acquire(dlock::test::no_wait());
  ASSERT_TRUE(held.ok());
  {
    auto releasing = release_soon();
    EXPECT_TRUE(waiter.try_lock_for(std::chrono::hours::max()));
    EXPECT_TRUE(releasing.get().ok());
    waiter.unlock();
  }
  held = m.acquire(dlock::test::no_wait());
  ASSERT_TRUE(held.ok());
  {
    auto releasing = release_soon();
    EXPECT_TRUE(waiter.try_lock_until(std::chrono::system_clock::time_point::max()));
    EXPECT_TRUE(releasing.get().ok());
    waiter.unlock();
  }
  held = m.acquire(dlock::test::no_wait());
  ASSERT_TRUE(held.ok());
  {
    // A time point in hours at its clock's end: t - now() alone would overflow.
    auto releasing = release_soon();
    using sys_hours = std::chrono::time_point<std::chrono::system_clock, std::chrono::hours>;
    EXPECT_TRUE(waiter.try_lock_until(sys_hours::max()));
    EXPECT_TRUE(releasing.get().ok());
    waiter.unlock();
  }
  // And the smallest: one attempt, no overflow either way.
  held = m.acquire(dlock::test::no_wait());
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(waiter.try_lock_for(std::chrono::hours::min()));
  EXPECT_FALSE(waiter.try_lock_for(std::chrono::duration<double>(-1e300)));
  EXPECT_FALSE(waiter.try_lock_until(std::chrono::time_point<std::chrono::system_clock, std::chrono::hours>::min()));
  EXPECT_TRUE(held->release().ok());
}


// 12. A foreign SET NX PX lock excludes dlock, and dlock excludes it.
TEST_F(MutexTest, ForeignLockAndDlockExcludeEachOther) {
  dlock::Mutex m(*client, "foreign");
  ASSERT_EQ(raw->cmd({"SET", m.key(), "othertoken", "NX", "PX", "30000"}), "OK");
  EXPECT_FALSE(m.try_lock());
  auto r = m.acquire(no_wait());
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::busy)) << r.error().what();
  EXPECT_EQ(get(m.key()), "othertoken");
  ASSERT_EQ(raw->cmd_int({"DEL", m.key()}), 1);

  ASSERT_TRUE(m.try_lock());
  EXPECT_TRUE(m.owns_lock());
  EXPECT_EQ(raw->cmd({"SET", m.key(), "othertoken", "NX", "PX", "30000"}), "(nil)");
  EXPECT_NE(get(m.key()), "othertoken");
  m.unlock();
  EXPECT_FALSE(m.owns_lock());
  EXPECT_EQ(raw->cmd({"SET", m.key(), "othertoken", "NX", "PX", "30000"}), "OK");
}

// ---------------------------------------------------------- standard-library interplay

// 13a. try_lock_for / try_lock_until give up after about the given time.
TEST_F(MutexTest, TryLockForTimesOut) {
  dlock::Mutex m(*client, "timed");
  ASSERT_EQ(raw->cmd({"SET", m.key(), "othertoken", "NX", "PX", "30000"}), "OK");
  auto t0 = SteadyClock::now();
  EXPECT_FALSE(m.try_lock_for(300ms));
  auto took = ms_since(t0);
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 2000ms);
  EXPECT_FALSE(m.owns_lock());

  t0 = SteadyClock::now();
  EXPECT_FALSE(m.try_lock_until(SteadyClock::now() + 300ms));
  took = ms_since(t0);
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 2000ms);
  EXPECT_EQ(get(m.key()), "othertoken");

  // The holder goes away during the wait: try_lock_for succeeds.
  ASSERT_EQ(raw->cmd({"SET", m.key(), "othertoken", "XX", "PX", "300"}), "OK");
  EXPECT_TRUE(m.try_lock_for(3000ms));
  EXPECT_TRUE(m.owns_lock());
  EXPECT_NE(get(m.key()), "othertoken");
  m.unlock();
  EXPECT_EQ(exists(m.key()), 0);
}

// 13b. std::unique_lock and std::scoped_lock.
TEST_F(MutexTest, WorksWithUniqueLockAndScopedLock) {
  dlock::Mutex m1(*client, "std-1");
  dlock::Mutex m2(*client, "std-2");
  dlock::Client other_client(server->url());
  dlock::Mutex other1(other_client, "std-1");
  {
    std::unique_lock<dlock::Mutex> lk(m1);
    EXPECT_TRUE(lk.owns_lock());
    EXPECT_TRUE(m1.owns_lock());
    EXPECT_EQ(exists(m1.key()), 1);
    std::unique_lock<dlock::Mutex> try_other(other1, std::try_to_lock);
    EXPECT_FALSE(try_other.owns_lock());
    std::unique_lock<dlock::Mutex> timed_other(other1, 100ms);
    EXPECT_FALSE(timed_other.owns_lock());
    lk.unlock();
    EXPECT_EQ(exists(m1.key()), 0);
    EXPECT_TRUE(timed_other.try_lock_for(2000ms));
    EXPECT_EQ(exists(m1.key()), 1);
  }
  EXPECT_EQ(exists(m1.key()), 0);

  {
    std::scoped_lock both(m1, m2);
    EXPECT_TRUE(m1.owns_lock());
    EXPECT_TRUE(m2.owns_lock());
    EXPECT_EQ(exists(m1.key()), 1);
    EXPECT_EQ(exists(m2.key()), 1);
  }
  EXPECT_EQ(exists(m1.key()), 0);
  EXPECT_EQ(exists(m2.key()), 0);

  // std::lock's back-off: the second lock is held elsewhere for 400 ms.
  const auto t0 = SteadyClock::now();
  ASSERT_EQ(raw->cmd({"SET", m2.key(), "othertoken", "NX", "PX", "400"}), "OK");
  {
    std::scoped_lock both(m1, m2);
    EXPECT_GE(ms_since(t0), 390ms);
    EXPECT_TRUE(m1.owns_lock());
    EXPECT_TRUE(m2.owns_lock());
    EXPECT_NE(get(m2.key()), "othertoken");
    EXPECT_NE(get(m2.key()), "(nil)");
    EXPECT_NE(get(m1.key()), "(nil)");
  }
  EXPECT_EQ(exists(m1.key()), 0);
  EXPECT_EQ(exists(m2.key()), 0);
}

// 13c. std::condition_variable_any: a producer/consumer over a queue guarded by the dlock Mutex.
TEST_F(MutexTest, WorksWithConditionVariableAny) {
  constexpr int kItems = 5;
  dlock::Mutex m(*client, "cv");
  std::condition_variable_any cv;
  std::deque<int> queue;
  std::vector<int> received;
  std::atomic<int> not_owned_on_wake{0};
  std::atomic<int> key_missing_on_wake{0};

  auto consumer = std::async(std::launch::async, [&] {
    RawConnection conn(*server);
    std::unique_lock<dlock::Mutex> lk(m);
    while (static_cast<int>(received.size()) < kItems) {
      cv.wait(lk, [&] { return !queue.empty(); });
      if (!m.owns_lock()) not_owned_on_wake.fetch_add(1);
      if (conn.cmd({"EXISTS", m.key()}) != "1") key_missing_on_wake.fetch_add(1);
      received.push_back(queue.front());
      queue.pop_front();
    }
  });
  for (int i = 1; i <= kItems; ++i) {
    {
      std::lock_guard<dlock::Mutex> g(m);
      queue.push_back(i);
    }
    cv.notify_one();
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(consumer.wait_for(20s), std::future_status::ready) << "the consumer did not finish";
  consumer.get();
  EXPECT_EQ(received, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(not_owned_on_wake.load(), 0);
  EXPECT_EQ(key_missing_on_wake.load(), 0);
  EXPECT_EQ(exists(m.key()), 0);
}

// ---------------------------------------------------------------------- cancellation

// 14a. A blocked acquire returns cancelled soon after request_stop() and leaves no lock behind.
TEST_F(MutexTest, CancelledWaiterLeavesNoLock) {
  dlock::Mutex holder(*client, "cancel");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::Client waiter_client(server->url());
  dlock::Mutex waiter(waiter_client, "cancel");
  std::stop_source stop;
  auto fut = std::async(std::launch::async, [&] {
    auto r = waiter.acquire(dlock::WaitOptions{}, stop.get_token());
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  ASSERT_TRUE(eventually([&] { return subscribers(*raw, "cancel") >= 1; }, 3000ms));
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(fut.wait_for(0ms), std::future_status::timeout);

  const auto t0 = SteadyClock::now();
  stop.request_stop();
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready) << "cancellation did not end the wait";
  auto [result, t1] = fut.get();
  EXPECT_EQ(result.code(), make_error_code(dlock::errc::cancelled)) << result.error().what();
  EXPECT_LT(t1 - t0, 1000ms);

  ASSERT_TRUE(held->release().ok());
  EXPECT_EQ(exists(holder.key()), 0);
  // Whatever the cancelled waiter still had in flight must not take the lock now.
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(exists(holder.key()), 0);
  EXPECT_EQ(waiter_client.active_leases(), 0u);
  // Nor may it stay subscribed.
  EXPECT_TRUE(eventually([&] { return subscribers(*raw, "cancel") == 0; }, 2000ms));
}

// 14b. Cancellation racing with the release: either the waiter gets the lease, or no lock stays.
TEST_F(MutexTest, CancelRacingWithReleaseLeavesNoLock) {
  dlock::Client waiter_client(server->url());
  dlock::Mutex holder(*client, "cancel-race");
  dlock::Mutex waiter(waiter_client, "cancel-race");
  int cancelled = 0;
  for (int i = 0; i < 20; ++i) {
    auto held = holder.acquire(dlock::WaitOptions{3000ms, 100ms});
    ASSERT_TRUE(held.ok()) << held.error().what();
    std::stop_source stop;
    auto fut = std::async(std::launch::async, [&] { return waiter.acquire(dlock::WaitOptions{}, stop.get_token()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + i % 5 * 3));
    ASSERT_TRUE(held->release().ok());
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 4)));
    stop.request_stop();
    ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
    auto r = fut.get();
    if (r.ok()) {
      EXPECT_EQ(get(holder.key()), r->owner());
      EXPECT_TRUE(r->release().ok());
    } else {
      ++cancelled;
      EXPECT_EQ(r.code(), make_error_code(dlock::errc::cancelled)) << r.error().what();
    }
    EXPECT_TRUE(eventually([&] { return exists(holder.key()) == 0; }, 2000ms))
        << "round " << i << ": a lock was left behind (" << get(holder.key()) << ")";
    EXPECT_TRUE(eventually([&] { return waiter_client.active_leases() == 0; }, 2000ms)) << "round " << i;
  }
  RecordProperty("cancelled_rounds", cancelled);
}

// 14c. Two waiters of one Client: the first (head) is cancelled, the second takes over the wait
// and is woken by the release notification.
TEST_F(MutexTest, CancelledHeadWaiterHandsOverToNextWaiter) {
  dlock::Mutex holder(*client, "handover");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client waiter_client(server->url());
  dlock::Mutex waiter(waiter_client, "handover");
  const dlock::WaitOptions slow_recheck{std::nullopt, 10000ms};

  std::stop_source stop1;
  std::stop_source stop2;
  auto first = std::async(std::launch::async, [&] { return waiter.acquire(slow_recheck, stop1.get_token()); });
  ASSERT_TRUE(eventually([&] { return subscribers(*raw, "handover") >= 1; }, 3000ms));
  std::this_thread::sleep_for(100ms);
  auto second = std::async(std::launch::async, [&] {
    auto r = waiter.acquire(slow_recheck, stop2.get_token());
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  std::this_thread::sleep_for(200ms);
  stop1.request_stop();
  ASSERT_EQ(first.wait_for(5s), std::future_status::ready);
  auto r1 = first.get();
  EXPECT_EQ(r1.code(), make_error_code(dlock::errc::cancelled)) << r1.error().what();
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(second.wait_for(0ms), std::future_status::timeout) << "the second waiter got a held lock";

  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  if (second.wait_for(5s) != std::future_status::ready) {
    stop2.request_stop();
    second.wait();
    FAIL() << "the remaining waiter was not woken by the release";
  }
  auto [r2, t1] = second.get();
  ASSERT_TRUE(r2.ok()) << r2.error().what();
  EXPECT_LT(t1 - t0, 1000ms);
  EXPECT_EQ(get(holder.key()), r2->owner());
  EXPECT_TRUE(r2->release().ok());
}

// 13d. Several waiters of one Mutex object queue in-process; each still times out on time.
TEST_F(MutexTest, QueuedWaitersTimeOut) {
  dlock::Mutex m(*client, "queued-timeout");
  ASSERT_EQ(raw->cmd({"SET", m.key(), "othertoken", "NX", "PX", "30000"}), "OK");
  std::vector<std::future<std::pair<bool, milliseconds>>> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] {
      const auto t0 = SteadyClock::now();
      const bool got = m.try_lock_for(400ms);
      return std::make_pair(got, ms_since(t0));
    }));
  }
  for (auto& w : waiters) {
    ASSERT_EQ(w.wait_for(10s), std::future_status::ready);
    auto [got, took] = w.get();
    EXPECT_FALSE(got);
    EXPECT_GE(took, 390ms);
    EXPECT_LT(took, 2000ms);
  }
  EXPECT_EQ(get(m.key()), "othertoken");
}

// A second Mutex object of the same Client, and another thread on the same object, are excluded.
TEST_F(MutexTest, SameClientOtherObjectsAndThreadsAreExcluded) {
  dlock::Mutex m1(*client, "same-client");
  dlock::Mutex m2(*client, "same-client");
  ASSERT_TRUE(m1.try_lock());
  EXPECT_FALSE(m2.try_lock());
  auto from_other_thread = std::async(std::launch::async, [&] { return std::make_pair(m1.try_lock(), m1.owns_lock()); });
  auto [got, owns] = from_other_thread.get();
  EXPECT_FALSE(got);
  EXPECT_FALSE(owns) << "owns_lock() must be per thread";
  EXPECT_TRUE(m1.owns_lock());
  m1.unlock();
  EXPECT_EQ(exists(m1.key()), 0);
  EXPECT_TRUE(m2.try_lock());
  m2.unlock();
}

// extend(): a fixed-TTL lease extended past its original end is neither expired on the server
// nor reported lost; extend() of a lost lease is not_owner.
TEST_F(MutexTest, ExtendMovesTheEndOfAFixedTtlLease) {
  LossProbe probe;
  auto opts = fixed_ttl(300ms);
  probe.attach(opts);
  dlock::Mutex m(*client, "extend", opts);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  auto ext = lease->extend(2000ms);
  ASSERT_TRUE(ext.ok()) << ext.error().what();
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 1000);
  std::this_thread::sleep_for(600ms);  // twice the original TTL
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  EXPECT_EQ(get(m.key()), lease->owner());
  EXPECT_GT(lease->remaining(), 0ms);
  // Now the end is watched at the new time: it is lost after ~2 s in all.
  ASSERT_TRUE(eventually([&] { return probe.calls.load() == 1; }, 3000ms));
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::expired));
  // The client gives up a drift allowance before the server expires the key.
  ASSERT_TRUE(eventually([&] { return exists(m.key()) == 0; }, 1000ms));
  auto late = lease->extend(2000ms);
  EXPECT_EQ(late.code(), make_error_code(dlock::errc::not_owner)) << late.error().what();
  EXPECT_EQ(exists(m.key()), 0) << "extend() of a lost lease re-created the key";
}

// extend() to a TTL shorter than the lease's first one: the default drift allowance is the new
// TTL's (600 ms / 100 + 2 ms = 8 ms), not the old one's (302 ms of 30 s), which left a 600 ms
// lease half its validity and one of 300 ms none: lost at once.
TEST_F(MutexTest, ExtendToAShorterTtlTakesThatTtlsDriftAllowance) {
  LossProbe probe;
  auto opts = watchdog(30s);
  probe.attach(opts);
  dlock::Mutex m(*client, "extend-shorter", opts);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto t0 = SteadyClock::now();
  auto ext = lease->extend(600ms);
  ASSERT_TRUE(ext.ok()) << ext.error().what();
  const milliseconds left = lease->remaining();
  EXPECT_GT(left, 600ms - 8ms - ms_since(t0) - 2ms) << "validity after extend(600ms): " << left.count() << " ms";
  EXPECT_LE(left, 600ms);
  // Renewed with the new TTL from now on (every 200 ms): still held past it.
  std::this_thread::sleep_for(900ms);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  EXPECT_LE(raw->cmd_int({"PTTL", m.key()}), 600);
  EXPECT_TRUE(lease->release().ok());
}

// extend() to a shorter TTL that the server refuses before running it (here BUSY: another
// script runs past busy-reply-threshold) changes nothing on the server, so nothing on the
// client either. Before, the validity stayed lowered to the refused TTL's end, and the lease was
// lost there (on_lost, expired) while its key lived on.
TEST_F(MutexTest, ExtendRefusedBeforeItRanKeepsTheValidity) {
  LossProbe probe;
  auto opts = watchdog(30s);
  probe.attach(opts);
  dlock::Mutex m(*client, "extend-refused", opts);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_EQ(raw->cmd({"CONFIG", "SET", "busy-reply-threshold", "20"}), "OK");
  auto busy = std::async(std::launch::async, [&] {
    RawConnection blocker(server->host(), server->port(), 10000ms);
    return blocker.cmd({"EVAL",
                        "local s = redis.call('TIME') "
                        "while true do local n = redis.call('TIME') "
                        "if (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 1500000 then return 'done' end end",
                        "0"});
  });
  std::this_thread::sleep_for(300ms);  // the script runs, past the threshold
  const auto t0 = SteadyClock::now();
  auto ext = lease->extend(1000ms);
  ASSERT_FALSE(ext.ok()) << "extend() ran while the server was busy with a script";
  EXPECT_EQ(ext.code(), make_error_code(dlock::errc::server)) << ext.error().what();
  EXPECT_NE(ext.error().what().find("BUSY"), std::string::npos) << ext.error().what();
  EXPECT_EQ(busy.get(), "done");
  // Past the refused TTL's end: still held, renewed on the old TTL.
  std::this_thread::sleep_until(t0 + 1500ms);
  EXPECT_TRUE(lease->held()) << "remaining " << lease->remaining().count() << " ms";
  EXPECT_EQ(probe.calls.load(), 0) << "lost at the end of an extension that never ran";
  EXPECT_TRUE(eventually([&] { return lease->remaining() > 20s; }, scaled(3000ms)))
      << "remaining " << lease->remaining().count() << " ms";
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 20000);
  EXPECT_TRUE(lease->release().ok());
}

// extend() to a TTL that leaves no validity after the drift allowance is refused before it is
// sent: the key keeps its TTL and the lease stays held. Before, the server took the new TTL and
// the lease was lost the moment the reply came (a chosen allowance of 500 ms, extend(400ms)).
TEST_F(MutexTest, ExtendThatWouldLeaveNoValidityIsRefusedAndChangesNothing) {
  LossProbe probe;
  auto opts = watchdog(30s);
  opts.drift_allowance = 500ms;
  probe.attach(opts);
  dlock::Mutex m(*client, "extend-no-validity", opts);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  auto ext = lease->extend(400ms);
  EXPECT_EQ(ext.code(), make_error_code(dlock::errc::invalid_argument));
  EXPECT_NE(ext.error().what().find("drift allowance"), std::string::npos) << ext.error().what();
  // The default allowance of a 2 ms TTL (2 / 100 + 2 ms) leaves none either.
  dlock::Mutex d(*client, "extend-no-validity-default", watchdog(30s));
  auto other = d.acquire(no_wait());
  ASSERT_TRUE(other.ok()) << other.error().what();
  auto tiny = other->extend(2ms);
  EXPECT_EQ(tiny.code(), make_error_code(dlock::errc::invalid_argument)) << tiny.error().what();
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 20000) << "the refused TTL reached the server";
  EXPECT_GT(raw->cmd_int({"PTTL", d.key()}), 20000) << "the refused TTL reached the server";
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(lease->held());
  EXPECT_TRUE(other->held());
  EXPECT_EQ(probe.calls.load(), 0);
  // A TTL that does leave validity is still taken.
  auto fine = lease->extend(2000ms);
  EXPECT_TRUE(fine.ok()) << fine.error().what();
  EXPECT_LE(raw->cmd_int({"PTTL", m.key()}), 2000);
  EXPECT_TRUE(lease->release().ok());
  EXPECT_TRUE(other->release().ok());
}

// A watchdog lease survives a restart of a server that persists its data (AOF, fsync always):
// renewals fail while it is down and succeed again after the reconnect.
TEST_F(MutexTest, WatchdogLeaseSurvivesRestartWithPersistence) {
  dlock::test::RedisServerOptions persist;
  persist.appendonly = true;
  RedisServer durable(persist);
  dlock::Client c(durable.url());
  ASSERT_TRUE(c.ping().ok());
  LossProbe probe;
  auto opts = watchdog(2000ms);
  probe.attach(opts);
  dlock::Mutex m(c, "durable", opts);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  durable.restart();
  RawConnection conn(durable);
  ASSERT_EQ(conn.cmd({"GET", m.key()}), lease->owner()) << "the AOF did not keep the key";
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < 2500ms) {
    EXPECT_GT(conn.cmd_int({"PTTL", m.key()}), 0) << "after " << ms_since(t0).count() << " ms";
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  EXPECT_EQ(conn.cmd({"GET", m.key()}), lease->owner());
  EXPECT_TRUE(lease->release().ok());
  EXPECT_EQ(conn.cmd_int({"EXISTS", m.key()}), 0);
}

// ---------------------------------------------------------------------- client lifetime

// 15. Destroying the Client releases what it still holds.
TEST_F(MutexTest, DestroyingClientReleasesLeases) {
  auto owner_client = std::make_unique<dlock::Client>(server->url());
  dlock::Mutex by_lease(*owner_client, "shutdown-lease");
  dlock::Mutex by_lock(*owner_client, "shutdown-lock");
  auto lease = by_lease.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  by_lock.lock();
  ASSERT_EQ(exists(by_lease.key()), 1);
  ASSERT_EQ(exists(by_lock.key()), 1);
  EXPECT_EQ(owner_client->active_leases(), 2u);

  owner_client.reset();
  EXPECT_EQ(exists(by_lease.key()), 0) << "the Lease's key survived the Client";
  EXPECT_EQ(exists(by_lock.key()), 0) << "the lock()'s key survived the Client";
  EXPECT_FALSE(lease->held());
  // Lock objects that outlive their Client fail with errc::shutdown.
  auto again = by_lease.acquire(no_wait());
  EXPECT_EQ(again.code(), make_error_code(dlock::errc::shutdown)) << again.error().what();
  by_lock.unlock();  // must not crash or hang
}

// 15b. A thread blocked in acquire() when its Client is destroyed gets errc::shutdown.
TEST_F(MutexTest, DestroyingClientFailsPendingAcquireWithShutdown) {
  dlock::Mutex holder(*client, "shutdown-waiter");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  auto waiter_client = std::make_unique<dlock::Client>(server->url());
  // Shared with a detached thread: if the acquire never returns, the thread is leaked rather
  // than hanging the whole test binary.
  auto waiter = std::make_shared<dlock::Mutex>(*waiter_client, "shutdown-waiter");
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
  ASSERT_TRUE(eventually([&] { return subscribers(*raw, "shutdown-waiter") >= 1; }, 3000ms));
  std::this_thread::sleep_for(200ms);

  const auto t0 = SteadyClock::now();
  waiter_client.reset();
  EXPECT_LT(ms_since(t0), 5000ms) << "~Client took too long";
  const bool finished = eventually([&] {
    std::lock_guard g(out->mu);
    return out->code.has_value();
  }, 5000ms);
  ASSERT_TRUE(finished) << "an acquire() pending when its Client was destroyed never returned";
  std::lock_guard g(out->mu);
  EXPECT_EQ(*out->code, make_error_code(dlock::errc::shutdown)) << out->code->message();
  EXPECT_EQ(get(holder.key()), held->owner());
}

// 15c. A lease released on another thread while its Client shuts down is released by the
// shutdown (its step 1), not left to its TTL: release() waits for that and reports success.
// Before, it returned errc::shutdown at once and took the lease out of the shutdown's hands,
// so its key sat out its TTL. The worker's wait is what the shutdown fails first; the slow link
// (300 ms each way) keeps step 1 going for over a second after that, while the worker releases
// a Mutex lease and a ReentrantMutex take (released through its hold), and a lease taken over
// meanwhile, which the shutdown's release finds not ours: that one is lock_lost, not success.
TEST_F(MutexTest, ALeaseReleasedWhileItsClientShutsDownIsReleasedNotLeftToItsTtl) {
  dlock::test::FaultProxy proxy("127.0.0.1", server->port());
  dlock::ClientOptions options;
  options.shutdown_timeout = 6000ms;
  auto going = std::make_unique<dlock::Client>(proxy.url(), options);
  dlock::Mutex plain(*going, "shutdown-release-plain");
  dlock::ReentrantMutex reentrant(*going, "shutdown-release-reentrant");
  auto plain_lease = plain.acquire(no_wait());
  ASSERT_TRUE(plain_lease.ok()) << plain_lease.error().what();
  auto take = reentrant.acquire(no_wait());
  ASSERT_TRUE(take.ok()) << take.error().what();
  // Taken over behind the Client's back: the shutdown's release finds it not ours (lock_lost).
  dlock::Mutex stolen(*going, "shutdown-release-stolen");
  auto stolen_lease = stolen.acquire(no_wait());
  ASSERT_TRUE(stolen_lease.ok()) << stolen_lease.error().what();
  raw->cmd({"SET", stolen.key(), "someone-else", "PX", "60000"});
  dlock::Mutex holder(*client, "shutdown-release-busy");
  auto busy = holder.acquire(no_wait());
  ASSERT_TRUE(busy.ok()) << busy.error().what();

  dlock::Mutex waiting(*going, "shutdown-release-busy");
  struct Outcome {
    std::error_code wait, plain, take, stolen;
  };
  std::promise<Outcome> outcome;
  std::thread worker([&] {
    Outcome o;
    o.wait = waiting.acquire(dlock::WaitOptions{std::nullopt, 30000ms}).code();
    o.plain = plain_lease->release().code();
    o.take = take->release().code();
    o.stolen = stolen_lease->release().code();
    outcome.set_value(o);
  });
  ASSERT_TRUE(eventually([&] { return subscribers(*raw, "shutdown-release-busy") >= 1; }, 3000ms));
  proxy.delay(300ms);
  going.reset();
  worker.join();
  const Outcome o = outcome.get_future().get();
  EXPECT_EQ(o.wait, make_error_code(dlock::errc::shutdown)) << o.wait.message();
  EXPECT_FALSE(o.plain) << o.plain.message();
  EXPECT_FALSE(o.take) << o.take.message();
  EXPECT_EQ(o.stolen, make_error_code(dlock::errc::lock_lost)) << o.stolen.message();
  EXPECT_EQ(get(stolen.key()), "someone-else");
  EXPECT_EQ(exists(plain.key()), 0) << "the Mutex lease was left to its TTL";
  EXPECT_EQ(exists(reentrant.key()), 0) << "the ReentrantMutex hold was left to its TTL";
  EXPECT_TRUE(busy->release().ok());
}

// 16. Blocking calls from the event-loop thread fail instead of deadlocking.
TEST_F(MutexTest, BlockingCallOnEventLoopFails) {
  dlock::Mutex m(*client, "loop");
  dlock::Mutex other(*client, "loop-other");
  struct Seen {
    std::error_code acquire_code;
    std::error_code try_lock_code;
    std::error_code command_code;
    bool on_loop = false;
  };
  std::promise<std::pair<dlock::Result<dlock::Lease>, Seen>> done;
  auto fut = done.get_future();
  m.async_acquire(dlock::WaitOptions{}, [&](dlock::Result<dlock::Lease> r) {
    Seen seen;
    seen.on_loop = client->on_event_loop_thread();
    seen.acquire_code = other.acquire(no_wait()).code();
    try {
      (void)other.try_lock();
    } catch (const std::system_error& e) {
      seen.try_lock_code = e.code();
    }
    seen.command_code = client->command({"PING"}).code();
    done.set_value({std::move(r), seen});
  });
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready) << "the async acquire never completed (deadlock?)";
  auto [lease, seen] = fut.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_TRUE(seen.on_loop);
  EXPECT_EQ(seen.acquire_code, make_error_code(dlock::errc::called_from_event_loop));
  EXPECT_EQ(seen.try_lock_code, make_error_code(dlock::errc::called_from_event_loop));
  EXPECT_EQ(seen.command_code, make_error_code(dlock::errc::called_from_event_loop));
  EXPECT_EQ(exists(other.key()), 0);
  EXPECT_EQ(get(m.key()), lease->owner());
  EXPECT_TRUE(lease->release().ok());
  EXPECT_EQ(exists(m.key()), 0);
}

}  // namespace
