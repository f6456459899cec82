// Integration tests of dlock::Semaphore (counting semaphore with expiring permits) against real
// redis-server processes.
//
// The number of concurrent holders is measured behind dlock's back with a gauge in Redis (INCR
// on entry, DECR on exit), so threads and forked processes are counted alike.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/semaphore.hpp"
#include "scripts/script.hpp"
#include "support/fairness_rounds.hpp"
#include "support/lock_helpers.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace dlock::detail::scripts {
extern const Script sem_release;
}  // namespace dlock::detail::scripts

namespace {

using dlock::test::LossProbe;
using dlock::test::key_of;
using dlock::test::no_wait;
using dlock::test::watchdog;

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::eventually;
using dlock::test::ms_since;
using dlock::test::scaled;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using SemaphoreTest = dlock::test::ServerFixture;

dlock::WaitOptions wait_for(milliseconds timeout, milliseconds recheck = 100ms) {
  return dlock::WaitOptions{timeout, recheck};
}

long long to_count(const std::string& s) { return s == "(nil)" ? 0 : std::stoll(s); }

// EVALSHA calls the server counted since the last CONFIG RESETSTAT (acquire tries + releases).
long long evalsha_calls(dlock::test::RawConnection& raw) {
  std::istringstream in(raw.cmd({"INFO", "commandstats"}));
  const std::string tag = "cmdstat_evalsha:calls=";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(tag, 0) == 0) return std::stoll(line.substr(tag.size()));
  }
  return 0;
}

// A waiter thread of a test: acquire(k) and report when it returned.
struct Waiter {
  std::future<std::pair<dlock::Result<dlock::Lease>, SteadyClock::time_point>> result;
  Waiter(dlock::Semaphore& sem, std::size_t k, dlock::WaitOptions wait)
      : result(std::async(std::launch::async, [&sem, k, wait] {
          auto r = sem.acquire(k, wait);
          return std::make_pair(std::move(r), SteadyClock::now());
        })) {}
  bool done() { return result.wait_for(0ms) == std::future_status::ready; }
};

// Enter: INCR "inside", keep its maximum in "inside_max"; returns how many are inside now.
const char* kEnter =
    "redis.call('INCR', 'entries') "
    "local v = redis.call('INCR', KEYS[1]) "
    "if v > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], v) end "
    "return v";
long long enter(dlock::Client& c) {
  auto r = c.command({"EVAL", kEnter, "2", "inside", "inside_max"});
  return r.ok() && r->is_integer() ? r->integer() : -1;
}
bool leave(dlock::Client& c) { return c.command({"DECR", "inside"}).ok(); }

// ----------------------------------------------------------------------------------- limit

// Five threads (each with its own Client) and two processes compete for 3 permits, half through
// the Lease API, half through the counting_semaphore members: never more than 3 inside.
TEST_F(SemaphoreTest, LimitHoldsAcrossThreadsAndProcesses) {
  constexpr std::size_t kPermits = 3;
  constexpr int kThreads = 5;
  constexpr int kChildren = 2;
  constexpr int kIters = 12;
  const std::string url = server->url();
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int i = 0; i < kChildren; ++i) {
    children.push_back(std::make_unique<ChildProcess>([url]() -> int {
      dlock::Client c(url);
      if (!c.ping().ok()) return 2;
      dlock::Semaphore sem(c, "pool", kPermits);
      for (int k = 0; k < kIters; ++k) {
        auto permit = sem.acquire(1, dlock::WaitOptions{20000ms, 100ms});
        if (!permit.ok()) return 3;
        const long long inside = enter(c);
        if (inside < 1 || inside > static_cast<long long>(kPermits)) return 4;
        std::this_thread::sleep_for(4ms);
        if (!leave(c)) return 5;
        if (!permit->release().ok()) return 6;
      }
      return 0;
    }));
  }
  std::atomic<int> violations{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        dlock::Client c(url);
        dlock::Semaphore sem(c, "pool", kPermits);
        for (int k = 0; k < kIters; ++k) {
          std::optional<dlock::Lease> permit;
          if (t % 2 == 0) {
            sem.acquire();
          } else {
            auto r = sem.acquire(1, dlock::WaitOptions{20000ms, 100ms});
            if (!r.ok()) throw std::runtime_error(r.error().what());
            permit.emplace(std::move(*r));
          }
          const long long inside = enter(c);
          if (inside < 1 || inside > static_cast<long long>(kPermits)) violations.fetch_add(1);
          std::this_thread::sleep_for(4ms);
          leave(c);
          if (permit) {
            if (!permit->release().ok()) violations.fetch_add(1);
          } else {
            sem.release();
            if (sem.last_error()) violations.fetch_add(1);
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker: " << e.what();
        violations.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& ch : children) {
    auto code = ch->wait_for(40s);
    ASSERT_TRUE(code.has_value()) << "child " << ch->pid() << " did not finish";
    EXPECT_EQ(*code, 0) << "child " << ch->pid() << " saw a violation (4: more than 3 inside)";
  }
  EXPECT_EQ(violations.load(), 0);
  const long long max_inside = to_count(raw->cmd({"GET", "inside_max"}));
  EXPECT_LE(max_inside, static_cast<long long>(kPermits)) << "the limit was exceeded";
  EXPECT_GE(max_inside, 2) << "permits were never held concurrently: a mutex, not a semaphore";
  EXPECT_EQ(to_count(raw->cmd({"GET", "inside"})), 0);
  EXPECT_EQ(to_count(raw->cmd({"GET", "entries"})), (kThreads + kChildren) * kIters);
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("pool") + ":permits"}), 0) << "permits left behind";
  EXPECT_EQ(raw->cmd({"GET", key_of("pool") + ":limit"}), "3");
}

// k permits at once: all or nothing, one Lease, ids "<owner>#1".."#k"; tokens differ and rise.
TEST_F(SemaphoreTest, SeveralPermitsAtOnce) {
  dlock::Semaphore sem(*client, "multi", 3);
  auto two = sem.acquire(2, no_wait());
  ASSERT_TRUE(two.ok()) << two.error().what();
  const std::string permits = sem.key() + ":permits";
  EXPECT_EQ(raw->cmd_int({"ZCARD", permits}), 2);
  EXPECT_NE(raw->cmd({"ZSCORE", permits, two->owner() + "#1"}), "(nil)");
  EXPECT_NE(raw->cmd({"ZSCORE", permits, two->owner() + "#2"}), "(nil)");
  EXPECT_EQ(sem.acquire(2, no_wait()).code(), make_error_code(dlock::errc::busy)) << "2 + 2 > 3 was granted";
  EXPECT_EQ(raw->cmd_int({"ZCARD", permits}), 2) << "a refused acquisition took permits";
  auto one = sem.acquire(1, no_wait());
  ASSERT_TRUE(one.ok()) << one.error().what();
  EXPECT_GT(one->token(), two->token());
  EXPECT_EQ(sem.acquire(1, no_wait()).code(), make_error_code(dlock::errc::busy));
  EXPECT_EQ(sem.acquire(4, wait_for(200ms)).code(), make_error_code(dlock::errc::timeout)) << "k above the limit";
  EXPECT_EQ(sem.acquire(0, no_wait()).code(), make_error_code(dlock::errc::invalid_argument));
  auto avail = sem.available();
  ASSERT_TRUE(avail.ok()) << avail.error().what();
  EXPECT_EQ(*avail, 0u);
  EXPECT_TRUE(two->release().ok());
  EXPECT_TRUE(two->release().ok()) << "a repeated release must be harmless";
  EXPECT_EQ(raw->cmd_int({"ZCARD", permits}), 1);
  EXPECT_EQ(sem.available().value(), 2u);
  EXPECT_TRUE(one->release().ok());
}

