// Integration tests of dlock::ReentrantMutex against real redis-server processes.
//
// Every test starts its own server (support/server_fixture.hpp) and checks what dlock really
// wrote through a plain hiredis connection (support/raw_connection.hpp).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/reentrant_mutex.hpp"
#include "scripts/script.hpp"
#include "support/fairness_rounds.hpp"
#include "support/lock_helpers.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace dlock::detail::scripts {
extern const Script reentrant_release;
}

namespace {

using dlock::test::LossProbe;
using dlock::test::command_calls;
using dlock::test::key_of;
using dlock::test::script_calls;
using dlock::test::no_wait;

using namespace std::chrono_literals;
using dlock::ReentrantMutex;
using dlock::test::ChildProcess;
using dlock::test::eventually;
using dlock::test::ms_since;
using dlock::test::scaled;
using dlock::test::RawConnection;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

long long to_count(const std::string& s) { return s == "(nil)" ? 0 : std::stoll(s); }

ReentrantMutex::Options with_lease(dlock::LeaseMode mode, milliseconds ttl) {
  ReentrantMutex::Options o;
  o.lease.mode = mode;
  o.lease.ttl = ttl;
  return o;
}

ReentrantMutex::Options with_owner(std::string owner) {
  ReentrantMutex::Options o;
  o.owner = std::move(owner);
  return o;
}

// Runs `fn` on another thread (so it is another owner) and returns its result.
template <class Fn>
auto on_other_thread(Fn fn) {
  return std::async(std::launch::async, std::move(fn)).get();
}

class ReentrantMutexTest : public dlock::test::ServerFixture {
 protected:
  std::string hget(const std::string& key, const std::string& field) { return raw->cmd({"HGET", key, field}); }
  long long exists(const std::string& key) { return raw->cmd_int({"EXISTS", key}); }
};

// ------------------------------------------------------------------------------ reentrancy

// Taken 3 times: held (by us, excluding others) until the third release.
TEST_F(ReentrantMutexTest, IsFreeOnlyAfterAsManyReleasesAsTakes) {
  ReentrantMutex m(*client, "count");
  dlock::Client other_client(server->url());
  ReentrantMutex other(other_client, "count");

  m.lock();
  ASSERT_TRUE(m.try_lock());
  ASSERT_TRUE(m.try_lock_for(100ms));
  EXPECT_EQ(m.hold_count(), 3u);
  EXPECT_TRUE(m.owns_lock());
  EXPECT_EQ(raw->cmd({"TYPE", m.key()}), "hash");
  EXPECT_EQ(hget(m.key(), m.owner()), "3");
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 0);

  for (int left = 2; left >= 1; --left) {
    m.unlock();
    EXPECT_TRUE(m.last_error().code == std::error_code{}) << m.last_error().what();
    EXPECT_EQ(hget(m.key(), m.owner()), std::to_string(left));
    EXPECT_TRUE(m.owns_lock());
    EXPECT_EQ(m.hold_count(), static_cast<std::size_t>(left));
    EXPECT_FALSE(other.try_lock()) << "another Client took it while " << left << " takes were left";
    EXPECT_FALSE(on_other_thread([&] { return m.try_lock(); })) << "another thread is another owner";
    auto r = other.acquire(no_wait());
    EXPECT_EQ(r.code(), make_error_code(dlock::errc::busy)) << r.error().what();
  }
  m.unlock();
  EXPECT_FALSE(m.owns_lock());
  EXPECT_EQ(exists(m.key()), 0) << "the last release must delete the hash";
  ASSERT_TRUE(other.try_lock());
  other.unlock();
  EXPECT_EQ(exists(m.key()), 0);
}

// Leases of one hold share the outer token and may be given back in any order.
TEST_F(ReentrantMutexTest, LeasesOfOneHoldShareTheTokenAndReleaseInAnyOrder) {
  ReentrantMutex m(*client, "leases");
  ReentrantMutex other(*client, "leases");
  auto outer = m.acquire();
  ASSERT_TRUE(outer.ok()) << outer.error().what();
  const auto t0 = SteadyClock::now();
  auto inner = m.acquire(dlock::WaitOptions{5000ms, 500ms});
  ASSERT_TRUE(inner.ok()) << inner.error().what();
  EXPECT_LT(ms_since(t0), 500ms) << "a re-take must not wait";
  EXPECT_EQ(inner->token(), outer->token());
  EXPECT_TRUE(outer->token());
  EXPECT_EQ(inner->owner(), outer->owner());
  EXPECT_EQ(hget(m.key(), outer->owner()), "2");
  EXPECT_EQ(hget(m.key(), ":fence"), std::to_string(outer->token().value));
  // extend() on one take extends the whole hold, and every take of it follows.
  auto ext = inner->extend(60000ms);
  ASSERT_TRUE(ext.ok()) << ext.error().what();
  EXPECT_TRUE(inner->held());
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 30000);
  EXPECT_GT(outer->remaining(), 30000ms) << "the outer take does not follow its hold's extension";
  EXPECT_GT(inner->remaining(), 30000ms);

  // The outer Lease first: the inner one still holds the lock.
  ASSERT_TRUE(outer->release().ok());
  EXPECT_FALSE(outer->held());
  EXPECT_TRUE(inner->held());
  EXPECT_EQ(hget(m.key(), inner->owner()), "1");
  EXPECT_FALSE(on_other_thread([&] { return other.try_lock(); }));
  ASSERT_TRUE(inner->release().ok());
  EXPECT_EQ(exists(m.key()), 0);
  EXPECT_TRUE(on_other_thread([&] {
    const bool got = other.try_lock();
    if (got) other.unlock();
    return got;
  }));
}

