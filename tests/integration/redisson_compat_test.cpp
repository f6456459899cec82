// Integration tests of ReentrantMutex's Redisson compatibility mode against real redis-server
// processes. The Java side is played by support/redisson_emulator.hpp: an EMULATION of
// Redisson's RLock wire protocol written from its documentation, not Redisson itself.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/reentrant_mutex.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/redisson_emulator.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace {

using dlock::test::no_wait;

using namespace std::chrono_literals;
using dlock::ReentrantMutex;
using dlock::test::ms_since;
using dlock::test::RawConnection;
using dlock::test::RedissonEmulator;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

long long to_count(const std::string& s) { return s == "(nil)" ? 0 : std::stoll(s); }

ReentrantMutex::Options redisson() {
  ReentrantMutex::Options o;
  o.redisson_compat = true;
  return o;
}

class RedissonCompatTest : public dlock::test::ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    java.emplace(*server);
  }
  void TearDown() override {
    java.reset();
    ServerFixture::TearDown();
  }
  std::string hget(const std::string& key, const std::string& field) { return raw->cmd({"HGET", key, field}); }
  long long exists(const std::string& key) { return raw->cmd_int({"EXISTS", key}); }

  std::optional<RedissonEmulator> java;  // the emulated Java service (one Redisson client)
};

// What dlock writes is what Redisson writes: a hash at the name itself, "<uuid>:<thread>" -> count,
// a 30 s lease, "0" published on redisson_lock__channel:{N} by the last release.
TEST_F(RedissonCompatTest, LayoutIsRedissons) {
  ReentrantMutex m(*client, "orders", redisson());
  EXPECT_EQ(m.key(), "orders");
  const std::regex field(R"(^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:[0-9]+$)");
  EXPECT_TRUE(std::regex_match(m.owner(), field)) << m.owner();

  m.lock();
  EXPECT_EQ(raw->cmd({"TYPE", "orders"}), "hash");
  EXPECT_EQ(raw->cmd_array({"HKEYS", "orders"}), std::vector<std::string>{m.owner()}) << "no extra fields";
  EXPECT_EQ(hget("orders", m.owner()), "1");
  const long long pttl = raw->cmd_int({"PTTL", "orders"});
  EXPECT_GT(pttl, 29000);
  EXPECT_LE(pttl, 30000);
  EXPECT_EQ(m.fencing_token().value, 0u) << "Redisson mode has no fencing token";
  EXPECT_TRUE(m.try_lock());
  EXPECT_EQ(hget("orders", m.owner()), "2");
  EXPECT_EQ(raw->cmd_array({"KEYS", "*"}), std::vector<std::string>{"orders"}) << "dlock keys in Redisson mode";

  // The last release publishes Redisson's unlock message on Redisson's channel.
  RawConnection sub(*server);
  ASSERT_EQ(sub.cmd_array({"SUBSCRIBE", RedissonEmulator::channel("orders")}).size(), 3u);
  m.unlock();
  EXPECT_EQ(hget("orders", m.owner()), "1");
  m.unlock();
  EXPECT_EQ(exists("orders"), 0);
  const auto message = sub.cmd_array({"PING"});  // not sent in subscribed mode: reads the next push
  ASSERT_EQ(message.size(), 3u);
  EXPECT_EQ(message[0], "message");
  EXPECT_EQ(message[1], "redisson_lock__channel:{orders}");
  EXPECT_EQ(message[2], "0");
}

