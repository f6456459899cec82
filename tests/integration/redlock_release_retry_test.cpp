// Redlock's releases on a node whose answer is lost: sent again to that node once it is back.
//
// A Redlock release (and the give-back of a try that did not reach a majority) is decided by
// the first answers of a majority; a node that lost its connection meanwhile used to get the
// release once, failed fast while it reconnected, and kept its key until the TTL ended. A node
// holding a stale key narrows every later acquisition's majority (two such nodes out of three:
// nobody can take the lock until their TTL ends).
//
// Three real redis-servers, each behind a fault proxy (support/fault_proxy.hpp); the Redlock's
// Clients talk to the proxies, the test checks the servers directly.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/redlock.hpp"
#include "scripts/script.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_helpers.hpp"
#include "support/server_group.hpp"
#include "support/wait.hpp"

namespace dlock::detail::scripts {
extern const Script redlock_release;
}  // namespace dlock::detail::scripts

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::FaultProxy;
using dlock::test::no_wait;
using dlock::test::scaled;

class RedlockReleaseRetryTest : public ::testing::Test {
 protected:
  static constexpr std::size_t N = 3;

  void SetUp() override {
    dlock::ClientOptions o;
    o.reconnect.initial = 10ms;
    o.reconnect.max = 100ms;
    for (std::size_t i = 0; i < N; ++i) {
      proxies.push_back(std::make_unique<FaultProxy>("127.0.0.1", group.server(i).port()));
      clients.push_back(std::make_unique<dlock::Client>(proxies.back()->url(), o));
      ASSERT_TRUE(clients.back()->ping().ok());
    }
  }

  std::unique_ptr<dlock::Redlock> lock(const std::string& name) {
    dlock::LeaseOptions lease;
    lease.ttl = 20000ms;  // long enough that a key left behind is never mistaken for a removed one
    return std::make_unique<dlock::Redlock>(dlock::test::pointers(clients), name, lease);
  }

  // Takes and releases the lock once, so every node has the scripts: a NOSCRIPT answer held by
  // a proxy would keep the command (sent again as EVAL only after that answer) from running.
  static void scripts_loaded(dlock::Redlock& l) {
    auto lease = l.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    ASSERT_TRUE(lease->release().ok());
  }

  bool key_on(std::size_t node, const std::string& key) { return group.raw(node).cmd_int({"EXISTS", key}) == 1; }

  dlock::test::ServerGroup group{N};
  std::vector<std::unique_ptr<FaultProxy>> proxies;
  std::vector<std::unique_ptr<dlock::Client>> clients;
};

// release() returns once a majority released; the third node's release was held in the
// network and lost with the connection. It is sent again once that node is back.
TEST_F(RedlockReleaseRetryTest, ReleaseLostOnOneNodeIsSentAgainOnceItIsBack) {
  auto l = lock("minority-release");
  scripts_loaded(*l);
  auto lease = l->acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  for (std::size_t i = 0; i < N; ++i) {
    ASSERT_TRUE(eventually([&] { return group.raw(i).cmd({"GET", l->key()}) == lease->owner(); }, scaled(2000ms)))
        << "node " << i << " never got the key";
  }
  proxies[2]->pause();
  const auto r = lease->release();
  EXPECT_TRUE(r.ok()) << r.error().what();
  EXPECT_FALSE(key_on(0, l->key()));
  EXPECT_FALSE(key_on(1, l->key()));
  EXPECT_TRUE(key_on(2, l->key())) << "the release reached node 2 through the paused proxy";
  proxies[2]->drop();
  proxies[2]->pass();
  EXPECT_TRUE(eventually([&] { return !key_on(2, l->key()); }, scaled(3000ms)))
      << "node 2 keeps the released key until its TTL (PTTL " << group.raw(2).cmd({"PTTL", l->key()}) << " ms)";
}