// The counting_semaphore members: permits belong to the object, any thread releases them, and
// release(n) with fewer held throws without releasing anything.
TEST_F(SemaphoreTest, CountingSemaphoreMembers) {
  dlock::Semaphore sem(*client, "std", 2);
  EXPECT_TRUE(sem.try_acquire());
  EXPECT_TRUE(sem.try_acquire_for(100ms));
  EXPECT_FALSE(sem.try_acquire());
  EXPECT_FALSE(sem.try_acquire_until(SteadyClock::now() + 150ms));
  EXPECT_EQ(sem.held(), 2u);
  EXPECT_THROW(sem.release(3), std::system_error);
  EXPECT_EQ(sem.held(), 2u);
  std::thread([&] { sem.release(2); }).join();
  EXPECT_EQ(sem.held(), 0u);
  EXPECT_FALSE(sem.last_error()) << sem.last_error().what();
  EXPECT_EQ(raw->cmd_int({"EXISTS", sem.key() + ":permits"}), 0);
  sem.acquire();
  EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 1);
}

// ------------------------------------------------------------------------------ waiting

// A waiter whose recheck interval is 10 s is woken by the release notification at once.
TEST_F(SemaphoreTest, WaiterWokenByRelease) {
  dlock::Semaphore holder(*client, "wake", 1);
  auto held = holder.acquire(1, no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client wc(server->url());
  dlock::Semaphore waiter(wc, "wake", 1);
  auto fut = std::async(std::launch::async, [&] {
    auto r = waiter.acquire(1, dlock::WaitOptions{8000ms, 10000ms});
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  std::this_thread::sleep_for(300ms);  // its first try finds no free permit
  ASSERT_EQ(fut.wait_for(0ms), std::future_status::timeout) << "the waiter got a permit that was taken";
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  auto [got, t1] = fut.get();
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_LT(t1 - t0, 700ms) << "the waiter was not woken by the release";
  EXPECT_TRUE(got->release().ok());
}

// ------------------------------------------------------------------- the local wait queue

// Several permits freed together (one release of 3, then a raised limit): every local waiter
// gets one at once, although their recheck interval is 10 s. Only the queue's head tries, so the
// head that got a permit with more still free must hand its turn on (no lost wake-up).
TEST_F(SemaphoreTest, PermitsFreedTogetherReachEveryLocalWaiter) {
  dlock::Client hc(server->url());
  dlock::Semaphore holder(hc, "together", 3);
  dlock::Semaphore sem(*client, "together", 3);
  const dlock::WaitOptions patient{8000ms, 10000ms};
  {
    auto three = holder.acquire(3, no_wait());
    ASSERT_TRUE(three.ok()) << three.error().what();
    std::vector<std::unique_ptr<Waiter>> waiters;
    for (int i = 0; i < 3; ++i) waiters.push_back(std::make_unique<Waiter>(sem, 1, patient));
    std::this_thread::sleep_for(300ms);
    for (auto& w : waiters) ASSERT_FALSE(w->done()) << "a waiter got a permit that was taken";
    const auto t0 = SteadyClock::now();
    ASSERT_TRUE(three->release().ok());  // one release, one notification, three permits
    for (auto& w : waiters) {
      ASSERT_EQ(w->result.wait_for(scaled(5s)), std::future_status::ready);
      auto [r, t1] = w->result.get();
      ASSERT_TRUE(r.ok()) << r.error().what();
      EXPECT_LT(t1 - t0, scaled(700ms)) << "a waiter slept through permits that were free";
      EXPECT_TRUE(r->release().ok());
    }
  }
  {
    ASSERT_TRUE(holder.set_permits(1).ok());
    auto one = holder.acquire(1, no_wait());
    ASSERT_TRUE(one.ok()) << one.error().what();
    std::vector<std::unique_ptr<Waiter>> waiters;
    for (int i = 0; i < 3; ++i) waiters.push_back(std::make_unique<Waiter>(sem, 1, patient));
    std::this_thread::sleep_for(300ms);
    for (auto& w : waiters) ASSERT_FALSE(w->done());
    const auto t0 = SteadyClock::now();
    ASSERT_TRUE(holder.set_permits(4).ok());
    std::vector<dlock::Lease> leases;  // held until counted (a Lease releases when destroyed)
    for (auto& w : waiters) {
      ASSERT_EQ(w->result.wait_for(scaled(5s)), std::future_status::ready);
      auto [r, t1] = w->result.get();
      ASSERT_TRUE(r.ok()) << r.error().what();
      EXPECT_LT(t1 - t0, scaled(700ms)) << "a waiter slept through a raised limit";
      leases.push_back(std::move(*r));
    }
    EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 4);
  }
}

// No herd: five waiters of one Client queue locally, so each release costs one try of the
// queue's head, not one per waiter (issue #6: Semaphore sent ~10 EVALSHA per acquisition).
TEST_F(SemaphoreTest, OneTryPerReleaseNotOnePerWaiter) {
  constexpr int kWaiters = 5;
  dlock::Client hc(server->url());
  dlock::Semaphore holder(hc, "herd", 1);
  dlock::Semaphore sem(*client, "herd", 1);
  auto held = holder.acquire(1, no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  std::atomic<int> acquired{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      auto r = sem.acquire(1, dlock::WaitOptions{20000ms, 10000ms});
      if (!r.ok()) return ADD_FAILURE() << r.error().what();
      acquired.fetch_add(1);
      std::this_thread::sleep_for(20ms);
      EXPECT_TRUE(r->release().ok());
    });
  }
  std::this_thread::sleep_for(500ms);  // all queued; the head's tries are done
  ASSERT_EQ(acquired.load(), 0);
  ASSERT_EQ(raw->cmd({"CONFIG", "RESETSTAT"}), "OK");
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(eventually([&] { return acquired.load() == kWaiters; }, scaled(8000ms)))
      << acquired.load() << " of " << kWaiters << " waiters were served";
  for (auto& t : threads) t.join();
  // Each of the 6 releases wakes the one head, which tries once: 6 + 5. The old design (a queue
  // per waiter) tried 5 + 4 + 3 + 2 + 1 times.
  EXPECT_LE(evalsha_calls(*raw), 2 * kWaiters + 1 + 1) << "a release woke more than the queue's head";
}

// Head-of-line blocking, as documented: a waiter for 2 permits at the head holds up a later
// waiter for 1 although 1 is free; a release serves both at once (the head hands its turn on),
// and a head that gives up (timeout) lets the next one in at once.
TEST_F(SemaphoreTest, HeadOfLineBlockingWithinAClient) {
  dlock::Client hc(server->url());
  dlock::Semaphore holder(hc, "hol", 3);
  dlock::Semaphore sem(*client, "hol", 3);
  {
    auto two = holder.acquire(2, no_wait());
    ASSERT_TRUE(two.ok()) << two.error().what();
    Waiter big(sem, 2, dlock::WaitOptions{8000ms, 10000ms});
    std::this_thread::sleep_for(200ms);
    Waiter small(sem, 1, dlock::WaitOptions{8000ms, 10000ms});
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(sem.available().value(), 1u);
    ASSERT_FALSE(small.done()) << "a later, smaller request overtook the head of the queue";
    ASSERT_FALSE(big.done());
    const auto t0 = SteadyClock::now();
    ASSERT_TRUE(two->release().ok());
    ASSERT_EQ(big.result.wait_for(scaled(5s)), std::future_status::ready);
    ASSERT_EQ(small.result.wait_for(scaled(5s)), std::future_status::ready);
    auto [b, tb] = big.result.get();
    auto [s, ts] = small.result.get();
    ASSERT_TRUE(b.ok()) << b.error().what();
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_LT(tb - t0, scaled(700ms));
    EXPECT_LT(ts - t0, scaled(700ms)) << "the head took 2 of 3 and did not hand its turn on";
    // The server's order, not the waiter threads' wake-up times: the small waiter's thread may
    // return first when it runs the loop and the head's thread is still being woken (an ASan
    // CI run saw the timestamps 0.4 ms apart that way).
    EXPECT_LT(b->token().value, s->token().value) << "FIFO: the head is served first";
    EXPECT_TRUE(b->release().ok());
    EXPECT_TRUE(s->release().ok());
  }
  {
    auto two = holder.acquire(2, no_wait());
    ASSERT_TRUE(two.ok()) << two.error().what();
    Waiter big(sem, 2, dlock::WaitOptions{800ms, 10000ms});
    std::this_thread::sleep_for(200ms);
    Waiter small(sem, 1, dlock::WaitOptions{8000ms, 10000ms});
    ASSERT_EQ(big.result.wait_for(scaled(5s)), std::future_status::ready);
    auto [b, tb] = big.result.get();
    EXPECT_EQ(b.code(), make_error_code(dlock::errc::timeout));
    ASSERT_EQ(small.result.wait_for(scaled(5s)), std::future_status::ready);
    auto [s, ts] = small.result.get();
    ASSERT_TRUE(s.ok()) << s.error().what();
    EXPECT_LT(ts - tb, scaled(500ms)) << "the next waiter did not try when the head gave up";
    EXPECT_TRUE(two->release().ok());
  }
}

// A request above the limit would block its queue until the limit is raised: it waits aside,
// and later requests of the same Client are served meanwhile. Raising the limit serves it.
// A waiter above the limit can only be helped by a resize: the releases of other holders do not
// wake it (each woke it to a try that could only fail).
TEST_F(SemaphoreTest, WaiterAboveTheLimitSleepsThroughReleases) {
  dlock::Client hc(server->url());
  dlock::Semaphore churn(hc, "over-quiet", 2);
  dlock::Semaphore sem(*client, "over-quiet", 2);
  Waiter huge(sem, 3, dlock::WaitOptions{8000ms, 10000ms});
  ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(*raw, sem.key() + ":ch") == 1; }, 3000ms));
  std::this_thread::sleep_for(200ms);
  const long long before = dlock::test::script_calls(*raw);
  constexpr int kChurn = 100;
  for (int i = 0; i < kChurn; ++i) {
    auto l = churn.acquire(1, no_wait());
    ASSERT_TRUE(l.ok()) << l.error().what();
    ASSERT_TRUE(l->release().ok());
  }
  std::this_thread::sleep_for(100ms);
  EXPECT_LE(dlock::test::script_calls(*raw) - before, 2 * kChurn + 2) << "woken by releases that cannot make room";
  ASSERT_FALSE(huge.done());
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(churn.set_permits(3).ok());
  ASSERT_EQ(huge.result.wait_for(scaled(5s)), std::future_status::ready) << "the resize did not wake it";
  auto [h, th] = huge.result.get();
  ASSERT_TRUE(h.ok()) << h.error().what();
  EXPECT_LT(th - t0, scaled(700ms));
}

