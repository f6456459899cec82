// What a Redlock acquire+release sends to each node, counted by the servers themselves
// (INFO commandstats: client-issued commands only, as the bench counts them).
//
// An uncontended pair is one acquire and one release per node, and nothing else: a node whose
// acquire answered after the hold was let go (a straggler) used to get its release twice, since
// the hold's release might have overtaken its acquire. It now gets the second one only when the
// hold's release did not take effect there (redlock_answers.hpp). And a try that failed releases
// only the nodes that may hold something of it, never one that answered busy.
//
// Three real, independent redis-servers.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/redlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/server_group.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::no_wait;
using dlock::test::pointers;
using dlock::test::scaled;

constexpr std::size_t nodes = 3;

// Script calls (EVALSHA and EVAL) node `i` was sent since its last CONFIG RESETSTAT.
long long script_calls(dlock::test::ServerGroup& group, std::size_t i) {
  const std::string info = group.raw(i).cmd({"INFO", "commandstats"});
  long long calls = 0;
  for (const std::string name : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    const auto at = info.find(name);
    if (at != std::string::npos) calls += std::stoll(info.substr(at + name.size()));
  }
  return calls;
}

void reset_stats(dlock::test::ServerGroup& group) {
  for (std::size_t i = 0; i < nodes; ++i) ASSERT_EQ(group.raw(i).cmd({"CONFIG", "RESETSTAT"}), "OK");
}

// Every node's key is gone (the last release, and any second one, has run), plus room for a
// command still on its way.
void settle(dlock::test::ServerGroup& group, const std::string& key) {
  for (std::size_t i = 0; i < nodes; ++i) {
    EXPECT_TRUE(eventually([&] { return group.raw(i).cmd({"EXISTS", key}) == "0"; }, scaled(2000ms))) << "node " << i;
  }
  std::this_thread::sleep_for(scaled(100ms));
}

// One pair first, so that the counted ones find the scripts loaded (NOSCRIPT, then EVAL) and
// the connections up; then every node's key gone. Call with ASSERT_NO_FATAL_FAILURE.
void warm_up(dlock::test::ServerGroup& group, dlock::Redlock& lock) {
  auto warm = lock.acquire(no_wait());
  ASSERT_TRUE(warm.ok()) << warm.error().what();
  ASSERT_TRUE(warm->release().ok());
  settle(group, lock.key());
}

TEST(RedlockCommands, AnUncontendedPairIsOneAcquireAndOneReleasePerNode) {
  dlock::test::ServerGroup group(nodes);
  auto clients = group.clients();
  dlock::Redlock lock(pointers(clients), "pairs");
  ASSERT_NO_FATAL_FAILURE(warm_up(group, lock));
  // The fencing counters in step: each node seeded its own from its clock, and a node left
  // ahead stays ahead until it is among the answers a try counts with, which then gets the
  // fencing write-back (redlock_attempt.cpp): a pair's worth of script calls more.
  long long top = 0;
  for (std::size_t i = 0; i < nodes; ++i) top = std::max(top, std::stoll(group.raw(i).cmd({"GET", lock.key() + ":fence"})));
  for (std::size_t i = 0; i < nodes; ++i) {
    ASSERT_EQ(group.raw(i).cmd({"SET", lock.key() + ":fence", std::to_string(top)}), "OK");
  }
  reset_stats(group);
  constexpr int pairs = 200;
  for (int p = 0; p < pairs; ++p) {
    auto lease = lock.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << "pair " << p << ": " << lease.error().what();
    ASSERT_TRUE(lease->release().ok()) << "pair " << p;
  }
  settle(group, lock.key());
  // The old double release added 64 to 127 calls over the three nodes in three runs of this.
  for (std::size_t i = 0; i < nodes; ++i) {
    EXPECT_EQ(script_calls(group, i), 2 * pairs) << "node " << i << " (acquire + release per pair expected)";
  }
}

TEST(RedlockCommands, AFailedTryReleasesNoNodeThatAnsweredBusy) {
  dlock::test::ServerGroup group(nodes);
  auto clients = group.clients();
  dlock::Redlock lock(pointers(clients), "busy");
  ASSERT_NO_FATAL_FAILURE(warm_up(group, lock));
  // Another owner holds nodes 0 and 1: each try takes node 2 only, and gives it back.
  for (std::size_t i : {0, 1}) {
    ASSERT_EQ(group.raw(i).cmd({"SET", lock.key(), "someone-else", "PX", "60000"}), "OK");
  }
  reset_stats(group);
  constexpr int tries = 20;
  for (int t = 0; t < tries; ++t) {
    auto lease = lock.acquire(no_wait());
    ASSERT_FALSE(lease.ok()) << "try " << t;
    ASSERT_EQ(lease.code(), dlock::errc::busy) << "try " << t << ": " << lease.error().what();
  }
  EXPECT_TRUE(eventually([&] { return group.raw(2).cmd({"EXISTS", lock.key()}) == "0"; }, scaled(2000ms)))
      << "node 2 was left held";
  std::this_thread::sleep_for(scaled(100ms));
  EXPECT_EQ(script_calls(group, 0), tries) << "a busy node was released";
  EXPECT_EQ(script_calls(group, 1), tries) << "a busy node was released";
  // Node 2 gets each try's acquire, and a release for each one that took it: a try can find it
  // still held by the previous one (whose release leaves once its answer is in, which may be
  // after the caller tried again), and then has nothing to give back there.
  EXPECT_GE(script_calls(group, 2), tries + 1);
  EXPECT_LE(script_calls(group, 2), 2 * tries);
}

}  // namespace