// A retried release of one take (its first reply lost) must not give back a second take.
TEST_F(ReentrantMutexTest, RetriedReleaseOfOneTakeDecrementsOnce) {
  ReentrantMutex m(*client, "retry");
  auto a = m.acquire();
  auto b = m.acquire();
  auto c = m.acquire();
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const std::string token = std::to_string(a->token().value);
  const std::string latch = m.key() + ":rel:test-take";
  const auto& script = dlock::detail::scripts::reentrant_release;
  auto release = [&] {
    return raw->cmd({"EVAL", script.source, "2", m.key(), latch, a->owner(), m.key() + ":ch", "released", token,
                     "30000"});
  };
  EXPECT_EQ(release(), "1");
  EXPECT_EQ(hget(m.key(), a->owner()), "2");
  EXPECT_EQ(release(), "2") << "the retry was not recognised";
  EXPECT_EQ(hget(m.key(), a->owner()), "2") << "the retry gave back another take";
  EXPECT_GT(raw->cmd_int({"PTTL", latch}), 0);
}

// async_acquire: the owner is the calling thread, so a re-take completes without waiting.
TEST_F(ReentrantMutexTest, AsyncAcquireReTakesForTheCallingThread) {
  ReentrantMutex m(*client, "async");
  m.lock();
  std::promise<dlock::Result<dlock::Lease>> retake;
  m.async_acquire(dlock::WaitOptions{5000ms, 500ms}, [&](dlock::Result<dlock::Lease> r) { retake.set_value(std::move(r)); });
  auto f = retake.get_future();
  ASSERT_EQ(f.wait_for(1s), std::future_status::ready) << "the async re-take waited";
  auto lease = f.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_EQ(lease->token(), m.fencing_token());
  EXPECT_EQ(hget(m.key(), m.owner()), "2");

  std::promise<dlock::Result<dlock::Lease>> other;
  m.async_acquire(ReentrantMutex::Owner{"someone-else"}, dlock::WaitOptions{200ms, 100ms},
                  [&](dlock::Result<dlock::Lease> r) { other.set_value(std::move(r)); });
  auto o = other.get_future().get();
  EXPECT_EQ(o.code(), make_error_code(dlock::errc::timeout)) << o.error().what();
  ASSERT_TRUE(lease->release().ok());
  m.unlock();
  EXPECT_EQ(exists(m.key()), 0);
}

// ------------------------------------------------------------------------------ exclusion