// The limit as stored, however large: read as a Lua number it was rounded above 2^53, and one of
// 2^63 or more came back as a negative integer, which read as "no limit stored" (permits()
// then reported the constructor's count).
TEST_F(SemaphoreTest, LargeLimitsAreReportedExactly) {
  dlock::Semaphore sem(*client, "big", 2);
  for (std::size_t limit : {(std::size_t{1} << 53) + 1, std::numeric_limits<std::size_t>::max()}) {
    ASSERT_TRUE(sem.set_permits(limit).ok());
    auto got = sem.permits();
    ASSERT_TRUE(got.ok()) << got.error().what();
    EXPECT_EQ(*got, limit);
    auto lease = sem.acquire(1, no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    auto avail = sem.available();
    ASSERT_TRUE(avail.ok()) << avail.error().what();
    EXPECT_EQ(*avail, limit - 1);
    EXPECT_TRUE(lease->release().ok());
  }
}

// A request above the limit that a resize brings within it, but for which permits are not yet
// free, waits for releases again: it stayed in the over-limit queue, where only "resized" wakes,
// and took the permits 4-5 s after the release that freed them (its recheck interval).
TEST_F(SemaphoreTest, RequestThatAResizeBroughtWithinTheLimitWakesOnRelease) {
  dlock::Client hc(server->url());
  dlock::Semaphore holder(hc, "over-then-fits", 1);
  dlock::Semaphore sem(*client, "over-then-fits", 1);
  auto one = holder.acquire(1, no_wait());
  ASSERT_TRUE(one.ok()) << one.error().what();
  Waiter two(sem, 2, dlock::WaitOptions{20000ms, 5000ms});
  std::this_thread::sleep_for(300ms);  // it tried, found 2 above the limit of 1, and waits for a resize
  ASSERT_TRUE(holder.set_permits(2).ok());
  std::this_thread::sleep_for(300ms);  // woken by the resize, it tried: 1 of 2 is still held
  ASSERT_FALSE(two.done());
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(one->release().ok());
  ASSERT_EQ(two.result.wait_for(scaled(10s)), std::future_status::ready);
  auto [r, at] = two.result.get();
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_LT(at - t0, scaled(1500ms)) << "the release did not wake it";
}

TEST_F(SemaphoreTest, RequestAboveTheLimitBlocksNobody) {
  dlock::Client hc(server->url());
  dlock::Semaphore holder(hc, "over", 2);
  dlock::Semaphore sem(*client, "over", 2);
  auto two = holder.acquire(2, no_wait());
  ASSERT_TRUE(two.ok()) << two.error().what();
  Waiter huge(sem, 5, dlock::WaitOptions{8000ms, 10000ms});
  std::this_thread::sleep_for(200ms);
  Waiter small(sem, 1, dlock::WaitOptions{8000ms, 10000ms});
  std::this_thread::sleep_for(200ms);
  ASSERT_FALSE(small.done());
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(two->release().ok());
  ASSERT_EQ(small.result.wait_for(scaled(5s)), std::future_status::ready);
  auto [s, ts] = small.result.get();
  ASSERT_TRUE(s.ok()) << s.error().what();
  EXPECT_LT(ts - t0, scaled(700ms)) << "a request above the limit held up the queue";
  ASSERT_FALSE(huge.done());
  const auto t1 = SteadyClock::now();
  ASSERT_TRUE(holder.set_permits(6).ok());
  ASSERT_EQ(huge.result.wait_for(scaled(5s)), std::future_status::ready);
  auto [h, th] = huge.result.get();
  ASSERT_TRUE(h.ok()) << h.error().what();
  EXPECT_LT(th - t1, scaled(700ms)) << "the request above the limit missed the resize";
  EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 6);
  // Its wait kept its deadline: above the limit again, it times out in about its timeout.
  const auto t2 = SteadyClock::now();
  EXPECT_EQ(sem.acquire(7, dlock::WaitOptions{400ms, 10000ms}).code(), make_error_code(dlock::errc::timeout));
  EXPECT_GE(ms_since(t2), 350ms);
  EXPECT_LT(ms_since(t2), scaled(1500ms));
}

