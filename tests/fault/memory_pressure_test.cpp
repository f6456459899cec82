// maxmemory reached with maxmemory-policy noeviction (issue #7): new acquisitions fail with a
// clear error, while leases already held, of every kind, keep being renewed and can be released
// (their renew and release scripts carry `#!lua flags=allow-oom`).

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "dlock/dlock.hpp"
#include "fault/scenario.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::scaled;

class MemoryPressureTest : public ::testing::Test {
 protected:
  // maxmemory below what the server already uses: every write that may grow memory (SET,
  // INCR...; Redis's "denyoom" commands) is refused with OOM from now on, deterministically.
  // (Filling memory up to a cap does not stay "full": freeing a client's query buffer drops
  // used_memory back under it.)
  void reach_maxmemory() {
    ASSERT_EQ(raw.cmd({"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
    ASSERT_EQ(raw.cmd({"CONFIG", "SET", "maxmemory", "1"}), "OK");
    ASSERT_EQ(raw.cmd({"SET", "probe", "x"}).rfind("(error) OOM", 0), 0u);
  }

  RedisServer server;
  RawConnection raw{server};
};

TEST_F(MemoryPressureTest, AcquireFailsClearlyWhileRenewalsAndReleasesKeepWorking) {
  dlock::ClientOptions copts;
  dlock::Client client(server.url(), copts);
  ASSERT_TRUE(client.ping().ok());
  dlock::test::LossProbe probe;
  auto lease_opts = dlock::test::watchdog(600ms);
  probe.attach(lease_opts);
  dlock::Mutex held(client, "held", lease_opts);
  auto lease = held.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();

  reach_maxmemory();
  if (HasFatalFailure()) return;

  dlock::Mutex fresh(client, "fresh", lease_opts);
  auto denied = fresh.acquire(dlock::test::no_wait());
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.code(), dlock::errc::server) << denied.error().what();
  EXPECT_NE(denied.error().what().find("OOM"), std::string::npos) << denied.error().what();
  EXPECT_EQ(raw.cmd({"EXISTS", "dlock:{fresh}"}), "0");

  // Several renewal periods at maxmemory: the lease stays held, its TTL keeps being refreshed.
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  EXPECT_GT(raw.cmd_int({"PTTL", "dlock:{held}"}), 0);

  auto released = lease->release();
  EXPECT_TRUE(released.ok()) << released.error().what();
  EXPECT_EQ(raw.cmd({"EXISTS", "dlock:{held}"}), "0");

  // Once memory is freed, acquisitions work again.
  ASSERT_EQ(raw.cmd({"CONFIG", "SET", "maxmemory", "0"}), "OK");
  auto again = fresh.acquire(dlock::test::no_wait());
  EXPECT_TRUE(again.ok()) << again.error().what();
}

// Each kind's renew and release scripts at maxmemory. Without allow-oom, a script's first write
// that may grow memory is refused: a SharedMutex reader's and a Semaphore permit's renewal (ZADD
// XX), a ReentrantMutex release (its SET NX latch) and a FairLock release that hands the lock to
// a queued waiter (INCR of the fencing counter) all failed, and the leases were lost or stuck.
TEST_F(MemoryPressureTest, EveryKindRenewsAndReleasesAtMaxmemory) {
  dlock::Client client(server.url());
  dlock::Client other(server.url());
  dlock::test::LossProbe probe;
  auto lease_opts = dlock::test::watchdog(600ms);
  probe.attach(lease_opts);
  dlock::SharedMutex rw(client, "rw", lease_opts);
  dlock::SharedMutex w(client, "w", lease_opts);
  dlock::Semaphore sem(client, "sem", 2, lease_opts);
  dlock::ReentrantMutex::Options ro;
  ro.lease = lease_opts;
  dlock::ReentrantMutex re(client, "re", ro);
  dlock::FairLock fair(client, "fair", lease_opts);
  dlock::FairLock fair_waiter(other, "fair", dlock::test::watchdog(600ms));
  auto reader = rw.acquire_shared();
  auto writer = w.acquire();
  auto permit = sem.acquire(1);
  auto take = re.acquire();
  auto head = fair.acquire();
  for (auto* l : {&reader, &writer, &permit, &take, &head}) ASSERT_TRUE(l->ok()) << l->error().what();
  auto waiter = std::async(std::launch::async, [&] {
    dlock::WaitOptions wo;
    wo.timeout = 20s;
    return fair_waiter.acquire(wo);
  });
  ASSERT_TRUE(dlock::test::eventually([&] { return raw.cmd_int({"LLEN", "dlock:{fair}:queue"}) == 1; }, scaled(3s)));

  reach_maxmemory();
  if (HasFatalFailure()) return;
  // Several renewal periods (every 200 ms): every lease stays held.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(probe.calls.load(), 0) << "a lease was lost at maxmemory, reason " << probe.reason.load();
  for (auto* l : {&reader, &writer, &permit, &take, &head}) EXPECT_TRUE((*l)->held());

  for (auto* l : {&reader, &writer, &permit, &take}) {
    auto released = (*l)->release();
    EXPECT_TRUE(released.ok()) << released.error().what();
  }
  EXPECT_EQ(raw.cmd({"EXISTS", "dlock:{re}"}), "0");
  // The FairLock's release hands the lock to the queued waiter, inside the script.
  auto handed = head->release();
  EXPECT_TRUE(handed.ok()) << handed.error().what();
  ASSERT_EQ(waiter.wait_for(scaled(10s)), std::future_status::ready);
  // The waiter got it, or its own acquire script (a try that renews its queue place) met the
  // OOM first: acquisitions fail clearly at maxmemory.
  auto got = waiter.get();
  if (got.ok()) {
    EXPECT_TRUE(got->release().ok());
  } else {
    EXPECT_NE(got.error().what().find("OOM"), std::string::npos) << got.error().what();
  }
  ASSERT_EQ(raw.cmd({"CONFIG", "SET", "maxmemory", "0"}), "OK");
}

}  // namespace
