// A release whose reply is lost: Lease::release() sends it again once the connection is back.
// Cleanups nobody waits for (an acquisition whose answer was lost, a writer's intent, a FairLock
// waiter's place) likewise.
//
// Found reading lease.cpp against release_memory.hpp: the retry was sent at once after the
// connection error, while the connection was down and failing commands fast, so it failed too;
// release() reported "connection error, the key expires at its TTL" for a lock it had released,
// or left a lock held until its TTL after a blip.
//
// A fault proxy (support/fault_proxy.hpp) sits between the releasing Client and a real
// redis-server: hold_replies lets the release run and keeps its answer, pause keeps the release
// itself; drop() then breaks the connection, as a network blip does.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "dlock/dlock.hpp"
#include "locks/multi_lock_ordered.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_helpers.hpp"
#include "support/proxied_fixture.hpp"
#include "support/raw_connection.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::FaultProxy;
using dlock::test::no_wait;
using dlock::test::scaled;

class ReleaseRetryTest : public dlock::test::ProxiedServerFixture {
 protected:
  dlock::LeaseOptions watched() {
    dlock::LeaseOptions o;
    o.ttl = 10000ms;
    o.events.on_lost = [this](dlock::LossReason) { lost_events.fetch_add(1); };
    return o;
  }

  dlock::ReentrantMutexOptions reentrant_watched() {
    dlock::ReentrantMutexOptions o;
    o.lease = watched();
    return o;
  }

  // Takes and releases `m` once, so the server has the scripts: a NOSCRIPT answer held by the
  // proxy would keep the release (sent again as EVAL only after that answer) from running.
  template <class Lock>
  static void scripts_loaded(Lock& m) {
    auto l = m.acquire(no_wait());
    ASSERT_TRUE(l.ok()) << l.error().what();
    ASSERT_TRUE(l->release().ok());
  }

  // Acquires `m` while the proxy holds the answers; once `first_key` exists on the server (the
  // acquisition ran), the connection breaks, as in a blip, and comes back. Expects the
  // acquisition to report the connection error, then `first_key` to go within 2 s: the Client
  // cleans up what it may have taken instead of leaving it to its TTL.
  template <class Lock>
  void acquire_whose_answer_is_lost(Lock& m, const std::string& first_key) {
    scripts_loaded(m);
    proxy->hold_replies();
    auto got = std::async(std::launch::async, [&] { return m.acquire(no_wait()); });
    ASSERT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", first_key}) == 1; }, scaled(3000ms)))
        << "the acquisition never ran";
    proxy->drop();
    proxy->pass();
    ASSERT_EQ(got.wait_for(scaled(5000ms)), std::future_status::ready);
    const auto r = got.get();
    ASSERT_FALSE(r.ok()) << "the acquisition's answer was lost, yet it returned a lease";
    EXPECT_EQ(r.code(), dlock::errc::connection) << r.error().what();
    EXPECT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", first_key}) == 0; }, scaled(2000ms)))
        << "what the acquisition took was left to sit out its TTL (PTTL " << raw->cmd({"PTTL", first_key}) << " ms)";
    EXPECT_EQ(via_proxy->active_leases(), 0u);
  }

  // Another Client takes the lock and releases it: the lock's release marker is now its own.
  void taken_and_released_by_another(const std::string& name) {
    dlock::Mutex other(*client, name);
    auto l = other.acquire(dlock::WaitOptions{scaled(3000ms), 100ms});
    ASSERT_TRUE(l.ok()) << l.error().what();
    ASSERT_TRUE(l->release().ok());
    ASSERT_NE(raw->cmd({"GET", other.key() + ":rel"}), "(nil)");
  }

  // Releases `lease` of `m` while the proxy is in `mode` (hold_replies: the release runs and its
  // answer is held; pause: the release itself is held). Once the key is gone from the server
  // (by the release, or by expiry), `meanwhile` runs; then the connection breaks, as in a blip,
  // and comes back. Returns what release() reported.
  dlock::Result<void> release_through_a_blip(dlock::Lease& lease, dlock::Mutex& m, void (FaultProxy::*mode)(),
                                             const std::function<void()>& meanwhile = {}) {
    (*proxy.*mode)();
    auto released = std::async(std::launch::async, [&] { return lease.release(); });
    EXPECT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", m.key()}) == 0; }, scaled(3000ms)))
        << "the key is still there";
    if (meanwhile) meanwhile();
    proxy->drop();
    proxy->pass();
    EXPECT_EQ(released.wait_for(scaled(10000ms)), std::future_status::ready) << "release() did not return";
    return released.get();
  }

  // For a Client through the proxy that notices a partition within a few hundred milliseconds.
  static dlock::ClientOptions quick_to_notice() {
    dlock::ClientOptions co;
    co.command_timeout = 300ms;
    co.connect_timeout = 300ms;
    return co;
  }