// Two requests above the limit in one Client, the larger first: a resize that makes room for the
// smaller one only lets it in at once. Both used to wait in one over-limit queue, where only its
// head tried, so the smaller waited behind the larger for as long as the larger did not fit.
TEST_F(SemaphoreTest, ARequestAboveTheLimitDoesNotHoldUpASmallerOneThatAResizeLetIn) {
  dlock::Semaphore sem(*client, "over-two", 2);
  dlock::Semaphore admin(*client, "over-two", 2);
  // Its timeout is the time the smaller request waited behind it before the fix.
  Waiter ten(sem, 10, dlock::WaitOptions{scaled(4000ms), 10000ms});
  std::this_thread::sleep_for(200ms);  // it tried, found 10 above the limit of 2, waits for a resize
  Waiter three(sem, 3, dlock::WaitOptions{8000ms, 10000ms});
  std::this_thread::sleep_for(200ms);
  ASSERT_FALSE(three.done());
  ASSERT_TRUE(admin.set_permits(5).ok());
  ASSERT_EQ(three.result.wait_for(scaled(2000ms)), std::future_status::ready)
      << "the request that the resize let in waited behind one still above the limit";
  auto r = three.result.get().first;
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 3);
  ASSERT_FALSE(ten.done());  // still above the limit of 5
  EXPECT_TRUE(r->release().ok());
}

// Two Clients (two processes' worth of queues), three waiters each: within a Client waiters are
// served in the order they asked; the Clients themselves race.
TEST_F(SemaphoreTest, FifoWithinEachClient) {
  constexpr int kPerClient = 3;
  dlock::Client hc(server->url());
  dlock::Semaphore holder(hc, "fifo", 1);
  dlock::Client c2(server->url());
  dlock::Semaphore sem1(*client, "fifo", 1);
  dlock::Semaphore sem2(c2, "fifo", 1);
  auto held = holder.acquire(1, no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  std::mutex mu;
  std::vector<std::pair<int, int>> order;  // (client, position in that client's queue)
  std::vector<std::thread> threads;
  for (int i = 0; i < kPerClient; ++i) {
    for (int c = 0; c < 2; ++c) {
      threads.emplace_back([&, c, i] {
        auto r = (c == 0 ? sem1 : sem2).acquire(1, dlock::WaitOptions{20000ms, 10000ms});
        if (!r.ok()) return ADD_FAILURE() << r.error().what();
        {
          std::lock_guard lock(mu);
          order.emplace_back(c, i);
        }
        std::this_thread::sleep_for(10ms);
        EXPECT_TRUE(r->release().ok());
      });
      std::this_thread::sleep_for(100ms);  // queued in this order
    }
  }
  ASSERT_TRUE(held->release().ok());
  for (auto& t : threads) t.join();
  ASSERT_EQ(order.size(), 2u * kPerClient);
  int next[2] = {0, 0};
  for (auto [c, i] : order) {
    EXPECT_EQ(i, next[c]) << "client " << c << " served its waiter " << i << " out of order";
    next[c] = i + 1;
  }
}

// ---------------------------------------------------------------------- crash, renewal, loss

// A process holding a permit is killed: its permit expires at its TTL and is reclaimed, while
// the other holder's permit (renewed, with a long TTL) keeps the permits' zset alive: only
// purging the expired entry lets a newcomer in.
TEST_F(SemaphoreTest, CrashedHoldersPermitIsReclaimed) {
  const std::string url = server->url();
  ChildProcess child([url]() -> int {
    dlock::Client c(url);
    if (!c.ping().ok()) return 2;
    dlock::Semaphore sem(c, "crash", 2, watchdog(900ms));
    auto permit = sem.acquire(1, no_wait());
    if (!permit.ok()) return 3;
    if (!c.command({"SET", "child-ready", "1"}).ok()) return 4;
    std::this_thread::sleep_for(60s);  // killed long before
    return 0;
  });
  ASSERT_TRUE(eventually([&] { return raw->cmd({"GET", "child-ready"}) == "1"; }, 5000ms));
  dlock::Semaphore keeper(*client, "crash", 2, watchdog(5000ms));
  auto kept = keeper.acquire(1, no_wait());
  ASSERT_TRUE(kept.ok()) << kept.error().what();
  dlock::Semaphore sem(*client, "crash", 2);
  EXPECT_FALSE(sem.try_acquire());
  std::this_thread::sleep_for(1200ms);  // renewed past its TTL while the child lives
  EXPECT_FALSE(sem.try_acquire());

  child.signal(SIGKILL);
  EXPECT_EQ(child.wait(), 128 + SIGKILL);
  const auto t0 = SteadyClock::now();
  auto permit = sem.acquire(1, wait_for(5000ms));
  ASSERT_TRUE(permit.ok()) << "the dead holder's permit was never reclaimed: " << permit.error().what();
  const auto waited = ms_since(t0);
  // Renewed every 300 ms with a 900 ms TTL: it expires 600-900 ms after the kill.
  EXPECT_GE(waited, 400ms) << "the permit was reclaimed while its lease was still valid";
  EXPECT_LT(waited, 2500ms);
  EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 2);
  EXPECT_TRUE(kept->held());
  EXPECT_TRUE(permit->release().ok());
  EXPECT_TRUE(kept->release().ok());
}

