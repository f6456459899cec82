// ReplicationAck (WAIT after acquiring) against a real primary with a real replica.
#include <gtest/gtest.h>

#include <future>
#include <optional>

#include "dlock/dlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/wait.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

class ReplicationAckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    primary.emplace();
    RedisServerOptions o;
    o.extra_args = {"--replicaof", "127.0.0.1", std::to_string(primary->port())};
    replica.emplace(o);
    ASSERT_TRUE(eventually(
        [&] {
          RawConnection c(*primary);
          // Attached and past the initial sync: a replica still loading the RDB acknowledges nothing.
          return c.cmd({"INFO", "replication"}).find("state=online") != std::string::npos;
        },
        10s, 20ms));
  }
  void TearDown() override {
    if (replica) replica->resume();
  }
  // Generous by default: on a loaded machine a healthy replica may take a while to acknowledge.
  static ClientOptions acked(unsigned n, std::chrono::milliseconds timeout = scaled(3000ms)) {
    ClientOptions o;
    o.replication_ack.replicas = n;
    o.replication_ack.timeout = timeout;
    return o;
  }

  std::optional<RedisServer> primary;
  std::optional<RedisServer> replica;
};

TEST_F(ReplicationAckTest, AcknowledgedAcquisitionIsOnTheReplicaWhenItReturns) {
  Client client(primary->url(), acked(1));
  Mutex m(client, "acked");
  for (int i = 0; i < 20; ++i) {
    auto lease = m.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    // No waiting here: WAIT already made sure the replica has it.
    RawConnection r(*replica);
    EXPECT_EQ(r.cmd({"GET", key_of("acked")}), lease->owner());
    ASSERT_TRUE(lease->release().ok());
  }
}

TEST_F(ReplicationAckTest, FailsClosedWhenTheReplicaDoesNotAnswer) {
  Client client(primary->url(), acked(1, 300ms));
  Mutex m(client, "unacked");
  replica->pause();
  auto lease = m.acquire(no_wait());
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.code(), errc::not_replicated) << lease.error().what();
  EXPECT_NE(lease.error().what().find("0 of 1"), std::string::npos) << lease.error().what();
  // Undone: the lock is free again on the primary, and nothing is left for the watchdog.
  RawConnection p(*primary);
  EXPECT_TRUE(eventually([&] { return p.cmd({"EXISTS", key_of("unacked")}) == "0"; }, 3s));
  EXPECT_EQ(client.active_leases(), 0u);
  // Once the replica is back (and has caught up), acknowledged acquisitions work again.
  replica->resume();
  std::string last;
  EXPECT_TRUE(eventually(
      [&] {
        auto again = m.acquire(no_wait());
        if (!again.ok()) last = again.error().what();
        return again.ok();
      },
      scaled(10s), 50ms))
      << last;
}

TEST_F(ReplicationAckTest, MoreReplicasThanExistFailsClosed) {
  Client client(primary->url(), acked(2, 200ms));
  Semaphore s(client, "sem-acked", 3);
  auto lease = s.acquire(1, no_wait());
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.code(), errc::not_replicated) << lease.error().what();
}

TEST_F(ReplicationAckTest, PerLockOverride) {
  Client client(primary->url());  // off for the client
  LeaseOptions lo;
  lo.replication_ack = ReplicationAck{1, 300ms};
  Mutex strict(client, "strict", lo);
  Mutex relaxed(client, "relaxed");
  replica->pause();
  EXPECT_EQ(strict.acquire(no_wait()).code(), errc::not_replicated);
  auto ok = relaxed.acquire(no_wait());
  EXPECT_TRUE(ok.ok()) << ok.error().what();
}

// WAIT blocks its connection: it must not be the one everything else uses.
TEST_F(ReplicationAckTest, WaitDoesNotStallTheSharedPipeline) {
  // Scaled: under a sanitizer on a loaded machine an unscaled 1.2 s lease can miss renewals for
  // reasons that have nothing to do with WAIT. The WAIT itself must end before its command's
  // own timeout, or the acquisition fails with errc::timeout instead of not_replicated.
  ClientOptions options = acked(1, scaled(2500ms));
  options.command_timeout = scaled(2500ms) + 2000ms;
  Client client(primary->url(), options);
  Mutex held(client, "renewed", watchdog(scaled(1200ms)));
  auto lease = held.acquire(no_wait());
  ASSERT_TRUE(lease.ok());
  replica->pause();
  Mutex m(client, "blocked-in-wait");
  auto pending = std::async(std::launch::async, [&] { return m.acquire(no_wait()); });
  std::this_thread::sleep_for(100ms);  // the acquisition is now blocked in WAIT
  ASSERT_EQ(pending.wait_for(0ms), std::future_status::timeout);
  const auto t0 = SteadyClock::now();
  auto pong = client.command({"PING"});
  ASSERT_TRUE(pong.ok());
  EXPECT_LT(ms_since(t0), scaled(1500ms)) << "PING waited behind WAIT";
  auto r = pending.get();
  EXPECT_EQ(r.code(), errc::not_replicated);
  // Renewals went on meanwhile (a 1.2 s TTL while 2.5 s in WAIT, both scaled).
  EXPECT_TRUE(lease->held());
}

// On Cluster each shard's replicas acknowledge their primary's writes (3 primaries, 1 replica
// each): one replica is enough, two cannot be had.
TEST(ReplicationAckCluster, WaitsForTheShardsReplicas) {
  RedisCluster cluster(3, 1);
  ClientOptions one;
  one.replication_ack = ReplicationAck{1, scaled(2000ms)};
  Client client(cluster.url(), one);
  for (int i = 0; i < 10; ++i) {
    Mutex m(client, "acked-" + std::to_string(i));
    auto lease = m.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    EXPECT_TRUE(lease->release().ok());
  }
  LeaseOptions two;
  two.replication_ack = ReplicationAck{2, 300ms};
  Mutex strict(client, "acked-two", two);
  auto refused = strict.acquire(no_wait());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), errc::not_replicated) << refused.error().what();
  RawConnection owner(cluster.node(cluster.owner_of_key(key_of("acked-two"))));
  EXPECT_TRUE(eventually([&] { return owner.cmd({"EXISTS", key_of("acked-two")}) == "0"; }, scaled(3s)));
}

}  // namespace
}  // namespace dlock::test