  // Starts `wait` (an acquisition that leaves something on the server while it waits: an
  // intent, a queue place), cancels it while the node is unreachable so that its cleanup meets
  // the partition, then ends the partition. `left()`: is that something still on the server?
  void cancel_in_a_partition(const std::function<dlock::Result<dlock::Lease>(std::stop_token)>& wait,
                             const std::function<bool()>& left) {
    std::stop_source stop;
    auto w = std::async(std::launch::async, [&] { return wait(stop.get_token()); });
    ASSERT_TRUE(eventually(left, scaled(3000ms))) << "the wait left nothing to clean up";
    std::this_thread::sleep_for(200ms);  // its tries answered: only the cleanup meets the partition
    proxy->blackhole();
    stop.request_stop();
    ASSERT_EQ(w.wait_for(scaled(5000ms)), std::future_status::ready) << "the wait did not end";
    ASSERT_FALSE(w.get().ok());
    std::this_thread::sleep_for(400ms);  // the cleanup times out in the partition
    EXPECT_TRUE(left()) << "the cleanup got through the partition";
    proxy->pass();
    EXPECT_TRUE(eventually([&] { return !left(); }, scaled(3000ms))) << "left behind after the partition";
  }

  std::atomic<int> lost_events{0};
};

// The release ran; its answer was lost with the connection. The retry waits for the reconnect
// and recognises its own release.
TEST_F(ReleaseRetryTest, ReleaseWhoseReplyIsLostIsRetriedOnceTheConnectionIsBack) {
  dlock::Mutex m(*via_proxy, "lost-reply", watched());
  scripts_loaded(m);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto r = release_through_a_blip(*lease, m, &FaultProxy::hold_replies);
  EXPECT_TRUE(r.ok()) << "a release that ran was reported as: " << r.error().what();
  EXPECT_FALSE(lease->lost());
  EXPECT_EQ(lost_events.load(), 0);
}

// Between the two attempts another owner took the lock and released it, so the lock's marker
// names that owner. The retry cannot tell this from a key lost in a restart or failover (a
// restart-without-persistence fault scenario caught a release that reported success for a hold
// another owner had overlapped, when this case was counted as released), so it reports
// lock_lost: a false alarm, never a missed loss.
TEST_F(ReleaseRetryTest, RetryThatFindsAnotherOwnersReleaseReportsLockLost) {
  dlock::Mutex m(*via_proxy, "overwritten-marker", watched());
  scripts_loaded(m);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto r = release_through_a_blip(*lease, m, &FaultProxy::hold_replies,
                                        [&] { taken_and_released_by_another("overwritten-marker"); });
  EXPECT_EQ(r.code(), dlock::errc::lock_lost) << (r.ok() ? std::string("success") : r.error().what());
}

// The first attempt never reached the server (held, then lost with the connection), the lease
// ran out meanwhile, and another owner took and released the lock. The retry finds neither: this
// is a loss, and reported as one.
TEST_F(ReleaseRetryTest, NotHeldAfterTheValidityEndedIsStillALoss) {
  dlock::LeaseOptions o;
  o.mode = dlock::LeaseMode::fixed_ttl;
  o.ttl = 300ms;
  dlock::Mutex m(*via_proxy, "expired-meanwhile", o);
  scripts_loaded(m);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto r = release_through_a_blip(*lease, m, &FaultProxy::pause,
                                        [&] { taken_and_released_by_another("expired-meanwhile"); });
  EXPECT_EQ(r.code(), dlock::errc::lock_lost) << (r.ok() ? std::string("success") : r.error().what());
}

// An acquisition ran on the server but its answer was lost with the connection: the Client
// releases the hold it may have by its owner token, once the connection is back. Sent once
// right after the failure (when the connection was down and failed it fast), that release never
// ran and the lock sat out its TTL.
TEST_F(ReleaseRetryTest, AcquisitionWhoseReplyIsLostIsGivenBackOnceTheConnectionIsBack) {
  dlock::Mutex m(*via_proxy, "lost-acquire", watched());
  acquire_whose_answer_is_lost(m, m.key());
}

// The same for a MultiLock taken group by group (Cluster, names over several slots; forced here
// on a standalone server): the group whose answer was lost is given back once the connection is
// back. Sent once right after the connection error, that release failed fast and the group sat
// out its TTL.
TEST_F(ReleaseRetryTest, OrderedMultiLockGivesBackAGroupWhoseAnswerIsLost) {
  dlock::MultiLock m(*via_proxy, {"group-a", "group-b"}, watched());
  dlock::detail::MultiLockAccess::force_ordered(m);
  const auto groups = dlock::detail::slot_groups(m.keys());
  ASSERT_EQ(groups.size(), 2u);
  acquire_whose_answer_is_lost(m, groups.front().front());
  for (const auto& k : m.keys()) EXPECT_EQ(raw->cmd_int({"EXISTS", k}), 0) << k;
}

// A ReentrantMutex take whose answer was lost: the owner's count is dropped once the connection
// is back. Sent once right after the connection error, the drop failed fast and the lock sat out
// its TTL.
TEST_F(ReleaseRetryTest, ReentrantTakeWhoseAnswerIsLostIsDroppedOnceTheConnectionIsBack) {
  dlock::ReentrantMutex m(*via_proxy, "lost-take", reentrant_watched());
  acquire_whose_answer_is_lost(m, m.key());
}