// Redisson lock names are used as they are, braces included; the Lease has no token.
// A name with a brace is its own hash tag: Redisson's channel and latch append it after a colon
// (RedissonObject.prefixName), so that is where the release publishes.
TEST_F(RedissonCompatTest, NamesMayContainBracesAndLeasesHaveNoToken) {
  ReentrantMutex m(*client, "app{shard-1}:lock", redisson());
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_FALSE(lease->token());
  EXPECT_EQ(hget("app{shard-1}:lock", lease->owner()), "1");
  EXPECT_FALSE(java->try_acquire("app{shard-1}:lock", 1) == std::nullopt);
  RawConnection sub(*server);
  sub.cmd_array({"SUBSCRIBE", "redisson_lock__channel:app{shard-1}:lock"});
  ASSERT_TRUE(lease->release().ok());
  EXPECT_EQ(exists("app{shard-1}:lock"), 0);
  const auto message = sub.cmd_array({"PING"});  // not sent in subscribed mode: reads the next push
  ASSERT_EQ(message.size(), 3u);
  EXPECT_EQ(message[1], "redisson_lock__channel:app{shard-1}:lock");
  EXPECT_EQ(message[2], "0");

  ASSERT_EQ(raw->cmd({"SET", "plain", "x"}), "OK");
  ReentrantMutex typed(*client, "plain", redisson());
  EXPECT_EQ(typed.acquire(no_wait()).code(), make_error_code(dlock::errc::wrong_type));
}

TEST_F(RedissonCompatTest, DlockAndJavaExcludeEachOtherBothWays) {
  ReentrantMutex m(*client, "inventory", redisson());

  // Java holds (twice): dlock is kept out until Java's last unlock.
  ASSERT_EQ(java->try_acquire("inventory", 1), std::nullopt);
  ASSERT_EQ(java->try_acquire("inventory", 1), std::nullopt);
  EXPECT_EQ(hget("inventory", java->field(1)), "2");
  EXPECT_FALSE(m.try_lock());
  auto busy = m.acquire(no_wait());
  EXPECT_EQ(busy.code(), make_error_code(dlock::errc::busy)) << busy.error().what();
  EXPECT_EQ(java->unlock("inventory", 1), std::optional<bool>(false));
  EXPECT_FALSE(m.try_lock());
  EXPECT_EQ(java->unlock("inventory", 1), std::optional<bool>(true));
  EXPECT_EQ(exists("inventory"), 0);

  // dlock holds (twice): Java is kept out, and cannot unlock what it does not hold.
  ASSERT_TRUE(m.try_lock());
  ASSERT_TRUE(m.try_lock());
  const std::optional<long long> java_try = java->try_acquire("inventory", 1);
  ASSERT_TRUE(java_try.has_value()) << "Java acquired a lock dlock holds";
  EXPECT_GT(*java_try, 29000);
  EXPECT_EQ(java->unlock("inventory", 1), std::nullopt) << "IllegalMonitorStateException expected";
  EXPECT_EQ(hget("inventory", m.owner()), "2");
  EXPECT_FALSE(java->renew("inventory", 1));
  m.unlock();
  EXPECT_TRUE(java->try_acquire("inventory", 1).has_value());
  m.unlock();
  EXPECT_EQ(java->try_acquire("inventory", 1), std::nullopt);
  EXPECT_EQ(java->unlock("inventory", 1), std::optional<bool>(true));
}