// A try whose answers from two of the three nodes were lost: no majority, so it gives back what
// it took everywhere. The two nodes had run the acquisition; they get the give-back once they
// are back, and the lock is free again well before the TTL.
TEST_F(RedlockReleaseRetryTest, TryWithoutAMajorityGivesBackOnNodesThatComeBack) {
  auto l = lock("lost-answers");
  scripts_loaded(*l);
  proxies[1]->hold_replies();
  proxies[2]->hold_replies();
  auto got = std::async(std::launch::async, [&] { return l->acquire(no_wait()); });
  ASSERT_TRUE(eventually([&] { return key_on(1, l->key()) && key_on(2, l->key()); }, scaled(3000ms)))
      << "the acquisition never ran on nodes 1 and 2";
  proxies[1]->drop();
  proxies[2]->drop();
  proxies[1]->pass();
  proxies[2]->pass();
  ASSERT_EQ(got.wait_for(scaled(5000ms)), std::future_status::ready);
  const auto r = got.get();
  ASSERT_FALSE(r.ok()) << "two of three answers were lost, yet the Redlock returned a lease";
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_TRUE(eventually([&] { return !key_on(i, l->key()); }, scaled(3000ms)))
        << "node " << i << " keeps the key until its TTL (PTTL " << group.raw(i).cmd({"PTTL", l->key()}) << " ms)";
  }
  auto again = l->acquire(no_wait());
  EXPECT_TRUE(again.ok()) << again.error().what();
}

// A node that has the release script but not the acquisition's (a SCRIPT FLUSH, a restart, a
// failover to a replica: the cache is not replicated), whose answers are slow. The acquisition
// is decided by the two quick nodes and released at once; on the slow node the release must
// still run after the acquisition it undoes. With EVALSHA and an EVAL fallback after NOSCRIPT,
// the fallback left only once the NOSCRIPT answer was read, behind the release: the release
// found nothing, then the acquisition took the key, which stayed until its TTL. A script's
// first use on a connection is an EVAL now (Command::script), so the order holds.
TEST_F(RedlockReleaseRetryTest, AcquisitionOfAnUnloadedScriptStaysAheadOfItsRelease) {
  for (std::size_t i = 0; i < N; ++i) ASSERT_EQ(group.raw(i).cmd({"SCRIPT", "FLUSH"}), "OK");
  ASSERT_EQ(group.raw(1).cmd({"SCRIPT", "LOAD", dlock::detail::scripts::redlock_release.source}),
            dlock::detail::scripts::redlock_release.sha1);
  // Clients that have sent no script yet (the fixture's only pinged).
  proxies[1]->delay(100ms);
  auto l = lock("unloaded");
  auto lease = l->acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_TRUE(lease->release().ok());
  std::this_thread::sleep_for(scaled(600ms));  // node 1's commands and any fallback have run
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_FALSE(key_on(i, l->key())) << "node " << i << " keeps the key of a released lock until its TTL (PTTL "
                                      << group.raw(i).cmd({"PTTL", l->key()}) << " ms)";
  }
}

// The same after a SCRIPT FLUSH during the connections' life: the connection to node 1 has sent
// both scripts before, so by itself it would send EVALSHA. Its first NOSCRIPT (the probe's)
// makes every script's next use an EVAL again, so the order holds from then on.
TEST_F(RedlockReleaseRetryTest, AfterANoscriptAnswerFirstUsesAreEvalsAgain) {
  auto l = lock("flushed");
  scripts_loaded(*l);
  ASSERT_EQ(group.raw(1).cmd({"SCRIPT", "FLUSH"}), "OK");
  auto probe = lock("probe");
  scripts_loaded(*probe);  // node 1 answers NOSCRIPT once, then has the scripts again
  ASSERT_TRUE(eventually([&] { return !key_on(1, probe->key()); }, scaled(2000ms)));
  ASSERT_EQ(group.raw(1).cmd({"SCRIPT", "FLUSH"}), "OK");
  ASSERT_EQ(group.raw(1).cmd({"SCRIPT", "LOAD", dlock::detail::scripts::redlock_release.source}),
            dlock::detail::scripts::redlock_release.sha1);
  proxies[1]->delay(100ms);
  auto lease = l->acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_TRUE(lease->release().ok());
  std::this_thread::sleep_for(scaled(600ms));
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_FALSE(key_on(i, l->key())) << "node " << i << " keeps the key of a released lock until its TTL (PTTL "
                                      << group.raw(i).cmd({"PTTL", l->key()}) << " ms)";
  }
}

}  // namespace