// A ReentrantMutex owner is its thread, so the drop of an unknown take would also remove a later
// take of the same thread. Here the thread acquires again while the drop is still being retried
// (the node was unreachable, then comes back): its new take must survive the retries. (The
// unknown take's count, found by the new take, is counted into it: the lock is then freed at its
// TTL after the last release; the test does not release.)
TEST_F(ReleaseRetryTest, PendingReentrantDropNeverRemovesTheOwnersNextTake) {
  dlock::ClientOptions co = quick_to_notice();
  co.reconnect.initial = 1ms;
  co.reconnect.max = 5ms;
  dlock::Client c(proxy->url(), co);
  ASSERT_TRUE(c.ping().ok());
  dlock::ReentrantMutex m(c, "next-take", reentrant_watched());
  scripts_loaded(m);
  std::atomic<bool> first_failed{false};
  proxy->hold_replies();
  // One thread: one owner.
  auto owner = std::async(std::launch::async, [&]() -> dlock::Result<dlock::Lease> {
    auto first = m.acquire(no_wait());
    if (first.ok()) return first;
    first_failed = true;
    const auto until = std::chrono::steady_clock::now() + scaled(5000ms);
    while (std::chrono::steady_clock::now() < until) {
      auto again = m.acquire(no_wait());
      if (again.ok() || again.code() == dlock::errc::busy) return again;
      std::this_thread::sleep_for(1ms);
    }
    return dlock::Error(dlock::errc::timeout, "never acquired again");
  });
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", m.key()}) == 1; }, scaled(3000ms)))
      << "the acquisition never ran";
  proxy->blackhole();
  proxy->drop();
  ASSERT_TRUE(eventually([&] { return first_failed.load(); }, scaled(3000ms)));
  std::this_thread::sleep_for(500ms);  // the drop's tries meet the black hole
  proxy->pass();
  ASSERT_EQ(owner.wait_for(scaled(8000ms)), std::future_status::ready);
  auto lease = owner.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  std::this_thread::sleep_for(scaled(800ms));  // longer than the drop's pauses (at most 100 ms)
  EXPECT_EQ(raw->cmd_int({"EXISTS", m.key()}), 1) << "the pending drop removed the owner's new take";
  EXPECT_FALSE(lease->lost());
  EXPECT_EQ(lost_events.load(), 0);
}

// A writer whose wait is cancelled while the node is unreachable withdraws its intent once the
// node is back: sent once, the withdrawal was lost in the partition and the intent kept new
// readers out until it expired, one lease TTL later.
TEST_F(ReleaseRetryTest, WriterCancelledInAPartitionWithdrawsItsIntentAfterIt) {
  dlock::SharedMutex reader(*client, "intent");
  auto held = reader.acquire_shared(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client c(proxy->url(), quick_to_notice());
  ASSERT_TRUE(c.ping().ok());
  dlock::SharedMutex writer(c, "intent", watched());
  const std::string wintent = writer.key() + ":wintent";
  cancel_in_a_partition([&](std::stop_token stop) { return writer.acquire(dlock::WaitOptions{scaled(20000ms), 5000ms}, stop); },
                        [&] { return raw->cmd_int({"ZCARD", wintent}) == 1; });
  dlock::SharedMutex other(*client, "intent");
  EXPECT_TRUE(other.try_lock_shared()) << "a new reader is kept out";
  other.unlock_shared();
}

// The same for a FairLock waiter: its place in the queue goes once the node is back. Left
// behind, it held up every waiter behind it until it expired (waiter_ttl).
TEST_F(ReleaseRetryTest, FairWaiterCancelledInAPartitionLeavesTheQueueAfterIt) {
  dlock::FairLock holder(*client, "queue");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client c(proxy->url(), quick_to_notice());
  ASSERT_TRUE(c.ping().ok());
  dlock::FairLock waiter(c, "queue", watched());
  const std::string queue = waiter.key() + ":queue";
  cancel_in_a_partition([&](std::stop_token stop) { return waiter.acquire(dlock::WaitOptions{scaled(20000ms), 5000ms}, stop); },
                        [&] { return raw->cmd_int({"LLEN", queue}) == 1; });
}

// The server stays unreachable: the retries end after reconnect.max + connect_timeout, with
// the connection error.
TEST_F(ReleaseRetryTest, RetriesEndWhenTheServerStaysUnreachable) {
  dlock::ClientOptions co;
  co.connect_timeout = 300ms;
  co.reconnect.max = 200ms;
  dlock::Client c(proxy->url(), co);
  ASSERT_TRUE(c.ping().ok());
  dlock::Mutex m(c, "unreachable", watched());
  scripts_loaded(m);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  proxy->blackhole();
  proxy->drop();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = lease->release();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.code(), dlock::errc::connection) << (r.ok() ? std::string("success") : r.error().what());
  EXPECT_LT(took, scaled(3000ms)) << "the retries did not end";
  proxy->pass();
}

}  // namespace
