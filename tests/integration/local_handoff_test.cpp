// A lock passed between two waiters of one process, against a real redis-server: the second
// waiter's wait must hear the first one's release, however early that release comes.
//
// The case that went wrong: the first waiter of a Client that has not waited on the lock yet
// takes it with its unsubscribed one-round-trip try; the second, now head of the process's
// queue, subscribes and would sleep without a try (the lock is "held here"). A release sent
// before that SUBSCRIBE reached the server was heard by nobody, and the second waiter slept
// until its recheck_interval (SharedMutex writers and Semaphore; Mutex got by through its
// waiters' roll).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "dlock/dlock.hpp"
#include "support/server_fixture.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Done = std::function<void(dlock::Result<dlock::Lease>)>;

struct Kind {
  const char* label;
  // Makes a lock of the kind on `c` and returns its async acquire (the lock lives as long as it).
  std::function<std::function<void(dlock::WaitOptions, Done)>(dlock::Client& c, const std::string& name)> make;
};

void PrintTo(const Kind& k, std::ostream* os) { *os << k.label; }

template <class Lock>
std::function<void(dlock::WaitOptions, Done)> exclusive(dlock::Client& c, const std::string& name) {
  auto lock = std::make_shared<Lock>(c, name);
  return [lock](dlock::WaitOptions w, Done done) { lock->async_acquire(w, std::move(done)); };
}

class LocalHandoffTest : public ServerFixture, public ::testing::WithParamInterface<Kind> {};

// Two acquisitions asked back to back on a Client that has not waited on the lock before; the
// first releases from its completion. The second must follow within a fraction of its recheck
// interval (5 s): before the fix it took 4.3-5.9 s for SharedMutex writers and Semaphore.
TEST_P(LocalHandoffTest, AnEarlyReleaseReachesTheNextWaiterOfTheProcess) {
  for (int round = 0; round < 3; ++round) {
    dlock::Client c(server->url());
    auto acquire = GetParam().make(c, "handoff-" + std::to_string(round));
    dlock::WaitOptions w;
    w.timeout = 20s;
    w.recheck_interval = 5s;
    std::promise<Clock::time_point> released;
    std::promise<std::pair<Clock::time_point, dlock::Result<dlock::Lease>>> second;
    acquire(w, [&](dlock::Result<dlock::Lease> r) {
      if (!r) {
        ADD_FAILURE() << "first acquisition: " << r.error().what();
        released.set_value(Clock::now());
        return;
      }
      dlock::Lease lease = std::move(*r);
      (void)lease.release();  // from the Client's loop: sent, not awaited
      released.set_value(Clock::now());
    });
    acquire(w, [&](dlock::Result<dlock::Lease> r) { second.set_value({Clock::now(), std::move(r)}); });
    const auto at_release = released.get_future().get();
    auto got = second.get_future();
    ASSERT_EQ(got.wait_for(10s), std::future_status::ready) << "round " << round;
    auto [at, lease] = got.get();
    ASSERT_TRUE(lease.ok()) << "round " << round << ": " << lease.error().what();
    EXPECT_LT(at - at_release, 2s) << "round " << round << ": the second waiter slept through the release ("
                                   << std::chrono::duration_cast<std::chrono::milliseconds>(at - at_release).count()
                                   << " ms)";
    EXPECT_TRUE(lease->release().ok());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, LocalHandoffTest,
    ::testing::Values(
        Kind{"Mutex", [](dlock::Client& c, const std::string& n) { return exclusive<dlock::Mutex>(c, n); }},
        Kind{"ReentrantMutex",
             [](dlock::Client& c, const std::string& n) { return exclusive<dlock::ReentrantMutex>(c, n); }},
        Kind{"FairLock", [](dlock::Client& c, const std::string& n) { return exclusive<dlock::FairLock>(c, n); }},
        Kind{"SharedMutexWriter",
             [](dlock::Client& c, const std::string& n) { return exclusive<dlock::SharedMutex>(c, n); }},
        Kind{"Semaphore",
             [](dlock::Client& c, const std::string& n) {
               auto sem = std::make_shared<dlock::Semaphore>(c, n, 1);
               return std::function<void(dlock::WaitOptions, Done)>(
                   [sem](dlock::WaitOptions w, Done done) { sem->async_acquire(1, w, std::move(done)); });
             }}),
    [](const ::testing::TestParamInfo<Kind>& p) { return std::string(p.param.label); });

}  // namespace
}  // namespace dlock::test
