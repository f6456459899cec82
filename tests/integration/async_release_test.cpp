// Lease::async_release(): the release without blocking, its outcome handed to a callback, for
// every shape of hold (one key, a ReentrantMutex take, a MultiLock in parts on Cluster, a Redlock
// over several masters); and a release() made on the event loop, which cannot wait for its
// outcome, reporting a loss it finds through on_lost instead of dropping the reply.
//
// Before async_release, a caller that acquired with async_acquire and released from its callback
// got called_from_event_loop and never learnt whether the lock had still been its own.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/redlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/proxied_fixture.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_cluster.hpp"
#include "support/server_fixture.hpp"
#include "support/server_group.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::LossProbe;
using dlock::test::no_wait;
using dlock::test::scaled;
using dlock::test::watchdog;

// What a done callback saw: the outcome, and whether it ran on the event loop.
struct Seen {
  dlock::Result<void> outcome;
  bool on_loop = false;
};

// Calls lease.async_release and waits (bounded) for its callback.
std::optional<Seen> release_async(dlock::Client& client, dlock::Lease& lease,
                                  std::chrono::milliseconds limit = scaled(5000ms)) {
  auto p = std::make_shared<std::promise<Seen>>();
  auto f = p->get_future();
  lease.async_release([p, &client](dlock::Result<void> r) { p->set_value(Seen{std::move(r), client.on_event_loop_thread()}); });
  if (f.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return f.get();
}

std::string describe(const dlock::Result<void>& r) { return r.ok() ? std::string("success") : r.error().what(); }

class AsyncReleaseTest : public dlock::test::ServerFixture {};

TEST_F(AsyncReleaseTest, ReleasesTheKeyAndAnswersOnTheEventLoop) {
  LossProbe probe;
  auto o = watchdog(10s);
  probe.attach(o);
  dlock::Mutex m(*client, "async-ok", o);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_EQ(raw->cmd_int({"EXISTS", m.key()}), 1);

  auto seen = release_async(*client, *lease);
  ASSERT_TRUE(seen) << "done never ran";
  EXPECT_TRUE(seen->outcome.ok()) << describe(seen->outcome);
  EXPECT_TRUE(seen->on_loop) << "done ran off the event loop although Redis had to be asked";
  EXPECT_EQ(raw->cmd_int({"EXISTS", m.key()}), 0);
  EXPECT_FALSE(lease->held());
  EXPECT_FALSE(lease->lost());
  EXPECT_EQ(client->active_leases(), 0u);
  // The handle stays usable: a later release() (and the destructor) report success at once.
  EXPECT_TRUE(lease->release().ok());
  EXPECT_EQ(probe.calls.load(), 0);
  // Released, not merely forgotten: another acquisition gets the lock at once.
  dlock::Mutex again(*client, "async-ok");
  EXPECT_TRUE(again.acquire(no_wait()).ok());
}

// The key was deleted behind the holder's back: the release finds the lock no longer ours and
// tells done (and only done: on_lost is for losses nobody was told of).
TEST_F(AsyncReleaseTest, ALockFoundLostIsReportedToDone) {
  LossProbe probe;
  auto o = watchdog(10s);
  probe.attach(o);
  dlock::Mutex m(*client, "async-lost", o);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_EQ(raw->cmd_int({"DEL", m.key()}), 1);

  auto seen = release_async(*client, *lease);
  ASSERT_TRUE(seen) << "done never ran";
  EXPECT_EQ(seen->outcome.code(), dlock::errc::lock_lost) << describe(seen->outcome);
  EXPECT_TRUE(lease->lost());
  EXPECT_EQ(lease->loss_reason(), dlock::LossReason::taken);
  std::this_thread::sleep_for(100ms);  // an on_lost would run on the loop right after done
  EXPECT_EQ(probe.calls.load(), 0) << "the loss was reported twice";
  EXPECT_EQ(client->active_leases(), 0u);
}

// Outcomes known without asking Redis are given at once, on the calling thread.
TEST_F(AsyncReleaseTest, OutcomesKnownAtOnceAreGivenBeforeItReturns) {
  // `got` is shared so that a done that did run later (the test then fails) writes to live memory.
  auto ran_inline = [](dlock::Lease& lease) {
    auto got = std::make_shared<std::optional<dlock::Result<void>>>();
    lease.async_release([got](dlock::Result<void> r) { *got = std::move(r); });
    return std::optional<dlock::Result<void>>(*got);  // set only if done ran before async_release returned
  };
  dlock::Lease empty;
  auto e = ran_inline(empty);
  ASSERT_TRUE(e) << "an empty Lease's done did not run at once";
  EXPECT_TRUE(e->ok());

  dlock::Mutex m(*client, "async-known");
  auto released = m.acquire(no_wait());
  ASSERT_TRUE(released.ok());
  ASSERT_TRUE(released->release().ok());
  auto r = ran_inline(*released);
  ASSERT_TRUE(r) << "a released Lease's done did not run at once";
  EXPECT_TRUE(r->ok()) << describe(*r);

  // Known lost once the watchdog has marked it (its on_lost ran). lost() alone turns true as
  // soon as the lease's validity ran out, before that mark: a release then still asks Redis,
  // whose key may outlive the validity by the drift margin (CI once saw it ask here).
  LossProbe probe;
  dlock::LeaseOptions fixed;
  fixed.mode = dlock::LeaseMode::fixed_ttl;
  fixed.ttl = 200ms;
  probe.attach(fixed);
  dlock::Mutex short_lived(*client, "async-expired", fixed);
  auto expired = short_lived.acquire(no_wait());
  ASSERT_TRUE(expired.ok());
  ASSERT_TRUE(eventually([&] { return probe.calls.load() == 1; }, scaled(3000ms))) << "the expiry was never reported";
  ASSERT_TRUE(expired->lost());
  auto x = ran_inline(*expired);
  ASSERT_TRUE(x) << "a lost Lease's done did not run at once";
  EXPECT_EQ(x->code(), dlock::errc::lock_lost) << describe(*x);

  // A nullptr callback is allowed: the release still happens.
  auto unwatched = m.acquire(no_wait());
  ASSERT_TRUE(unwatched.ok());
  unwatched->async_release({});
  EXPECT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", m.key()}) == 0; }, scaled(3000ms)));
}

// An all-asynchronous caller: every acquisition and release is issued from the previous one's
// callback, on the event loop, and each release's outcome is known.
TEST_F(AsyncReleaseTest, AcquireAndReleaseChainedOnTheEventLoop) {
  dlock::Mutex m(*client, "async-chain", watchdog(10s));
  constexpr int rounds = 40;
  struct Chain {
    dlock::Mutex* m;
    int left = rounds;
    int released = 0;
    std::string first_error;
    std::promise<void> finished;
    std::function<void()> next;
  };
  auto chain = std::make_shared<Chain>();
  chain->m = &m;
  chain->next = [c = chain.get()] {
    if (c->left-- == 0) return c->finished.set_value();
    c->m->async_acquire(no_wait(), [c](dlock::Result<dlock::Lease> l) {
      if (!l.ok()) {
        if (c->first_error.empty()) c->first_error = "acquire: " + l.error().what();
        return c->finished.set_value();
      }
      auto lease = std::make_shared<dlock::Lease>(std::move(*l));
      lease->async_release([c, lease](dlock::Result<void> r) {
        if (!r.ok()) {
          if (c->first_error.empty()) c->first_error = "release: " + r.error().what();
          return c->finished.set_value();
        }
        ++c->released;
        c->next();
      });
    });
  };
  auto done = chain->finished.get_future();
  chain->next();
  ASSERT_EQ(done.wait_for(scaled(10000ms)), std::future_status::ready) << "the chain stalled";
  EXPECT_EQ(chain->first_error, "");
  EXPECT_EQ(chain->released, rounds);
  EXPECT_EQ(raw->cmd_int({"EXISTS", m.key()}), 0);
  EXPECT_EQ(client->active_leases(), 0u);
  chain->next = nullptr;
}

// release() on the event loop cannot wait for its reply. When that reply finds the lock lost,
// on_lost runs: before, the reply was dropped and the loss reported to nobody.
TEST_F(AsyncReleaseTest, ReleaseOnTheEventLoopReportsALossThroughOnLost) {
  LossProbe probe;
  auto o = watchdog(10s);
  probe.attach(o);
  dlock::Mutex m(*client, "loop-release-lost", o);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_EQ(raw->cmd_int({"DEL", m.key()}), 1);

  std::promise<std::error_code> code;
  client->async_command({"PING"}, [&](dlock::Result<dlock::Reply>) { code.set_value(lease->release().code()); });
  auto f = code.get_future();
  ASSERT_EQ(f.wait_for(scaled(5000ms)), std::future_status::ready);
  EXPECT_EQ(f.get(), dlock::errc::called_from_event_loop);
  ASSERT_TRUE(eventually([&] { return probe.calls.load() > 0; }, scaled(3000ms))) << "the loss was reported to nobody";
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_TRUE(lease->lost());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(probe.calls.load(), 1);
}

// ... and when the lock was still ours, it is released and nobody hears of a loss.
TEST_F(AsyncReleaseTest, ReleaseOnTheEventLoopOfAHeldLockReportsNothing) {
  LossProbe probe;
  auto o = watchdog(10s);
  probe.attach(o);
  dlock::Mutex m(*client, "loop-release-held", o);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  std::promise<void> ran;
  client->async_command({"PING"}, [&](dlock::Result<dlock::Reply>) {
    dlock::Lease moved = std::move(*lease);  // destroyed here, on the loop
    ran.set_value();
  });
  ASSERT_EQ(ran.get_future().wait_for(scaled(5000ms)), std::future_status::ready);
  EXPECT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", m.key()}) == 0; }, scaled(3000ms)));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(probe.calls.load(), 0);
}

// A ReentrantMutex take: releasing the inner take keeps the lock, the outer one frees it.
TEST_F(AsyncReleaseTest, ReentrantTakesAreReleasedOneByOne) {
  dlock::ReentrantMutex::Options o;
  o.lease = watchdog(10s);
  dlock::ReentrantMutex m(*client, "async-reentrant", o);
  auto outer = m.acquire(no_wait());
  ASSERT_TRUE(outer.ok()) << outer.error().what();
  auto inner = m.acquire(no_wait());
  ASSERT_TRUE(inner.ok()) << inner.error().what();

  auto first = release_async(*client, *inner);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->outcome.ok()) << describe(first->outcome);
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("async-reentrant")}), 1) << "the outer take's hold went with the inner one";
  EXPECT_TRUE(outer->held());

  auto last = release_async(*client, *outer);
  ASSERT_TRUE(last);
  EXPECT_TRUE(last->outcome.ok()) << describe(last->outcome);
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("async-reentrant")}), 0);
  // The hold leaves the watchdog (and the count) once its takes' records are gone.
  *outer = dlock::Lease();
  *inner = dlock::Lease();
  EXPECT_TRUE(eventually([&] { return client->active_leases() == 0u; }, scaled(2000ms))) << client->active_leases();
}