// Six threads share one ReentrantMutex (each thread its own owner), each taking it twice per
// round, and do a non-atomic GET/SET increment.
TEST_F(ReentrantMutexTest, ThreadsLoseNoUpdate) {
  constexpr int kThreads = 6;
  constexpr int kIters = 20;
  ReentrantMutex m(*client, "counter");
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      try {
        RawConnection conn(*server);
        for (int i = 0; i < kIters; ++i) {
          std::lock_guard<ReentrantMutex> outer(m);
          std::lock_guard<ReentrantMutex> inner(m);
          const int now = inside.fetch_add(1) + 1;
          int seen = max_inside.load();
          while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
          }
          const long long v = to_count(conn.cmd({"GET", "counter"}));
          std::this_thread::yield();
          conn.cmd({"SET", "counter", std::to_string(v + 1)});
          inside.fetch_sub(1);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker thread: " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_EQ(to_count(raw->cmd({"GET", "counter"})), kThreads * kIters);
  EXPECT_EQ(exists(m.key()), 0);
}

// Three OS processes, each with its own Client made after fork(), nesting two takes.
TEST_F(ReentrantMutexTest, ProcessesLoseNoUpdate) {
  constexpr int kChildren = 3;
  constexpr int kIters = 25;
  const std::string url = server->url();
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int i = 0; i < kChildren; ++i) {
    children.push_back(std::make_unique<ChildProcess>([url]() -> int {
      dlock::Client c(url);
      if (!c.ping().ok()) return 2;
      ReentrantMutex m(c, "proc-counter");
      for (int k = 0; k < kIters; ++k) {
        std::lock_guard<ReentrantMutex> outer(m);
        auto inner = m.acquire();
        if (!inner.ok() || inner->token() != m.fencing_token()) return 7;
        auto in = c.command({"INCR", "inside"});
        if (!in.ok() || in->integer() != 1) return 3;
        auto got = c.command({"GET", "proc-counter"});
        if (!got.ok()) return 4;
        const long long v = got->is_nil() ? 0 : std::stoll(got->str());
        if (!c.command({"SET", "proc-counter", std::to_string(v + 1)}).ok()) return 5;
        auto out = c.command({"DECR", "inside"});
        if (!out.ok() || out->integer() != 0) return 6;
        if (!inner->release().ok()) return 8;
      }
      return 0;
    }));
  }
  for (auto& ch : children) {
    auto code = ch->wait_for(45s);
    ASSERT_TRUE(code.has_value()) << "child " << ch->pid() << " did not finish";
    EXPECT_EQ(*code, 0) << "child " << ch->pid() << " reported a problem";
  }
  EXPECT_EQ(to_count(raw->cmd({"GET", "proc-counter"})), kChildren * kIters);
  EXPECT_EQ(exists(key_of("proc-counter")), 0);
}

// A re-take must not queue behind this process's own waiters: it would wait for itself.
TEST_F(ReentrantMutexTest, ReTakeDoesNotWaitBehindLocalWaiters) {
  ReentrantMutex m(*client, "local-queue");
  m.lock();
  std::atomic<bool> waiter_got{false};
  std::thread waiter([&] {
    m.lock();  // another thread: another owner, queued in this process
    waiter_got.store(true);
    m.unlock();
  });
  std::this_thread::sleep_for(200ms);  // the waiter is queued and subscribed
  const auto t0 = SteadyClock::now();
  EXPECT_TRUE(m.try_lock_for(3s)) << "the re-take waited behind a local waiter";
  EXPECT_LT(ms_since(t0), 1000ms);
  EXPECT_EQ(m.hold_count(), 2u);
  EXPECT_FALSE(waiter_got.load());
  m.unlock();
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(waiter_got.load()) << "one release of two freed the lock";
  m.unlock();
  waiter.join();
  EXPECT_TRUE(waiter_got.load());
}

// ------------------------------------------------------------------------- explicit owners

TEST_F(ReentrantMutexTest, ExplicitOwnerIsReleasedFromAnotherThread) {
  ReentrantMutex job(*client, "job", with_owner("job-42"));
  ReentrantMutex by_thread(*client, "job");
  on_other_thread([&] { job.lock(); });
  // Same owner on another thread: a re-take, not a wait.
  EXPECT_TRUE(on_other_thread([&] { return job.try_lock(); }));
  EXPECT_EQ(job.hold_count(), 2u);
  EXPECT_EQ(hget(job.key(), job.owner()), "2");
  EXPECT_NE(job.owner().find("job-42"), std::string::npos);
  EXPECT_FALSE(by_thread.try_lock()) << "a thread owner took a lock held by an explicit owner";
  on_other_thread([&] { job.unlock(); });
  EXPECT_EQ(hget(job.key(), job.owner()), "1");
  job.unlock();
  EXPECT_EQ(exists(job.key()), 0);
  EXPECT_TRUE(job.last_error().code == std::error_code{}) << job.last_error().what();

  // The Lease API: a coroutine-like owner moves between threads with its Leases.
  const ReentrantMutex::Owner coro{"coro-7"};
  auto first = on_other_thread([&] { return job.acquire(coro); });
  ASSERT_TRUE(first.ok()) << first.error().what();
  auto again = on_other_thread([&] { return job.acquire(coro, no_wait()); });
  ASSERT_TRUE(again.ok()) << again.error().what();
  EXPECT_EQ(again->token(), first->token());
  EXPECT_EQ(hget(job.key(), job.owner(coro)), "2");
  EXPECT_TRUE(on_other_thread([&] { return first->release().ok() && again->release().ok(); }));
  EXPECT_EQ(exists(job.key()), 0);
}