// The same through the local queue: limit 2, a killed process holds one permit. A local waiter
// takes the other (none left free), and the waiter queued behind it, with a 10 s recheck
// interval and no release coming, still notices the dead holder's permit expiring.
TEST_F(SemaphoreTest, CrashedHolderWakesTheNextLocalWaiter) {
  const std::string url = server->url();
  ChildProcess child([url]() -> int {
    dlock::Client c(url);
    if (!c.ping().ok()) return 2;
    dlock::Semaphore sem(c, "crash2", 2, watchdog(900ms));
    auto permit = sem.acquire(1, no_wait());
    if (!permit.ok()) return 3;
    if (!c.command({"SET", "child-ready", "1"}).ok()) return 4;
    std::this_thread::sleep_for(60s);  // killed long before
    return 0;
  });
  ASSERT_TRUE(eventually([&] { return raw->cmd({"GET", "child-ready"}) == "1"; }, 5000ms));
  dlock::Client hc(server->url());
  dlock::Semaphore holder(hc, "crash2", 2);
  auto held = holder.acquire(1, no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Semaphore sem(*client, "crash2", 2);
  Waiter first(sem, 1, dlock::WaitOptions{8000ms, 10000ms});
  std::this_thread::sleep_for(100ms);
  Waiter second(sem, 1, dlock::WaitOptions{8000ms, 10000ms});
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(first.result.wait_for(scaled(2s)), std::future_status::ready);
  auto [f, tf] = first.result.get();
  ASSERT_TRUE(f.ok()) << f.error().what();
  std::this_thread::sleep_for(1200ms);  // the child renews: its permit stays
  ASSERT_FALSE(second.done()) << "a permit was granted beyond the limit";
  child.signal(SIGKILL);
  EXPECT_EQ(child.wait(), 128 + SIGKILL);
  const auto t0 = SteadyClock::now();
  ASSERT_EQ(second.result.wait_for(scaled(5s)), std::future_status::ready);
  auto [s, ts] = second.result.get();
  ASSERT_TRUE(s.ok()) << "the dead holder's permit was never reclaimed: " << s.error().what();
  EXPECT_LT(ts - t0, scaled(2500ms)) << "the waiter slept past the dead holder's expiry";
  EXPECT_TRUE(f->release().ok());
  EXPECT_TRUE(s->release().ok());
}

// The watchdog renews a permit: a 300 ms permit held for 1.2 s stays held and excludes others.
TEST_F(SemaphoreTest, WatchdogRenewsPermits) {
  LossProbe probe;
  auto opts = watchdog(300ms);
  probe.attach(opts);
  dlock::Semaphore sem(*client, "renew", 1, opts);
  auto permit = sem.acquire(1, no_wait());
  ASSERT_TRUE(permit.ok()) << permit.error().what();
  dlock::Client oc(server->url());
  dlock::Semaphore other(oc, "renew", 1);
  const auto t0 = SteadyClock::now();
  while (SteadyClock::now() - t0 < 1200ms) {
    EXPECT_FALSE(other.try_acquire()) << "after " << ms_since(t0).count() << " ms";
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(permit->held());
  EXPECT_EQ(probe.calls.load(), 0);
  EXPECT_TRUE(permit->release().ok());
  EXPECT_TRUE(other.try_acquire());
}

// k is bounded only by the limit: thousands of permits in one acquisition are added and renewed
// in chunks (one ZADD of them all failed: unpack() of ~8,000 values overflows Lua's stack,
// "too many results to unpack", from k = 4,000 on).
TEST_F(SemaphoreTest, ThousandsOfPermitsAtOnce) {
  dlock::Semaphore sem(*client, "thousands", 9000, watchdog(300ms));
  auto big = sem.acquire(4500, no_wait());
  ASSERT_TRUE(big.ok()) << big.error().what();
  const std::string permits = sem.key() + ":permits";
  EXPECT_EQ(raw->cmd_int({"ZCARD", permits}), 4500);
  EXPECT_NE(raw->cmd({"ZSCORE", permits, big->owner() + "#4500"}), "(nil)");
  std::this_thread::sleep_for(700ms);  // renewed twice or more (a 300 ms lease)
  EXPECT_TRUE(big->held());
  ASSERT_TRUE(big->extend(20000ms).ok());
  EXPECT_GT(raw->cmd_int({"PTTL", permits}), 10000) << "extend() did not reach the permits";
  EXPECT_EQ(sem.acquire(4501, no_wait()).code(), make_error_code(dlock::errc::busy));
  auto rest = sem.acquire(4500, no_wait());
  ASSERT_TRUE(rest.ok()) << rest.error().what();
  EXPECT_EQ(raw->cmd_int({"ZCARD", permits}), 9000);
  EXPECT_TRUE(big->release().ok());
  EXPECT_TRUE(rest->release().ok());
  EXPECT_EQ(raw->cmd_int({"ZCARD", permits}), 0);
}

// A permit removed behind the holder's back: on_lost(taken), and release reports lock_lost.
TEST_F(SemaphoreTest, LossIsReported) {
  LossProbe probe;
  auto opts = watchdog(600ms);
  probe.attach(opts);
  dlock::Semaphore sem(*client, "loss", 2, opts);
  auto permit = sem.acquire(1, no_wait());
  ASSERT_TRUE(permit.ok()) << permit.error().what();
  ASSERT_EQ(raw->cmd_int({"ZREM", sem.key() + ":permits", permit->owner() + "#1"}), 1);
  ASSERT_TRUE(eventually([&] { return probe.calls.load() == 1; }, 2000ms)) << "loss not reported";
  EXPECT_EQ(probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_TRUE(permit->lost());
  EXPECT_EQ(permit->release().code(), make_error_code(dlock::errc::lock_lost));

  // Through the counting_semaphore members: recorded in last_error().
  sem.acquire();
  ASSERT_EQ(raw->cmd({"DEL", sem.key() + ":permits"}), "1");
  ASSERT_TRUE(eventually([&] { return probe.calls.load() == 2; }, 2000ms)) << "loss not reported";
  sem.release();
  EXPECT_EQ(sem.last_error().code, make_error_code(dlock::errc::lock_lost));
  EXPECT_EQ(raw->cmd_int({"EXISTS", sem.key() + ":permits"}), 0) << "a renewal re-created a lost permit";
}

// --------------------------------------------------------------------- changing the limit

// Raising N lets a waiter in at once; lowering N revokes nothing but keeps newcomers out until
// enough permits were released.
TEST_F(SemaphoreTest, ChangingTheLimitAtRuntime) {
  dlock::Semaphore sem(*client, "resize", 1);
  auto first = sem.acquire(1, no_wait());
  ASSERT_TRUE(first.ok()) << first.error().what();
  EXPECT_EQ(raw->cmd({"GET", sem.key() + ":limit"}), "1");
  // Another object constructed with another N uses the stored limit.
  dlock::Client oc(server->url());
  dlock::Semaphore other(oc, "resize", 10);
  EXPECT_EQ(other.permits().value(), 1u);
  EXPECT_EQ(other.acquire(1, no_wait()).code(), make_error_code(dlock::errc::busy));

  auto fut = std::async(std::launch::async, [&] {
    auto r = other.acquire(1, dlock::WaitOptions{8000ms, 10000ms});
    return std::make_pair(std::move(r), SteadyClock::now());
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(fut.wait_for(0ms), std::future_status::timeout);
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(sem.set_permits(3).ok());
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
  auto [second, t1] = fut.get();
  ASSERT_TRUE(second.ok()) << second.error().what();
  EXPECT_LT(t1 - t0, 700ms) << "the waiter was not woken by the new limit";
  EXPECT_EQ(raw->cmd({"GET", sem.key() + ":limit"}), "3");
  auto third = sem.acquire(1, no_wait());
  ASSERT_TRUE(third.ok()) << third.error().what();
  EXPECT_EQ(sem.acquire(1, no_wait()).code(), make_error_code(dlock::errc::busy)) << "a 4th permit of 3";

  // Lower to 1 while 3 are held: nobody loses a permit.
  ASSERT_TRUE(sem.set_permits(1).ok());
  EXPECT_EQ(sem.permits().value(), 1u);
  EXPECT_EQ(sem.available().value(), 0u);
  EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 3);
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(first->held() && second->held() && third->held());
  EXPECT_EQ(sem.acquire(1, no_wait()).code(), make_error_code(dlock::errc::busy));
  ASSERT_TRUE(first->release().ok());
  ASSERT_TRUE(second->release().ok());
  EXPECT_EQ(sem.acquire(1, no_wait()).code(), make_error_code(dlock::errc::busy)) << "1 held, limit 1";
  ASSERT_TRUE(third->release().ok());
  auto again = sem.acquire(1, no_wait());
  EXPECT_TRUE(again.ok()) << again.error().what();
  EXPECT_EQ(sem.acquire(1, no_wait()).code(), make_error_code(dlock::errc::busy));
}

// ---------------------------------------------------------------------------- wrong type

TEST_F(SemaphoreTest, WrongTypeOnKeysOfAnotherKind) {
  const auto wrong = make_error_code(dlock::errc::wrong_type);
  {
    ASSERT_EQ(raw->cmd({"SET", key_of("str-permits") + ":permits", "x"}), "OK");
    dlock::Semaphore sem(*client, "str-permits", 2);
    auto r = sem.acquire(1, no_wait());
    EXPECT_EQ(r.code(), wrong);
    EXPECT_NE(r.error().what().find("Semaphore"), std::string::npos) << r.error().what();
    EXPECT_THROW(sem.acquire(), std::system_error);
    EXPECT_EQ(sem.set_permits(3).code(), wrong);
    EXPECT_EQ(sem.available().code(), wrong);
    EXPECT_EQ(raw->cmd({"GET", key_of("str-permits") + ":permits"}), "x");
  }
  {
    ASSERT_EQ(raw->cmd_int({"LPUSH", key_of("list-limit") + ":limit", "3"}), 1);
    dlock::Semaphore sem(*client, "list-limit", 2);
    auto r = sem.acquire(1, no_wait());
    EXPECT_EQ(r.code(), wrong);
    EXPECT_NE(r.error().what().find(":limit"), std::string::npos) << "names the key: " << r.error().what();
    EXPECT_EQ(sem.acquire(1, wait_for(300ms)).code(), wrong) << "a waiting acquire too";
    EXPECT_EQ(sem.set_permits(3).code(), wrong);
    EXPECT_EQ(sem.permits().code(), wrong);
    EXPECT_EQ(raw->cmd_int({"LLEN", key_of("list-limit") + ":limit"}), 1) << "set_permits overwrote a list";
  }
  {
    // The types are checked where a command fails, not up front: a semaphore in use whose
    // permits key is replaced behind its back still reports wrong_type, not a script error.
    dlock::Semaphore sem(*client, "replaced", 2);
    auto held = sem.acquire(1, no_wait());
    ASSERT_TRUE(held.ok()) << held.error().what();
    ASSERT_EQ(raw->cmd({"DEL", sem.key() + ":permits"}), "1");
    ASSERT_EQ(raw->cmd_int({"HSET", sem.key() + ":permits", "f", "v"}), 1);
    auto r = sem.acquire(1, no_wait());
    EXPECT_EQ(r.code(), wrong);
    EXPECT_NE(r.error().what().find(":permits"), std::string::npos) << r.error().what();
    EXPECT_NE(r.error().what().find("hash"), std::string::npos) << r.error().what();
    EXPECT_EQ(sem.available().code(), wrong);
    EXPECT_EQ(sem.set_permits(3).code(), wrong);
    EXPECT_EQ(raw->cmd({"GET", sem.key() + ":limit"}), "2") << "set_permits wrote despite the error";
  }
  {
    // A Mutex holds the name.
    dlock::Mutex mutex(*client, "kinds");
    auto held = mutex.acquire(no_wait());
    ASSERT_TRUE(held.ok());
    dlock::Semaphore sem(*client, "kinds", 2);
    EXPECT_EQ(sem.acquire(1, no_wait()).code(), wrong);
    EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("kinds") + ":permits"}), 0);
  }
}

// A fencing counter that holds no number, or a key of another type, gives the {-1, type, key}
// reply the script promises (it was a raw script error), and no permit is taken.
TEST_F(SemaphoreTest, AFenceThatIsNoCounterIsRefusedByName) {
  const auto wrong = make_error_code(dlock::errc::wrong_type);
  dlock::Semaphore sem(*client, "bad-fence", 2);
  ASSERT_EQ(raw->cmd({"SET", sem.key() + ":fence", "abc"}), "OK");
  auto r = sem.acquire(1, no_wait());
  EXPECT_EQ(r.code(), wrong) << (r.ok() ? std::string("acquired") : r.error().what());
  if (!r.ok()) {
    EXPECT_NE(r.error().what().find(":fence"), std::string::npos) << "names the key: " << r.error().what();
    EXPECT_NE(r.error().what().find("not a counter"), std::string::npos) << r.error().what();
  }
  EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 0) << "a permit was taken";
  ASSERT_EQ(raw->cmd_int({"DEL", sem.key() + ":fence"}), 1);
  ASSERT_EQ(raw->cmd_int({"SADD", sem.key() + ":fence", "1"}), 1);
  auto s2 = sem.acquire(1, no_wait());
  EXPECT_EQ(s2.code(), wrong) << (s2.ok() ? std::string("acquired") : s2.error().what());
  if (!s2.ok()) {
    EXPECT_NE(s2.error().what().find("set"), std::string::npos) << s2.error().what();
  }
  EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 0) << "a permit was taken";
}

