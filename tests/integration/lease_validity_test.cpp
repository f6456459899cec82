// Lease::held(), lost() and owns_lock() follow the lease's validity itself, not only what the
// watchdog has reported: after a suspend the watchdog's timer (on a clock that stops during
// suspend) wakes late, and meanwhile a holder asking held() was told yes although its validity,
// counted on a clock that runs through suspend, had ended. A suspend cannot be made here; an
// event loop kept busy past the validity holds the watchdog back the same way.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "dlock/dlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::LossProbe;
using dlock::test::scaled;

class LeaseValidityTest : public dlock::test::ServerFixture {};

TEST_F(LeaseValidityTest, ALeaseIsNotHeldPastItsValidityBeforeTheWatchdogSaysSo) {
  LossProbe probe;
  dlock::LeaseOptions lo;
  lo.mode = dlock::LeaseMode::fixed_ttl;
  lo.ttl = 600ms;
  probe.attach(lo);
  dlock::Mutex m(*client, "runs-out", lo);
  ASSERT_TRUE(m.try_lock());
  dlock::Mutex too(*client, "runs-out-too", lo);
  auto lease = too.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  const auto taken = std::chrono::steady_clock::now();

  // The event loop is kept busy for 1.5 s: no timer of the watchdog runs meanwhile.
  std::promise<void> entered;
  dlock::Mutex blocker(*client, "blocker");
  blocker.async_acquire(dlock::WaitOptions{}, [&](dlock::Result<dlock::Lease>) {
    entered.set_value();
    std::this_thread::sleep_for(1500ms);
  });
  entered.get_future().wait();
  std::this_thread::sleep_until(taken + 800ms);
  ASSERT_EQ(probe.calls.load(), 0) << "the watchdog ran while the loop was busy";

  EXPECT_FALSE(lease->held()) << "held() past the validity";
  EXPECT_TRUE(lease->lost());
  EXPECT_EQ(lease->loss_reason(), dlock::LossReason::expired);
  EXPECT_EQ(lease->remaining(), 0ms);
  EXPECT_FALSE(m.owns_lock()) << "owns_lock() past the validity";

  // Once the loop is free the watchdog reports both, once each.
  EXPECT_TRUE(eventually([&] { return probe.calls.load() == 2; }, scaled(3s))) << probe.calls.load();
  EXPECT_TRUE(lease->lost());
  m.unlock();
}

}  // namespace