TEST_F(ReentrantMutexTest, InvalidOwnersAndNamesAreRejected) {
  auto expect_invalid = [&](const std::string& name, const std::string& owner, const char* what) {
    try {
      ReentrantMutex m(*client, name, with_owner(owner));
      ADD_FAILURE() << "accepted " << what;
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), make_error_code(dlock::errc::invalid_argument)) << what << ": " << e.what();
    }
  };
  expect_invalid("a{b}", "", "a name with a hash tag");
  expect_invalid("", "", "an empty name");
  expect_invalid("ok", "1234", "an owner of digits only (a thread's)");
  expect_invalid("ok", ":fence", "an owner that could be the token field");
  expect_invalid("ok", "a\nb", "an owner with a newline");
  expect_invalid("ok", std::string(257, 'o'), "a 257-byte owner");
  ReentrantMutex m(*client, "ok");
  auto r = m.acquire(ReentrantMutex::Owner{"42"});
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::invalid_argument)) << r.error().what();
}

// ---------------------------------------------------------------------------------- fencing

TEST_F(ReentrantMutexTest, FencingTokensIncreaseAcrossHoldersAndKinds) {
  ReentrantMutex a(*client, "fenced");
  dlock::Client other_client(server->url());
  ReentrantMutex b(other_client, "fenced");
  dlock::Mutex plain(other_client, "fenced");

  auto a1 = a.acquire();
  ASSERT_TRUE(a1.ok()) << a1.error().what();
  a.lock();  // a re-take through the standard members
  EXPECT_EQ(a.fencing_token(), a1->token()) << "a re-take must return the outer hold's token";
  a.unlock();
  ASSERT_TRUE(a1->release().ok());

  auto b1 = b.acquire(no_wait());
  ASSERT_TRUE(b1.ok()) << b1.error().what();
  EXPECT_GT(b1->token(), a1->token());
  auto b2 = b.acquire(no_wait());
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2->token(), b1->token());
  ASSERT_TRUE(b1->release().ok());
  ASSERT_TRUE(b2->release().ok());

  // Mutex and ReentrantMutex share the name's counter: tokens rise across kinds.
  auto p = plain.acquire(no_wait());
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_GT(p->token(), b1->token());
  ASSERT_TRUE(p->release().ok());

  a.lock();
  EXPECT_GT(a.fencing_token(), p->token());
  a.unlock();
}

// ------------------------------------------------------------------------ renewal and loss

// The watchdog keeps a hold of three takes alive past 3x its TTL, renewing it once per
// interval, not once per take.
TEST_F(ReentrantMutexTest, RenewalKeepsAReTakenHoldAliveOncePerInterval) {
  LossProbe probe;
  auto opts = with_lease(dlock::LeaseMode::watchdog, 300ms);  // renewed every 100 ms
  probe.attach(opts.lease);
  ReentrantMutex m(*client, "renewed", opts);
  auto outer = m.acquire();
  ASSERT_TRUE(outer.ok()) << outer.error().what();
  auto inner = m.acquire();
  ASSERT_TRUE(inner.ok()) << inner.error().what();
  m.lock();
  ASSERT_EQ(hget(m.key(), outer->owner()), "3");

  ASSERT_EQ(raw->cmd({"CONFIG", "RESETSTAT"}), "OK");
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < 1000ms) {
    const long long pttl = raw->cmd_int({"PTTL", m.key()});
    ASSERT_GT(pttl, 0) << "after " << ms_since(t0).count() << " ms";
    ASSERT_LE(pttl, 300);
    std::this_thread::sleep_for(20ms);
  }
  const long long calls = script_calls(*raw);
  // ~10 renewals in 1 s at one per 100 ms; one per take would be ~30.
  EXPECT_GE(calls, 5);
  EXPECT_LE(calls, 15) << "the hold was renewed more than once per interval";
  EXPECT_TRUE(outer->held());
  EXPECT_TRUE(inner->held());
  EXPECT_TRUE(m.owns_lock());
  EXPECT_GT(m.remaining(), 0ms);
  EXPECT_EQ(hget(m.key(), outer->owner()), "3");

  // With the outer Lease and the std take given back, the inner Lease alone keeps it renewed.
  ASSERT_TRUE(outer->release().ok());
  m.unlock();
  std::this_thread::sleep_for(700ms);
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 0);
  EXPECT_EQ(hget(m.key(), inner->owner()), "1");
  EXPECT_TRUE(inner->held());
  ASSERT_TRUE(inner->release().ok());
  EXPECT_EQ(exists(m.key()), 0);
  std::this_thread::sleep_for(250ms);  // would a renewal re-create it?
  EXPECT_EQ(exists(m.key()), 0);
  EXPECT_EQ(probe.calls.load(), 0);
}