// A stored limit that is no count (someone's hand, another tool) is refused by name and left as
// it was: acquire() used to overwrite it with the constructor's permits, available() to fail
// with an unreadable reply. set_permits() is how it is repaired.
TEST_F(SemaphoreTest, AStoredLimitThatIsNoCountIsRefusedByNameAndKept) {
  const auto wrong = make_error_code(dlock::errc::wrong_type);
  dlock::Semaphore sem(*client, "bad-limit", 2);
  for (const char* stored : {"abc", "1e5", "2.5", "-1", " 3", "0x10", ""}) {
    ASSERT_EQ(raw->cmd({"SET", sem.key() + ":limit", stored}), "OK");
    auto r = sem.acquire(1, no_wait());
    EXPECT_EQ(r.code(), wrong) << "'" << stored << "': " << (r.ok() ? std::string("acquired") : r.error().what());
    if (!r.ok()) {
      EXPECT_NE(r.error().what().find(":limit"), std::string::npos) << "names the key: " << r.error().what();
      EXPECT_NE(r.error().what().find("not a limit"), std::string::npos) << r.error().what();
    }
    EXPECT_EQ(raw->cmd_int({"ZCARD", sem.key() + ":permits"}), 0) << "'" << stored << "': a permit was taken";
    EXPECT_EQ(raw->cmd({"GET", sem.key() + ":limit"}), stored) << "the stored limit was overwritten";
    auto avail = sem.available();
    EXPECT_EQ(avail.code(), wrong) << "'" << stored << "': "
                                   << (avail.ok() ? std::to_string(*avail) : avail.error().what());
    if (!avail.ok()) {
      EXPECT_NE(avail.error().what().find("not a limit"), std::string::npos) << avail.error().what();
    }
    EXPECT_EQ(sem.permits().code(), wrong) << stored;
  }
  // A count is a count, leading zeros and all; set_permits() repairs a bad one.
  ASSERT_EQ(raw->cmd({"SET", sem.key() + ":limit", "03"}), "OK");
  auto three = sem.permits();
  ASSERT_TRUE(three.ok()) << three.error().what();
  EXPECT_EQ(*three, 3u);
  ASSERT_EQ(raw->cmd({"SET", sem.key() + ":limit", "abc"}), "OK");
  ASSERT_TRUE(sem.set_permits(1).ok());
  auto one = sem.acquire(1, no_wait());
  ASSERT_TRUE(one.ok()) << one.error().what();
  EXPECT_EQ(sem.acquire(1, no_wait()).code(), make_error_code(dlock::errc::busy)) << "the repaired limit of 1";
  EXPECT_TRUE(one->release().ok());

  // However long: a limit of SIZE_MAX ("no limit" to some callers) is a count too.
  dlock::Semaphore unbounded(*client, "huge-limit", std::numeric_limits<std::size_t>::max());
  auto first = unbounded.acquire(1, no_wait());
  ASSERT_TRUE(first.ok()) << first.error().what();
  EXPECT_EQ(raw->cmd({"GET", unbounded.key() + ":limit"}), std::to_string(std::numeric_limits<std::size_t>::max()));
  auto second = unbounded.acquire(1, no_wait());
  EXPECT_TRUE(second.ok()) << "the stored limit was read as no count: " << second.error().what();
}