// The other single-key kinds, on the same path: a FairLock's release hands the lock to its
// waiter, a reader's leaves the way open to a writer, a semaphore's returns its permits.
TEST_F(AsyncReleaseTest, FairLockSharedMutexAndSemaphoreLeases) {
  dlock::FairLock fair(*client, "async-fair", watchdog(10s));
  auto held = fair.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client other(server->url());
  dlock::FairLock fair_elsewhere(other, "async-fair", watchdog(10s));
  auto waiter = std::async(std::launch::async, [&] { return fair_elsewhere.acquire(dlock::WaitOptions{scaled(5000ms)}); });
  std::this_thread::sleep_for(100ms);  // the waiter queues meanwhile (if not, it finds the lock free)
  auto f = release_async(*client, *held);
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->outcome.ok()) << describe(f->outcome);
  ASSERT_EQ(waiter.wait_for(scaled(5000ms)), std::future_status::ready);
  auto w = waiter.get();
  EXPECT_TRUE(w.ok()) << w.error().what();

  dlock::SharedMutex rw(*client, "async-rw", watchdog(10s));
  auto r1 = rw.acquire_shared(no_wait());
  auto r2 = rw.acquire_shared(no_wait());
  ASSERT_TRUE(r1.ok() && r2.ok());
  auto s1 = release_async(*client, *r1);
  ASSERT_TRUE(s1);
  EXPECT_TRUE(s1->outcome.ok()) << describe(s1->outcome);
  EXPECT_FALSE(rw.acquire(no_wait()).ok()) << "a writer got in while a reader still held the lock";
  auto s2 = release_async(*client, *r2);
  ASSERT_TRUE(s2);
  EXPECT_TRUE(s2->outcome.ok()) << describe(s2->outcome);
  EXPECT_TRUE(rw.acquire(no_wait()).ok()) << "the readers' releases left the lock taken";

  dlock::Semaphore sem(*client, "async-sem", 3, watchdog(10s));
  auto two = sem.acquire(2, no_wait());
  ASSERT_TRUE(two.ok()) << two.error().what();
  ASSERT_EQ(sem.available().value(), 1u);
  auto s = release_async(*client, *two);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->outcome.ok()) << describe(s->outcome);
  EXPECT_EQ(sem.available().value(), 3u);
}