// The hold ends when its last take's release is claimed: the watchdog sends no renewal behind
// that release (at most one already under way crosses it, and finds the key gone), and no take
// is told it lost the lock. CLIENT PAUSE WRITE holds the release back for longer than a renew
// interval (TTL 300 ms: renewed every 100 ms, paused 150 ms). Seen in ASan CI before the hold
// ended there: a renewal sent behind the release made on_lost run for a take whose release()
// had succeeded.
TEST_F(ReentrantMutexTest, NoRenewalGoesOutBehindTheLastRelease) {
  LossProbe probe;
  auto opts = with_lease(dlock::LeaseMode::watchdog, 300ms);
  probe.attach(opts.lease);
  // The caller sleeps while the Client's thread reads the replies (with the defaults the caller
  // runs the loop itself and mostly finishes first). Hence the rounds.
  dlock::ClientOptions co;
  co.callers_run_loop = false;
  co.busy_poll = std::chrono::microseconds(0);
  dlock::Client sleepy(server->url(), co);
  ReentrantMutex m(sleepy, "renewal-behind-release", opts);
  for (int round = 0; round < 15; ++round) {
    auto outer = m.acquire();
    ASSERT_TRUE(outer.ok()) << outer.error().what();
    auto inner = m.acquire();
    ASSERT_TRUE(inner.ok()) << inner.error().what();
    ASSERT_TRUE(outer->release().ok());

    const long long scripts_before = script_calls(*raw);
    ASSERT_EQ(raw->cmd({"CLIENT", "PAUSE", "150", "WRITE"}), "OK");
    auto released = inner->release();
    ASSERT_TRUE(released.ok()) << "round " << round << ": " << released.error().what();
    ASSERT_EQ(exists(m.key()), 0);
    std::this_thread::sleep_for(250ms);  // two and a half renew intervals after the pause
    // The release, and at most one renewal sent before it was claimed.
    EXPECT_LE(script_calls(*raw) - scripts_before, 2) << "round " << round << ": renewals went on after the last release";
    ASSERT_FALSE(inner->lost()) << "round " << round << ": a released take reads as lost";
    ASSERT_EQ(probe.calls.load(), 0) << "round " << round << ": a released take was told it lost the lock";
  }
}

// A release that fails (here: the ACL no longer lets the user run SET, which the release script
// needs for its latch and the renewal does not) says the key expires at its TTL: so the watchdog must
// stop renewing the hold, although the Lease object lives on. It went on renewing for as long
// as the Lease lived: the lock stayed held, by nobody.
TEST_F(ReentrantMutexTest, AFailedLastReleaseStopsTheRenewals) {
  ASSERT_EQ(raw->cmd({"ACL", "SETUSER", "holder", "on", ">pw", "~*", "&*", "+@all"}), "OK");
  dlock::Client as_holder("redis://holder:pw@127.0.0.1:" + std::to_string(server->port()));
  ReentrantMutex m(as_holder, "release-refused", with_lease(dlock::LeaseMode::watchdog, 300ms));
  auto outer = m.acquire();
  ASSERT_TRUE(outer.ok()) << outer.error().what();
  auto inner = m.acquire();
  ASSERT_TRUE(inner.ok()) << inner.error().what();
  ASSERT_TRUE(inner->release().ok());

  ASSERT_EQ(raw->cmd({"ACL", "SETUSER", "holder", "-set"}), "OK");
  auto refused = outer->release();
  ASSERT_FALSE(refused.ok()) << "the release ran without SET";
  // The Lease is still in scope; the key must expire at its TTL (300 ms), not be renewed.
  EXPECT_TRUE(eventually([&] { return exists(m.key()) == 0; }, scaled(2000ms)))
      << "still held " << raw->cmd_int({"PTTL", m.key()}) << " ms after a failed release: " << refused.error().what();
  EXPECT_EQ(as_holder.active_leases(), 0u) << "the hold is still on the watchdog";
}

// A fixed-TTL hold ends at its TTL whatever its count; every take is told, and a re-take did
// not extend it.
TEST_F(ReentrantMutexTest, FixedTtlHoldExpiresWithAllItsTakes) {
  LossProbe probe;
  auto opts = with_lease(dlock::LeaseMode::fixed_ttl, 400ms);
  probe.attach(opts.lease);
  ReentrantMutex m(*client, "fixed", opts);
  dlock::Client other_client(server->url());
  ReentrantMutex other(other_client, "fixed");
  const auto t0 = SteadyClock::now();
  auto outer = m.acquire();
  ASSERT_TRUE(outer.ok()) << outer.error().what();
  std::this_thread::sleep_for(200ms);
  auto inner = m.acquire();
  ASSERT_TRUE(inner.ok()) << inner.error().what();
  EXPECT_LE(raw->cmd_int({"PTTL", m.key()}), 200) << "a re-take extended the hold";
  ASSERT_TRUE(eventually([&] { return probe.calls.load() >= 2; }, 2000ms)) << probe.calls.load();
  EXPECT_GE(ms_since(t0), 380ms);
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::expired));
  EXPECT_TRUE(outer->lost());
  EXPECT_TRUE(inner->lost());
  ASSERT_TRUE(eventually([&] { return exists(m.key()) == 0; }, 500ms));
  EXPECT_TRUE(other.try_lock());
  other.unlock();
}