// ---------------------------------------------------------------------- the name's claim

dlock::LeaseOptions fixed(milliseconds ttl) {
  dlock::LeaseOptions o;
  o.mode = dlock::LeaseMode::fixed_ttl;
  o.ttl = ttl;
  return o;
}

// While a permit is held, P{N} is the Semaphore's claim on the name (a hash kind=Semaphore), so
// every other kind of the same name is refused; the last release frees the name at once.
TEST_F(SemaphoreTest, OtherKindsOfTheSameNameAreRefusedWhilePermitsAreHeld) {
  const auto wrong = make_error_code(dlock::errc::wrong_type);
  dlock::Semaphore sem(*client, "claimed", 2);
  const std::string key = sem.key();
  auto a = sem.acquire(1, no_wait());
  auto b = sem.acquire(1, no_wait());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(raw->cmd({"HGET", key, "kind"}), "Semaphore");

  dlock::Mutex mutex(*client, "claimed");
  dlock::FairLock fair(*client, "claimed");
  dlock::ReentrantMutex reentrant(*client, "claimed");
  dlock::SharedMutex shared(*client, "claimed");
  dlock::MultiLock multi(*client, {"claimed", "claimed-other"});
  auto refused = [&](const char* what, const dlock::Result<dlock::Lease>& r) {
    EXPECT_EQ(r.code(), wrong) << what << ": " << (r.ok() ? std::string("acquired") : r.error().what());
  };
  refused("Mutex", mutex.acquire(no_wait()));
  refused("Mutex, waiting", mutex.acquire(wait_for(300ms)));
  refused("FairLock", fair.acquire(no_wait()));
  refused("ReentrantMutex", reentrant.acquire(no_wait()));
  refused("SharedMutex, writing", shared.acquire(no_wait()));
  refused("SharedMutex, reading", shared.acquire_shared(no_wait()));
  refused("MultiLock", multi.acquire(no_wait()));
  EXPECT_EQ(raw->cmd({"HGET", key, "kind"}), "Semaphore") << "a refused kind wrote over the claim";
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("claimed-other")}), 0) << "the MultiLock kept a part";

  ASSERT_TRUE(a->release().ok());
  EXPECT_EQ(raw->cmd_int({"EXISTS", key}), 1) << "a permit is still held";
  refused("Mutex, one permit left", mutex.acquire(no_wait()));
  ASSERT_TRUE(b->release().ok());
  EXPECT_EQ(raw->cmd_int({"EXISTS", key}), 0) << "the last release leaves the claim behind";
  auto m = mutex.acquire(no_wait());
  ASSERT_TRUE(m.ok()) << "the name is free at once: " << m.error().what();
  EXPECT_EQ(sem.acquire(1, no_wait()).code(), wrong) << "and now the Mutex has it";
}