// The Client that took the lease shut down: its shutdown released the lease, and async_release
// reports that at once.
TEST_F(AsyncReleaseTest, AfterTheClientShutDownItReportsWhatTheShutdownDid) {
  std::optional<dlock::Client> owner(std::in_place, server->url());
  std::optional<dlock::Mutex> m(std::in_place, *owner, "async-shutdown", watchdog(10s));
  auto lease = m->acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  m.reset();
  owner.reset();  // releases the lease
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("async-shutdown")}), 0);
  std::optional<dlock::Result<void>> got;
  lease->async_release([&](dlock::Result<void> r) { got = std::move(r); });
  ASSERT_TRUE(got) << "done did not run at once on a shut-down Client";
  EXPECT_TRUE(got->ok()) << describe(*got);
}

// A release whose reply was lost with the connection: sent again once the connection is back,
// and done gets the answer of that retry, not the connection error.
class AsyncReleaseRetryTest : public dlock::test::ProxiedServerFixture {};

TEST_F(AsyncReleaseRetryTest, AReleaseWhoseReplyIsLostIsSentAgainAndItsAnswerGiven) {
  LossProbe probe;
  auto o = watchdog(10s);
  probe.attach(o);
  dlock::Mutex m(*via_proxy, "async-blip", o);
  {
    auto warm = m.acquire(no_wait());  // the scripts are loaded: no NOSCRIPT answer to hold
    ASSERT_TRUE(warm.ok()) << warm.error().what();
  }
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  proxy->hold_replies();
  auto p = std::make_shared<std::promise<dlock::Result<void>>>();
  lease->async_release([p](dlock::Result<void> r) { p->set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", m.key()}) == 0; }, scaled(3000ms))) << "never ran";
  auto f = p->get_future();
  EXPECT_EQ(f.wait_for(100ms), std::future_status::timeout) << "done ran although the answer was held";
  proxy->drop();
  proxy->pass();
  ASSERT_EQ(f.wait_for(scaled(10000ms)), std::future_status::ready) << "done never ran";
  auto r = f.get();
  EXPECT_TRUE(r.ok()) << "a release that ran was reported as: " << describe(r);
  EXPECT_EQ(probe.calls.load(), 0);
  EXPECT_EQ(via_proxy->active_leases(), 0u);
}

// The Client is destroyed while a release's answer is held: done still runs, before ~Client
// returns, with an error (its outcome is unknown), never left uncalled.
TEST_F(AsyncReleaseRetryTest, DoneRunsWhenTheClientShutsDownWithTheReleaseInFlight) {
  std::optional<dlock::Mutex> m(std::in_place, *via_proxy, "async-in-flight", watchdog(10s));
  {
    auto warm = m->acquire(no_wait());
    ASSERT_TRUE(warm.ok()) << warm.error().what();
  }
  auto lease = m->acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  proxy->hold_replies();
  auto p = std::make_shared<std::promise<dlock::Result<void>>>();
  lease->async_release([p](dlock::Result<void> r) { p->set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", key_of("async-in-flight")}) == 0; }, scaled(3000ms)));
  m.reset();
  via_proxy.reset();
  auto f = p->get_future();
  ASSERT_EQ(f.wait_for(0ms), std::future_status::ready) << "~Client returned and done had not run";
  auto r = f.get();
  ASSERT_FALSE(r.ok()) << "an unanswered release was reported as a success";
  EXPECT_TRUE(r.code() == dlock::errc::shutdown || r.code() == dlock::errc::connection) << describe(r);
}

// A Redlock lease: released on every node; done once a majority answered.
TEST(AsyncReleaseRedlockTest, ReleasedOnEveryNode) {
  dlock::test::ServerGroup group(3);
  auto clients = group.clients();
  dlock::Redlock lock(dlock::test::pointers(clients), "async-redlock", watchdog(10s));
  auto lease = lock.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  for (std::size_t i = 0; i < group.size(); ++i) {
    ASSERT_EQ(group.raw(i).cmd_int({"EXISTS", key_of("async-redlock")}), 1) << "node " << i;
  }
  auto seen = release_async(*clients[0], *lease);
  ASSERT_TRUE(seen) << "done never ran";
  EXPECT_TRUE(seen->outcome.ok()) << describe(seen->outcome);
  for (std::size_t i = 0; i < group.size(); ++i) {
    EXPECT_TRUE(eventually([&] { return group.raw(i).cmd_int({"EXISTS", key_of("async-redlock")}) == 0; },
                           scaled(3000ms)))
        << "node " << i << " kept the key";
  }

  auto again = lock.acquire(no_wait());
  ASSERT_TRUE(again.ok()) << again.error().what();
  for (std::size_t i = 0; i < group.size(); ++i) group.raw(i).cmd({"DEL", key_of("async-redlock")});
  auto lost = release_async(*clients[0], *again);
  ASSERT_TRUE(lost) << "done never ran";
  EXPECT_EQ(lost->outcome.code(), dlock::errc::lock_lost) << describe(lost->outcome);
}

// A MultiLock over several Cluster slots is held in parts, one per slot: each part is released,
// and a part found lost makes the whole release lock_lost while the other parts still go.
TEST(AsyncReleaseClusterTest, AMultiLockInPartsReleasesEveryPart) {
  dlock::test::RedisCluster cluster(3, 0);
  dlock::Client client(cluster.url());
  ASSERT_TRUE(client.ping().ok());
  const std::vector<std::string> names{"async-ml-a", "async-ml-b", "async-ml-c", "async-ml-d"};
  dlock::MultiLock all(client, names, watchdog(10s));
  auto exists = [&](const std::string& name) {
    auto r = client.command({"EXISTS", key_of(name)});
    return r.ok() && r->is_integer() ? r->integer() : -1;
  };

  auto lease = all.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  for (const auto& n : names) ASSERT_EQ(exists(n), 1) << n;
  auto seen = release_async(client, *lease);
  ASSERT_TRUE(seen) << "done never ran";
  EXPECT_TRUE(seen->outcome.ok()) << describe(seen->outcome);
  for (const auto& n : names) EXPECT_EQ(exists(n), 0) << n;
  EXPECT_EQ(client.active_leases(), 0u);

  auto again = all.acquire(no_wait());
  ASSERT_TRUE(again.ok()) << again.error().what();
  ASSERT_TRUE(client.command({"DEL", key_of(names[1])}).ok());
  auto lost = release_async(client, *again);
  ASSERT_TRUE(lost) << "done never ran";
  EXPECT_EQ(lost->outcome.code(), dlock::errc::lock_lost) << describe(lost->outcome);
  for (const auto& n : names) EXPECT_EQ(exists(n), 0) << n << " was left to its TTL";
  EXPECT_EQ(client.active_leases(), 0u);
}

}  // namespace
