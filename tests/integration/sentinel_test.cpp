// dlock on a Sentinel-managed primary with two replicas and three sentinels (real processes):
// discovery, failover during a workload, and clear errors for a wrong setup.
#include <gtest/gtest.h>

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "dlock/dlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/loopback_listener.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_sentinel.hpp"
#include "support/wait.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

TEST(SentinelTest, FindsThePrimaryAndLocksOnIt) {
  RedisSentinelGroup group;
  Client client(group.url());
  ASSERT_TRUE(client.ping(10s).ok());
  Mutex m(client, "found");
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  RawConnection primary(group.data_node(group.primary()));
  EXPECT_EQ(primary.cmd({"GET", key_of("found")}), lease->owner());
  EXPECT_TRUE(lease->release().ok());
}

TEST(SentinelTest, UnknownPrimaryNameIsAClearError) {
  RedisSentinelGroup group(0, 1);
  std::string url = group.url();
  url.replace(url.rfind('/') + 1, std::string::npos, "no-such-primary");
  Client client(url);
  auto r = client.command({"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("no-such-primary"), std::string::npos) << r.error().what();
}

TEST(SentinelTest, NoSentinelReachableFailsFast) {
  Client client("redis-sentinel://127.0.0.1:1,127.0.0.1:2/m");
  const auto t0 = SteadyClock::now();
  auto r = client.command({"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), errc::connection) << r.error().what();
  EXPECT_NE(r.error().what().find("sentinel"), std::string::npos) << r.error().what();
  EXPECT_LT(ms_since(t0), 10s);
}

// A loopback listener that accepts every connection and closes it at once (a sentinel at its
// maxclients, or refusing us), counting them.
class ClosingListener {
 public:
  ClosingListener() {
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{listener_.fd(), POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
        const int c = listener_.accept();
        if (c >= 0) {
          ++accepted_;
          ::close(c);
        }
      }
    });
  }
  ~ClosingListener() {
    stop_ = true;
    thread_.join();
  }
  int port() const { return listener_.port(); }
  long accepted() const { return accepted_; }

 private:
  LoopbackListener listener_;
  std::atomic<bool> stop_{false};
  std::atomic<long> accepted_{0};
  std::thread thread_;
};

// With every sentinel refusing, the Client keeps looking for one on a backoff: its watch of
// "+switch-master" used to hop from sentinel to sentinel with no pause at all (thousands of
// connections a second, a core spinning on the Client's loop).
TEST(SentinelTest, EverySentinelDownIsRetriedOnABackoffNotInATightLoop) {
  ClosingListener s1, s2;
  {
    Client client("redis-sentinel://127.0.0.1:" + std::to_string(s1.port()) + ",127.0.0.1:" +
                  std::to_string(s2.port()) + "/m");
    auto r = client.command({"PING"});
    EXPECT_EQ(r.code(), errc::connection);
    std::this_thread::sleep_for(3s);
  }
  const long total = s1.accepted() + s2.accepted();
  EXPECT_GT(total, 2) << "both sentinels were tried";
  // Reconnects on the default backoff (50 ms doubling to 2 s, for the watch and for each
  // sentinel's command connection) come to a few dozen in 3 s.
  EXPECT_LT(total, 150) << "connections to the sentinels in about 3 s";
  std::printf("connections to the sentinels in about 3 s: %ld\n", total);
}

// A sentinel that names a replica as the primary (it monitors the wrong node, or is cut off
// from the others) is passed over: the node it names answers ROLE as a replica, and the next
// sentinel is asked. Before, its answer was taken, and every write failed with READONLY.
TEST(SentinelTest, ASentinelNamingAReplicaIsPassedOver) {
  RedisSentinelGroup group(1, 1);
  const std::size_t primary = group.primary();
  const std::size_t replica = 1 - primary;
  const std::string replica_port = std::to_string(group.data_node(replica).port());
  RedisServerOptions o;
  o.sentinel = true;
  // Quorum 2 with one sentinel: it never fails over, it only names what it monitors.
  o.extra_args = {"--sentinel", "monitor", RedisSentinelGroup::master_name, "127.0.0.1", replica_port, "2"};
  RedisServer stale(o);
  auto named_by_stale = [&] {
    RawConnection c(stale);
    auto a = c.cmd_array({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", RedisSentinelGroup::master_name});
    return a.size() == 2 ? a[1] : std::string();
  };
  ASSERT_EQ(named_by_stale(), replica_port);
  const std::string good = group.url().substr(std::string("redis-sentinel://").size());
  Client client("redis-sentinel://" + stale.host() + ":" + std::to_string(stale.port()) + "," + good);
  Mutex m(client, "stale-sentinel");
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  RawConnection p(group.data_node(primary));
  EXPECT_EQ(p.cmd({"GET", key_of("stale-sentinel")}), lease->owner());
  EXPECT_TRUE(lease->release().ok());
  EXPECT_EQ(named_by_stale(), replica_port) << "the stale sentinel still names the replica";
}

// With a sentinel that names only a replica, discovery fails with an error that says so.
TEST(SentinelTest, OnlyAReplicaNamedIsAClearError) {
  RedisServer primary;
  RedisServerOptions ro;
  ro.extra_args = {"--replicaof", "127.0.0.1", std::to_string(primary.port())};
  RedisServer replica(ro);
  RedisServerOptions o;
  o.sentinel = true;
  o.extra_args = {"--sentinel", "monitor", "m", "127.0.0.1", std::to_string(replica.port()), "2"};
  RedisServer stale(o);
  Client client("redis-sentinel://" + stale.host() + ":" + std::to_string(stale.port()) + "/m");
  auto r = client.command({"SET", "k", "v"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("but it is a slave"), std::string::npos) << r.error().what();
  // A lock's message names the primary, not a sentinel's address.
  Mutex lock(client, "named");
  auto l = lock.acquire(no_wait());
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().what().find("on the primary 'm' of its sentinels"), std::string::npos) << l.error().what();
}

// Replication acknowledgement on a Sentinel-discovered primary: its WAIT connection follows the
// primary the sentinels name, and each acquisition is on the replica when it returns.
TEST(SentinelTest, ReplicationAckOnTheDiscoveredPrimary) {
  RedisSentinelGroup group(1, 1);
  const std::size_t primary = group.primary();
  ClientOptions o;
  o.replication_ack.replicas = 1;
  o.replication_ack.timeout = 2s;
  Client client(group.url(), o);
  Mutex m(client, "acked");
  for (int i = 0; i < 5; ++i) {
    auto lease = m.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    RawConnection r(group.data_node(1 - primary));
    EXPECT_EQ(r.cmd({"GET", key_of("acked")}), lease->owner());
    ASSERT_TRUE(lease->release().ok());
  }
}

// A waiter (subscribed to the release channel on the primary, not on a sentinel) is woken by
// the release through the Sentinel-discovered primary.
TEST(SentinelTest, WaiterIsWokenByTheRelease) {
  RedisSentinelGroup group(1, 1);
  Client holder_client(group.url());
  Client waiter_client(group.url());
  Mutex holder(holder_client, "woken", watchdog(30s));
  Mutex waiter(waiter_client, "woken");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  auto pending = std::async(std::launch::async, [&] { return waiter.acquire(WaitOptions{.timeout = 20s}); });
  RawConnection primary(group.data_node(group.primary()));
  ASSERT_TRUE(eventually([&] { return primary.cmd_array({"PUBSUB", "NUMSUB", key_of("woken") + ":ch"})[1] == "1"; },
                         scaled(5s)));
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  auto got = pending.get();
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_LT(ms_since(t0), 10s);  // the notification, not the 30 s TTL
}

// The primary is killed while a workload runs and leases are held. Afterwards: the client follows
// the new primary by itself (acquisitions succeed again), and each held lease is either still
// held — with its token on the new primary — or was reported lost. Never silently both.
TEST(SentinelTest, FailoverDuringAWorkload) {
  RedisSentinelGroup group;
  Client client(group.url());
  ASSERT_TRUE(client.ping(10s).ok());

  std::vector<std::unique_ptr<Mutex>> held_locks;
  std::vector<Lease> leases;
  std::vector<std::unique_ptr<LossProbe>> probes;
  for (int i = 0; i < 4; ++i) {
    probes.push_back(std::make_unique<LossProbe>());
    auto o = watchdog(3s);
    probes.back()->attach(o);
    held_locks.push_back(std::make_unique<Mutex>(client, "held-" + std::to_string(i), o));
    auto l = held_locks.back()->acquire(no_wait());
    ASSERT_TRUE(l.ok()) << l.error().what();
    leases.push_back(std::move(*l));
  }

  std::atomic<bool> stop{false};
  std::atomic<long> ok_before{0}, ok_after{0}, failed{0};
  std::atomic<bool> failed_over{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&, w] {
      Mutex m(client, "work-" + std::to_string(w));
      while (!stop) {
        auto l = m.acquire(WaitOptions{.timeout = 2s});
        if (!l.ok()) {
          ++failed;
          std::this_thread::sleep_for(20ms);
          continue;
        }
        (failed_over ? ok_after : ok_before)++;
        (void)l->release();
      }
    });
  }
  std::this_thread::sleep_for(500ms);
  group.kill_primary_and_wait_failover();
  failed_over = true;
  // The client finds the new primary on its own, within a few seconds.
  EXPECT_TRUE(eventually([&] { return ok_after.load() > 20; }, 20s)) << "no acquisitions after the failover";
  stop = true;
  for (auto& t : workers) t.join();
  EXPECT_GT(ok_before.load(), 0);
  std::this_thread::sleep_for(3500ms);  // more than a TTL: every held lease was renewed or lost

  // Where each key really is, for failure messages.
  auto where = [&](const std::string& key) {
    std::string out;
    for (std::size_t n = 0; n < group.data_nodes(); ++n) {
      if (!group.data_node(n).running()) continue;
      RawConnection c(group.data_node(n));
      out += " node " + std::to_string(n) + " (" + c.cmd({"ROLE"}).substr(0, 6) + "): " + c.cmd({"GET", key}) + ";";
    }
    return out + " sentinels name node " + std::to_string(group.primary());
  };
  // Sentinels may fail over a second time (one of them missed the first): judge against the
  // primary they finally agree on.
  const std::size_t now = group.wait_stable();
  RawConnection primary(group.data_node(now));
  for (std::size_t i = 0; i < leases.size(); ++i) {
    const std::string key = key_of("held-" + std::to_string(i));
    if (leases[i].held()) {
      EXPECT_EQ(primary.cmd({"GET", key}), leases[i].owner())
          << "lease " << i << " says held but the new primary disagrees;" << where(key);
    } else {
      EXPECT_TRUE(leases[i].lost());
      EXPECT_EQ(probes[i]->calls.load(), 1);
    }
  }
  Mutex after(client, "after-failover");
  auto l = after.acquire(no_wait());
  ASSERT_TRUE(l.ok()) << l.error().what();
  EXPECT_EQ(primary.cmd({"GET", key_of("after-failover")}), l->owner()) << where(key_of("after-failover"));
}

}  // namespace
}  // namespace dlock::test