// The hash is deleted behind the holder's back: every Lease of the hold is told.
TEST_F(ReentrantMutexTest, LossIsReportedToEveryLeaseOfTheHold) {
  LossProbe first_probe;
  LossProbe second_probe;
  auto first_opts = with_owner("worker");
  first_opts.lease.ttl = 600ms;  // renewed every 200 ms
  first_probe.attach(first_opts.lease);
  auto second_opts = first_opts;
  second_probe.attach(second_opts.lease);
  ReentrantMutex first(*client, "lossy", first_opts);
  ReentrantMutex second(*client, "lossy", second_opts);  // same owner: joins the hold

  auto outer = first.acquire();
  ASSERT_TRUE(outer.ok()) << outer.error().what();
  auto inner = second.acquire(no_wait());
  ASSERT_TRUE(inner.ok()) << inner.error().what();
  first.lock();
  ASSERT_EQ(hget(first.key(), outer->owner()), "3");

  ASSERT_EQ(raw->cmd_int({"DEL", first.key()}), 1);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(eventually([&] { return first_probe.calls.load() >= 2 && second_probe.calls.load() >= 1; }, 2000ms))
      << "first: " << first_probe.calls.load() << ", second: " << second_probe.calls.load();
  EXPECT_LT(ms_since(t0), 1000ms);
  EXPECT_EQ(first_probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_EQ(second_probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_TRUE(outer->lost());
  EXPECT_TRUE(inner->lost());
  EXPECT_TRUE(first.lost());
  EXPECT_FALSE(first.owns_lock());
  EXPECT_EQ(client->active_leases(), 0u);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(first_probe.calls.load(), 2) << "on_lost ran more than once per Lease";
  EXPECT_EQ(second_probe.calls.load(), 1);
  EXPECT_EQ(exists(first.key()), 0) << "a renewal re-created the lost hold";
  EXPECT_EQ(outer->release().code(), make_error_code(dlock::errc::lock_lost));
  first.unlock();
  EXPECT_EQ(first.last_error().code, make_error_code(dlock::errc::lock_lost)) << first.last_error().what();
}

// A new hold by the same owner (after the old one vanished) does not revive the old Leases.
TEST_F(ReentrantMutexTest, NewHoldAfterLossDoesNotReviveOldLeases) {
  ReentrantMutex m(*client, "revive");
  auto old_lease = m.acquire();
  ASSERT_TRUE(old_lease.ok());
  ASSERT_EQ(raw->cmd_int({"DEL", m.key()}), 1);
  auto fresh = m.acquire(no_wait());  // same owner; the old hold's renewal has not run yet
  ASSERT_TRUE(fresh.ok()) << fresh.error().what();
  EXPECT_GT(fresh->token(), old_lease->token());
  EXPECT_TRUE(old_lease->lost()) << "the old hold's Lease still claims the lock";
  EXPECT_TRUE(fresh->held());
  EXPECT_EQ(hget(m.key(), fresh->owner()), "1");
  EXPECT_EQ(old_lease->release().code(), make_error_code(dlock::errc::lock_lost));
  EXPECT_EQ(hget(m.key(), fresh->owner()), "1") << "the old Lease's release gave back a take of the new hold";
  ASSERT_TRUE(fresh->release().ok());
  EXPECT_EQ(exists(m.key()), 0);
}

// ------------------------------------------------------------------------------ wrong type

TEST_F(ReentrantMutexTest, WrongTypeBothWays) {
  // A Mutex's string under the key: not a ReentrantMutex.
  dlock::Mutex plain(*client, "typed");
  auto held = plain.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  ReentrantMutex m(*client, "typed");
  auto r = m.acquire(no_wait());
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::wrong_type)) << r.error().what();
  auto r2 = m.acquire(dlock::WaitOptions{1000ms, 100ms});
  EXPECT_EQ(r2.code(), make_error_code(dlock::errc::wrong_type)) << r2.error().what();
  try {
    m.lock();
    ADD_FAILURE() << "lock() did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), make_error_code(dlock::errc::wrong_type)) << e.what();
  }
  ASSERT_TRUE(held->release().ok());

  // A ReentrantMutex's hash under the key: not a Mutex.
  ASSERT_TRUE(m.try_lock());
  auto p = plain.acquire(no_wait());
  EXPECT_EQ(p.code(), make_error_code(dlock::errc::wrong_type)) << p.error().what();
  EXPECT_EQ(raw->cmd({"TYPE", m.key()}), "hash");
  m.unlock();
  auto p2 = plain.acquire(no_wait());
  EXPECT_TRUE(p2.ok()) << p2.error().what();
}