// Java's release wakes a dlock waiter at once: its recheck interval and the holder's TTL are
// both far longer than the handover, so only the "0" on Redisson's channel can wake it.
TEST_F(RedissonCompatTest, JavaReleaseWakesDlockWaiter) {
  ASSERT_EQ(raw->cmd_array({"CONFIG", "GET", "notify-keyspace-events"}).back(), "") << "keyspace events would also wake it";
  ReentrantMutex m(*client, "handover", redisson());
  ASSERT_EQ(java->try_acquire("handover", 5), std::nullopt);
  auto waiter = std::async(std::launch::async, [&] {
    auto r = m.acquire(dlock::WaitOptions{15000ms, 20000ms});
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  std::this_thread::sleep_for(300ms);  // the waiter has subscribed and tried
  ASSERT_EQ(waiter.wait_for(0ms), std::future_status::timeout) << "dlock got in while Java held it";
  const auto released_at = SteadyClock::now();
  ASSERT_EQ(java->unlock("handover", 5), std::optional<bool>(true));
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
  auto [lease, got_at] = waiter.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(got_at - released_at, 1000ms) << "the waiter was not woken by Java's release";
  EXPECT_EQ(hget("handover", lease->owner()), "1");
  ASSERT_TRUE(lease->release().ok());
}

// dlock's release wakes a (emulated) Java waiter at once: it listens for "0" only, and would
// otherwise wait out the 30 s PTTL.
TEST_F(RedissonCompatTest, DlockReleaseWakesJavaWaiter) {
  ReentrantMutex m(*client, "handback", redisson());
  m.lock();
  RedissonEmulator waiting_java(*server);
  auto waiter = std::async(std::launch::async, [&] {
    const bool got = waiting_java.lock("handback", 9, 15000ms);
    return std::make_pair(got, SteadyClock::now());
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(waiter.wait_for(0ms), std::future_status::timeout) << "Java got in while dlock held it";
  const auto released_at = SteadyClock::now();
  m.unlock();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
  auto [got, got_at] = waiter.get();
  ASSERT_TRUE(got);
  EXPECT_LT(got_at - released_at, 1000ms) << "the Java waiter was not woken by dlock's release";
  EXPECT_EQ(hget("handback", waiting_java.field(9)), "1");
  EXPECT_FALSE(m.try_lock());
  EXPECT_EQ(waiting_java.unlock("handback", 9), std::optional<bool>(true));
}

// dlock threads and Java threads take turns on one counter, each nesting two takes per round:
// never two inside at once, no lost update.
TEST_F(RedissonCompatTest, DlockAndJavaThreadsLoseNoUpdate) {
  constexpr int kPerSide = 3;
  constexpr int kIters = 15;
  ReentrantMutex m(*client, "shared-counter", redisson());
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> failures{0};
  auto critical_section = [&](RawConnection& conn) {
    const int now = inside.fetch_add(1) + 1;
    int seen = max_inside.load();
    while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
    }
    const long long v = to_count(conn.cmd({"GET", "counter"}));
    std::this_thread::yield();
    conn.cmd({"SET", "counter", std::to_string(v + 1)});
    inside.fetch_sub(1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kPerSide; ++t) {
    threads.emplace_back([&] {
      try {
        RawConnection conn(*server);
        for (int i = 0; i < kIters; ++i) {
          std::lock_guard<ReentrantMutex> outer(m);
          std::lock_guard<ReentrantMutex> inner(m);
          critical_section(conn);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "dlock thread: " << e.what();
        failures.fetch_add(1);
      }
    });
    threads.emplace_back([&, thread_id = 100 + t] {
      try {
        RawConnection conn(*server);
        for (int i = 0; i < kIters; ++i) {
          if (!java->lock("shared-counter", thread_id, 20000ms)) throw std::runtime_error("Java lock() timed out");
          if (java->try_acquire("shared-counter", thread_id) != std::nullopt) throw std::runtime_error("re-take failed");
          critical_section(conn);
          if (java->unlock("shared-counter", thread_id) != std::optional<bool>(false)) throw std::runtime_error("inner unlock");
          if (java->unlock("shared-counter", thread_id) != std::optional<bool>(true)) throw std::runtime_error("outer unlock");
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "Java thread: " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_EQ(to_count(raw->cmd({"GET", "counter"})), 2 * kPerSide * kIters);
  EXPECT_EQ(exists("shared-counter"), 0);
}

// The watchdog renews a Redisson-mode hold with Redisson's renewal (PEXPIRE while the field is
// there), so a Java client keeps seeing it held past its TTL.
TEST_F(RedissonCompatTest, WatchdogKeepsRedissonHoldAlive) {
  auto opts = redisson();
  opts.lease.ttl = 300ms;
  ReentrantMutex m(*client, "renewed", opts);
  auto lease = m.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < 1000ms) {
    const std::optional<long long> java_try = java->try_acquire("renewed", 1);
    ASSERT_TRUE(java_try.has_value()) << "Java got in after " << ms_since(t0).count() << " ms";
    ASSERT_GT(*java_try, 0);
    ASSERT_LE(*java_try, 300);
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_TRUE(lease->held());
  ASSERT_TRUE(lease->release().ok());
  EXPECT_EQ(java->try_acquire("renewed", 1), std::nullopt);
}

}  // namespace