// The claim lives exactly as long as the permits zset: the longest permit's TTL, lengthened by
// extensions (never shortened), and it expires with the permits of a holder that never released.
TEST_F(SemaphoreTest, TheClaimExpiresWithTheLongestPermit) {
  dlock::Semaphore lasting(*client, "claim-ttl", 3, fixed(3s));
  dlock::Semaphore brief(*client, "claim-ttl", 3, fixed(600ms));
  const std::string key = brief.key();
  auto pttl = [&](const std::string& k) { return raw->cmd_int({"PTTL", k}); };
  auto same_ttl = [&] { return std::abs(pttl(key) - pttl(key + ":permits")) <= 50; };

  auto l = lasting.acquire(1, no_wait());
  ASSERT_TRUE(l.ok());
  auto b = brief.acquire(1, no_wait());
  ASSERT_TRUE(b.ok());
  EXPECT_GT(pttl(key), 2000) << "a shorter permit shortened the claim";
  EXPECT_TRUE(same_ttl());
  ASSERT_TRUE(l->extend(4s).ok());
  EXPECT_GT(pttl(key), 3000) << "an extension left the claim behind";
  EXPECT_TRUE(same_ttl());
  ASSERT_TRUE(b->extend(1s).ok());
  EXPECT_GT(pttl(key), 3000) << "a shorter extension shortened the claim";

  // Neither holder releases: claim and zset go together when the longest permit ends.
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", key + ":permits"}) == 0; }, scaled(10s)));
  EXPECT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", key}) == 0; }, 200ms)) << "the claim outlived the permits";
  EXPECT_TRUE(l->lost() && b->lost());
}

// A release leaves the claim as long as the longest permit still live, not as long as the zset,
// whose TTL a released long permit set: once the last live permit ends unreleased (its holder
// died), other kinds may take the name, though the zset with its expired entry lives on.
TEST_F(SemaphoreTest, AReleaseShrinksTheClaimToTheLongestPermitLeft) {
  dlock::Semaphore lasting(*client, "claim-shrinks", 3, fixed(30s));
  dlock::Semaphore brief(*client, "claim-shrinks", 3, fixed(800ms));
  const std::string key = brief.key();
  auto l = lasting.acquire(1, no_wait());
  auto b = brief.acquire(1, no_wait());
  ASSERT_TRUE(l.ok() && b.ok());
  EXPECT_GT(raw->cmd_int({"PTTL", key}), 25000);
  ASSERT_TRUE(l->release().ok());
  EXPECT_LE(raw->cmd_int({"PTTL", key}), 800) << "the claim kept the released permit's TTL";
  EXPECT_GT(raw->cmd_int({"PTTL", key}), 0);
  EXPECT_GT(raw->cmd_int({"PTTL", key + ":permits"}), 25000) << "(the zset's TTL only grows)";
  dlock::Mutex mutex(*client, "claim-shrinks");
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"EXISTS", key}) == 0; }, scaled(5s)));
  auto m = mutex.acquire(no_wait());
  EXPECT_TRUE(m.ok()) << "the name is free once no permit is live: " << m.error().what();
}

// Permits taken by a dlock that did not write the claim: the next acquisition writes it, with
// the zset's TTL (not the new permit's shorter one), and a renewal never touches another
// kind's key that took the name meanwhile.
TEST_F(SemaphoreTest, AMissingClaimIsWrittenAndAnotherKindsKeyIsNotRenewed) {
  dlock::Semaphore sem(*client, "claim-missing", 3, fixed(20s));
  dlock::Semaphore brief(*client, "claim-missing", 3, fixed(2s));
  const std::string key = sem.key();
  auto old = sem.acquire(1, no_wait());
  ASSERT_TRUE(old.ok());
  ASSERT_EQ(raw->cmd({"DEL", key}), "1");
  auto next = brief.acquire(1, no_wait());
  ASSERT_TRUE(next.ok()) << next.error().what();
  EXPECT_EQ(raw->cmd({"HGET", key, "kind"}), "Semaphore");
  EXPECT_GT(raw->cmd_int({"PTTL", key}), 15000) << "the claim must outlive the older, longer permit";

  // A foreign string under the name (as a Mutex writes) while permits are held: an extension
  // renews the permits and leaves the string's TTL alone.
  ASSERT_EQ(raw->cmd({"SET", key, "someone", "PX", "5000"}), "OK");
  ASSERT_TRUE(old->extend(30s).ok());
  EXPECT_LE(raw->cmd_int({"PTTL", key}), 5000) << "a Semaphore renewal lengthened another kind's key";
  EXPECT_GT(raw->cmd_int({"PTTL", key + ":permits"}), 25000);
  ASSERT_TRUE(old->release().ok());
  ASSERT_TRUE(next->release().ok());
  EXPECT_EQ(raw->cmd({"GET", key}), "someone") << "a Semaphore release deleted another kind's key";
}

// One permit, so one holder at a time: the Client's wait queue is keyed P{N}:permits, the first
// key of sem_release, which the hold-back is keyed by.
TEST_F(SemaphoreTest, ReleasingProcessLetsAWaiterElsewhereGoFirst) {
  dlock::Semaphore mine(*client, "courtesy", 1);
  dlock::Client other_client(server->url());
  dlock::Semaphore theirs(other_client, "courtesy", 1);
  const dlock::WaitOptions wait{10000ms, 10000ms};
  const int won = dlock::test::rounds_the_other_client_went_first(
      *raw, key_of("courtesy") + ":ch", [&] { return mine.acquire(1, wait); }, [&] { return theirs.acquire(1, wait); });
  EXPECT_GE(won, 8) << "the other Client's waiter went first in only " << won << " of 10 rounds";
}

// A release reports how many subscribers its notification reached (2 + n); the releasing Client
// holds its next try back on P{N}:permits, KEYS[1], its wait queue's key.
TEST_F(SemaphoreTest, ReleaseReportsTheSubscribersItNotified) {
  dlock::Semaphore sem(*client, "notified", 2);
  const std::string key = key_of("notified");
  dlock::test::RawConnection listener(*server);
  ASSERT_EQ(listener.cmd_array({"SUBSCRIBE", key + ":ch"}).size(), 3u);
  auto lease = sem.acquire(1, no_wait());
  ASSERT_TRUE(lease.ok());
  const auto& script = dlock::detail::scripts::sem_release;
  EXPECT_EQ(raw->cmd({"EVAL", script.source, "3", key + ":permits", key + ":released", key, lease->owner(),
                      key + ":ch", "30000", "1"}),
            "3");
  EXPECT_EQ(raw->cmd_int({"ZCARD", key + ":permits"}), 0);
}

}  // namespace