// A SharedMutex's hash (field kind) under the name is refused at once, not waited on as
// another owner's hold.
TEST_F(ReentrantMutexTest, AnotherKindsHashIsRefusedNotWaitedOn) {
  dlock::SharedMutex shared(*client, "hash-kinds");
  auto reading = shared.acquire_shared(no_wait());
  ASSERT_TRUE(reading.ok()) << reading.error().what();
  ReentrantMutex m(*client, "hash-kinds");
  const auto started = SteadyClock::now();
  auto r = m.acquire(dlock::WaitOptions{3000ms, 100ms});
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::wrong_type)) << (r.ok() ? "acquired" : r.error().what());
  EXPECT_LT(SteadyClock::now() - started, 2000ms) << "it waited";
  ASSERT_TRUE(reading->release().ok());
  auto free = m.acquire(no_wait());
  EXPECT_TRUE(free.ok()) << free.error().what();
}

}  // namespace

// ------------------------------------------------------- leases follow their hold (issue #4)

// A take's remaining() follows the hold as the watchdog renews it: after several TTLs it is
// still positive (a take that kept its first validity would be at 0), and extend() through any
// take moves every take's validity and the hold's later renewals.
TEST_F(ReentrantMutexTest, TakesFollowTheHoldsRenewalsAndExtension) {
  auto opts = with_owner("follower");
  opts.lease.mode = dlock::LeaseMode::watchdog;
  opts.lease.ttl = 300ms;  // renewed every 100 ms
  ReentrantMutex m(*client, "follow", opts);
  auto outer = m.acquire();
  ASSERT_TRUE(outer.ok()) << outer.error().what();
  auto inner = m.acquire(no_wait());
  ASSERT_TRUE(inner.ok()) << inner.error().what();

  // Four TTLs: without renewals followed, both takes' validity would have run out.
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < 1200ms) {
    ASSERT_GT(outer->remaining(), 0ms) << "after " << ms_since(t0).count() << " ms";
    ASSERT_GT(inner->remaining(), 0ms) << "after " << ms_since(t0).count() << " ms";
    ASSERT_LE(inner->remaining(), 300ms);
    std::this_thread::sleep_for(25ms);
  }

  ASSERT_TRUE(outer->extend(20000ms).ok());
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 15000);
  EXPECT_GT(inner->remaining(), 15000ms);
  EXPECT_GT(outer->remaining(), 15000ms);
  // Renewals now use the extended TTL: the key's PTTL stays far above the first 300 ms.
  std::this_thread::sleep_for(400ms);
  EXPECT_GT(raw->cmd_int({"PTTL", m.key()}), 10000);
  EXPECT_EQ(hget(m.key(), outer->owner()), "2");

  // A hold that is gone: extend() through a take fails with not_owner and every take is lost.
  ASSERT_EQ(raw->cmd_int({"DEL", m.key()}), 1);
  auto gone = inner->extend(5000ms);
  EXPECT_EQ(gone.code(), make_error_code(dlock::errc::not_owner)) << gone.error().what();
  ASSERT_TRUE(eventually([&] { return outer->lost() && inner->lost(); }, 2000ms));
  EXPECT_EQ(outer->remaining(), 0ms);
  EXPECT_EQ(exists(m.key()), 0) << "extend() re-created a hold that was gone";
}

// Client::active_leases() counts holds, not takes: one owner's three takes are one lease, two
// owners' holds of two locks are two, and releasing takes changes the count only at the last.
TEST_F(ReentrantMutexTest, ActiveLeasesCountsHoldsNotTakes) {
  ASSERT_EQ(client->active_leases(), 0u);
  ReentrantMutex a(*client, "count-a", with_owner("one"));
  auto b_opts = with_owner("two");
  b_opts.lease.ttl = 600ms;  // renewed every 200 ms: the loss below is found quickly
  ReentrantMutex b(*client, "count-b", b_opts);
  auto a1 = a.acquire();
  ASSERT_TRUE(a1.ok()) << a1.error().what();
  auto a2 = a.acquire(no_wait());
  ASSERT_TRUE(a2.ok()) << a2.error().what();
  a.lock();
  EXPECT_EQ(client->active_leases(), 1u) << "three takes of one hold";
  auto b1 = b.acquire();
  ASSERT_TRUE(b1.ok()) << b1.error().what();
  EXPECT_EQ(client->active_leases(), 2u);

  ASSERT_TRUE(a2->release().ok());
  a.unlock();
  EXPECT_EQ(client->active_leases(), 2u) << "the hold of count-a is still held by a1";
  ASSERT_TRUE(a1->release().ok());
  // The hold leaves the watchdog when its last take's record is gone.
  *a1 = dlock::Lease();
  *a2 = dlock::Lease();
  ASSERT_TRUE(eventually([&] { return client->active_leases() == 1u; }, 2000ms)) << client->active_leases();
  // A lost hold stops counting once, not once per take.
  auto b2 = b.acquire(no_wait());
  ASSERT_TRUE(b2.ok()) << b2.error().what();
  ASSERT_EQ(raw->cmd_int({"DEL", b.key()}), 1);
  ASSERT_TRUE(eventually([&] { return b1->lost() && b2->lost(); }, 5000ms));
  EXPECT_EQ(client->active_leases(), 0u);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(client->active_leases(), 0u) << "the count went below zero (wrapped)";
}

