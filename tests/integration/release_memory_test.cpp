// What a release leaves behind for a retried release to recognise (lease.cpp retries once after
// a connection error or timeout) lives only as long as that retry can take, as derived from the
// releasing Client's options (src/locks/release_memory.hpp), and a set of remembered releases
// keeps only the newest 10,000: a lock released thousands of times a second used to keep a
// member per release for 30 s (15 MB per 100,000) and stall Redis while it freed them at once.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/server_fixture.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

class ReleaseMemoryTest : public ServerFixture {
 protected:
  // 2 x 500 ms + 500 ms + 200 ms + 1 s = 2.7 s of release memory.
  static ClientOptions short_options() {
    ClientOptions o;
    o.command_timeout = 500ms;
    o.connect_timeout = 500ms;
    o.reconnect.max = 200ms;
    return o;
  }

  void expect_lives_release_memory(const std::string& key) {
    const long long pttl = raw->cmd_int({"PTTL", key});
    EXPECT_GT(pttl, 2000) << key;
    EXPECT_LE(pttl, 2700) << key << " lives longer than the Client's release memory";
  }

  // Fills `key` (a zset) with `n` remembered releases of other owners, a second old.
  void fill_released_set(const std::string& key, int n) {
    raw->cmd_int({"EVAL",
                  "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 - 1000 "
                  "for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], now, 'other:' .. i) end "
                  "return redis.call('ZCARD', KEYS[1])",
                  "1", key, std::to_string(n)});
  }

  // The newest 10,000 are kept, and the newest is the release just made (not one of the others).
  void expect_capped_with_newest_kept(const std::string& key) {
    EXPECT_EQ(raw->cmd_int({"ZCARD", key}), 10000) << key;
    const auto newest = raw->cmd_array({"ZRANGE", key, "-1", "-1"});
    ASSERT_EQ(newest.size(), 1u);
    EXPECT_EQ(newest[0].rfind("other:", 0), std::string::npos) << "the release just made was trimmed";
  }
};

TEST_F(ReleaseMemoryTest, SharedMutexRemembersReleasesForTheClientsRetryWindow) {
  dlock::Client c(server->url(), short_options());
  dlock::SharedMutex m(c, "rm-shared");
  m.lock();
  m.unlock();
  expect_lives_release_memory(m.key() + ":released");
  m.lock_shared();
  m.unlock_shared();
  expect_lives_release_memory(m.key() + ":released");
  EXPECT_EQ(raw->cmd_int({"ZCARD", m.key() + ":released"}), 2);
}

TEST_F(ReleaseMemoryTest, SemaphoreRemembersReleasesForTheClientsRetryWindow) {
  dlock::Client c(server->url(), short_options());
  dlock::Semaphore s(c, "rm-sem", 2);
  auto lease = s.acquire(1);
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_TRUE(lease->release().ok());
  expect_lives_release_memory(s.key() + ":released");
}

TEST_F(ReleaseMemoryTest, ReentrantLatchLivesTheClientsRetryWindow) {
  dlock::Client c(server->url(), short_options());
  dlock::ReentrantMutex m(c, "rm-reentrant");
  m.lock();
  m.lock();
  m.unlock();  // one take of two: its latch stays behind
  const auto latches = raw->cmd_array({"KEYS", m.key() + ":rel:*"});
  ASSERT_EQ(latches.size(), 1u);
  expect_lives_release_memory(latches[0]);
  m.unlock();
}

TEST_F(ReleaseMemoryTest, DefaultOptionsRememberTwelveSeconds) {
  dlock::SharedMutex m(*client, "rm-default");
  m.lock();
  m.unlock();
  const long long pttl = raw->cmd_int({"PTTL", m.key() + ":released"});
  EXPECT_GT(pttl, 11000);
  EXPECT_LE(pttl, 12000);
}

TEST_F(ReleaseMemoryTest, SharedMutexKeepsTheNewestTenThousandReleases) {
  dlock::SharedMutex m(*client, "rm-cap-shared");
  fill_released_set(m.key() + ":released", 10050);
  m.lock();
  m.unlock();
  expect_capped_with_newest_kept(m.key() + ":released");
}

TEST_F(ReleaseMemoryTest, SemaphoreKeepsTheNewestTenThousandReleases) {
  dlock::Semaphore s(*client, "rm-cap-sem", 1);
  fill_released_set(s.key() + ":released", 10050);
  auto lease = s.acquire(1);
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_TRUE(lease->release().ok());
  expect_capped_with_newest_kept(s.key() + ":released");
}

}  // namespace
}  // namespace dlock::test
