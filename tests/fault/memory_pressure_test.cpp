// maxmemory reached with maxmemory-policy noeviction (issue #7): new acquisitions fail with a
// clear error, while leases already held keep being renewed and can be released.

#include <gtest/gtest.h>

#include <chrono>
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

}  // namespace