TEST_F(ReentrantMutexTest, ReleasingProcessLetsAWaiterElsewhereGoFirst) {
  // Two threads of one Client are two owners: the holder and the local waiter exclude each other.
  ReentrantMutex mine(*client, "courtesy");
  dlock::Client other_client(server->url());
  ReentrantMutex theirs(other_client, "courtesy");
  const dlock::WaitOptions wait{10000ms, 10000ms};
  const int won = dlock::test::rounds_the_other_client_went_first(
      *raw, key_of("courtesy") + ":ch", [&] { return mine.acquire(wait); }, [&] { return theirs.acquire(wait); });
  // Without the hold-back the releasing Client's waiter wins most rounds; a slow round on a
  // loaded machine may still go to it, hence not all.
  EXPECT_GE(won, 8) << "the other Client's waiter went first in only " << won << " of 10 rounds";
}

// Issue #6 (Redis calls per EVALSHA cost throughput): the scripts ask for the lock key's TYPE
// only when a command on it failed, so a free lock's acquire and release run none. The
// wrong-type replies are kept (WrongTypeBothWays).
TEST_F(ReentrantMutexTest, UncontendedPairRunsNoTypeCheck) {
  ReentrantMutex m(*client, "calls");
  auto first = m.acquire(no_wait());  // seeds the fencing counter
  ASSERT_TRUE(first.ok() && first->release().ok());
  raw->cmd({"CONFIG", "RESETSTAT"});
  auto a = m.acquire(no_wait());
  ASSERT_TRUE(a.ok()) << a.error().what();
  ASSERT_TRUE(a->release().ok());
  EXPECT_EQ(command_calls(*raw, "type"), 0);
  EXPECT_EQ(command_calls(*raw, "exists"), 0) << "the latch is set with NX, the counter seeded on INCR's 1";
  EXPECT_EQ(exists(m.key()), 0);
}

// A release that finds the hold is not ours takes its latch back: a retry of it (first reply
// lost) answers 0 again, not "already released".
TEST_F(ReentrantMutexTest, ReleaseOfAHoldNotOursLeavesNoLatch) {
  ReentrantMutex m(*client, "not-ours");
  auto a = m.acquire(no_wait());
  ASSERT_TRUE(a.ok());
  const std::string latch = m.key() + ":rel:test-take";
  const auto& script = dlock::detail::scripts::reentrant_release;
  auto release = [&](const std::string& token) {
    return raw->cmd({"EVAL", script.source, "2", m.key(), latch, a->owner(), m.key() + ":ch", "released", token,
                     "30000"});
  };
  EXPECT_EQ(release("12345"), "0") << "a stale token released the hold";
  EXPECT_EQ(exists(latch), 0);
  EXPECT_EQ(release("12345"), "0");
  EXPECT_EQ(hget(m.key(), a->owner()), "1");
  EXPECT_TRUE(a->release().ok());
}

// The last release reports how many subscribers its notification reached (2 + n), which the
// releasing Client holds its next try on P{N} (KEYS[1], its wait queue's key) back for; a
// release that leaves the hold in place notifies nobody and answers 1.
TEST_F(ReentrantMutexTest, LastReleaseReportsTheSubscribersItNotified) {
  ReentrantMutex m(*client, "notified");
  auto a = m.acquire(no_wait());
  auto b = m.acquire(no_wait());
  ASSERT_TRUE(a.ok() && b.ok());
  RawConnection listener(*server);
  ASSERT_EQ(listener.cmd_array({"SUBSCRIBE", m.key() + ":ch"}).size(), 3u);
  const std::string token = std::to_string(a->token().value);
  const auto& script = dlock::detail::scripts::reentrant_release;
  auto release = [&](const std::string& take) {
    return raw->cmd({"EVAL", script.source, "2", m.key(), m.key() + ":rel:" + take, a->owner(), m.key() + ":ch",
                     "released", token, "30000"});
  };
  EXPECT_EQ(release("first"), "1");
  EXPECT_EQ(release("second"), "3") << "one subscriber: 2 + 1";
  EXPECT_EQ(exists(m.key()), 0);
}
