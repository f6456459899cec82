// A blocking acquisition polls for its result only while a reply is due: once it waits for a
// release (a try found the lock busy, or it queues behind another waiter of its process) it
// calls its on_wait hook, with which the blocking forms park their caller's polling
// (SyncWait::park; the polling itself is tested in tests/unit/sync_wait_test.cpp). Measured:
// callers polling through contended waits took the CPU that the handoff needed
// (docs/BENCHMARKS.md). These tests drive the acquisition machinery on a real server, with tries
// that report what the test wants (AcquireOp) or against a real holder (FairLock).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "client_core.hpp"
#include "dlock/dlock.hpp"
#include "locks/acquire_op.hpp"
#include "locks/fair_wait.hpp"
#include "support/server_fixture.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using detail::AcquireRequest;
using detail::Attempt;

class WaitParkingTest : public ServerFixture {};

struct Counters {
  std::atomic<int> tries{0};
  std::atomic<int> waits{0};
  std::atomic<int> tries_when_parked{-1};
};

// A request whose every try reports `kind` (busy: held elsewhere, with no TTL hint).
AcquireRequest fake_request(const detail::ClientCore& core, const std::string& name, Attempt::Kind kind,
                            Counters& n, std::chrono::milliseconds timeout) {
  AcquireRequest req;
  req.key = core.lock_key(name);
  req.channel = req.key + ":ch";
  req.what = "test lock '" + name + "'";
  req.wait.timeout = timeout;
  req.attempt = [kind, &n](const detail::TryContext&, std::function<void(Attempt)> report) {
    n.tries.fetch_add(1);
    Attempt a;
    a.kind = kind;
    if (kind == Attempt::Kind::failed) a.error = Error(errc::server, "refused by the test");
    report(std::move(a));
  };
  req.on_wait = [&n] {
    n.tries_when_parked.store(n.tries.load());
    n.waits.fetch_add(1);
  };
  return req;
}

Result<Lease> run(const std::shared_ptr<detail::ClientCore>& core, AcquireRequest req) {
  auto done = std::make_shared<std::promise<Result<Lease>>>();
  auto result = done->get_future();
  detail::start_acquire(core, std::move(req), [done](Result<Lease> r) { done->set_value(std::move(r)); }, {});
  return result.get();
}

TEST_F(WaitParkingTest, ATryThatFindsTheLockBusyParksTheCallerOnce) {
  Counters n;
  auto r = run(client->core(), fake_request(*client->core(), "busy", Attempt::Kind::busy, n, 300ms));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), errc::timeout) << r.error().what();
  EXPECT_GE(n.tries.load(), 2);  // the unsubscribed fast try, then the subscribed one
  EXPECT_EQ(n.waits.load(), 1);  // parked once, when the wait began: not per sleep
  EXPECT_EQ(n.tries_when_parked.load(), 2);
}

TEST_F(WaitParkingTest, AnAcquisitionThatEndsWithoutWaitingNeverParks) {
  Counters n;
  auto r = run(client->core(), fake_request(*client->core(), "failing", Attempt::Kind::failed, n, 300ms));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), errc::server) << r.error().what();
  EXPECT_EQ(n.tries.load(), 1);
  EXPECT_EQ(n.waits.load(), 0);
  // A one-try acquire (timeout 0) that finds the lock busy answers at once: no wait either.
  Counters once;
  auto r0 = run(client->core(), fake_request(*client->core(), "busy-once", Attempt::Kind::busy, once, 0ms));
  ASSERT_FALSE(r0.ok());
  EXPECT_EQ(r0.code(), errc::busy) << r0.error().what();
  EXPECT_EQ(once.waits.load(), 0);
}

TEST_F(WaitParkingTest, AWaiterQueuedBehindAnotherOfItsProcessParksBeforeAnyTry) {
  Counters head, second;
  auto core = client->core();
  auto head_done = std::make_shared<std::promise<Result<Lease>>>();
  auto head_result = head_done->get_future();
  detail::start_acquire(core, fake_request(*core, "queue", Attempt::Kind::busy, head, 1500ms),
                        [head_done](Result<Lease> r) { head_done->set_value(std::move(r)); }, {});
  auto r = run(core, fake_request(*core, "queue", Attempt::Kind::busy, second, 300ms));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), errc::timeout) << r.error().what();
  EXPECT_EQ(second.waits.load(), 1);
  EXPECT_EQ(second.tries_when_parked.load(), 0);  // parked as it queued, before any try of its own
  EXPECT_EQ(second.tries.load(), 0);
  auto hr = head_result.get();
  EXPECT_EQ(hr.code(), errc::timeout);
  EXPECT_EQ(head.waits.load(), 1);
}

TEST_F(WaitParkingTest, AFairLockWaiterParksOnceItIsQueued) {
  dlock::Client other(server->url());
  dlock::FairLock holder(other, "fair-parked");
  holder.lock();

  auto core = client->core();
  auto spec = std::make_shared<detail::FairSpec>();
  spec->name = "fair-parked";
  spec->key = core->lock_key(spec->name);
  spec->fence_key = spec->key + ":fence";
  spec->queue_key = spec->key + ":queue";
  spec->timeouts_key = spec->key + ":timeouts";
  spec->grant_key = spec->key + ":grant";
  spec->channel_prefix = spec->key + ":ch:";
  spec->channel = detail::make_fair_channel(core, spec->channel_prefix + detail::fair_channel_of(core->new_owner_token()));
  spec->what = "FairLock 'fair-parked' (test)";
  auto channel = spec->channel;

  std::atomic<int> waits{0};
  auto done = std::make_shared<std::promise<Result<Lease>>>();
  auto result = done->get_future();
  WaitOptions wait;
  wait.timeout = 300ms;
  detail::start_fair_acquire(core, spec, wait, [done](Result<Lease> r) { done->set_value(std::move(r)); }, {},
                             [&waits] { waits.fetch_add(1); });
  auto r = result.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), errc::timeout) << r.error().what();
  EXPECT_EQ(waits.load(), 1);
  // Its place was withdrawn: the holder's release leaves the lock free (nobody is granted it).
  holder.unlock();
  EXPECT_EQ(raw->cmd_int({"EXISTS", spec->key}), 0);
  detail::retire_fair_channel(core, channel);
}

}  // namespace
}  // namespace dlock::test
