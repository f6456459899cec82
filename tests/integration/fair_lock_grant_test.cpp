// A FairLock handover ("granted") to a waiter whose last try is older than the lease's validity.
// Only the head is handed the lock, and a waiter further back tries only every waiter_ttl / 3, so
// a waiter that moved up the queue without a try of its own can be handed the lock more than a
// (short) lease TTL after its last try: counted from that try, the lease would already be over.
// Such a grant is confirmed with a renewal of the granted key, and the lease counts from that
// renewal. It used to be refused: released again, handed on, and the waiter sent to the back of
// the queue, so with holds longer than the TTL no waiter that was ever third in line got the
// lock from a handover.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

#include "dlock/dlock.hpp"
#include "dlock/fair_lock.hpp"
#include "support/lock_helpers.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

class FairLockGrantTest : public ServerFixture {
 protected:
  long long queued(const std::string& name) { return raw->cmd_int({"LLEN", key_of(name) + ":queue"}); }
};

TEST_F(FairLockGrantTest, AGrantArrivingAfterTheLastTrysValidityIsConfirmedNotRefused) {
  const std::string name = "late-grant";
  dlock::LeaseOptions lease;
  lease.ttl = 600ms;  // renewed by the watchdog every 200 ms while held
  dlock::FairLockOptions fair;
  fair.waiter_ttl = 12s;  // places renewed every 4 s: the third waiter sends nothing until its grant
  const std::string url = server->url();

  dlock::Client holder_client(url);
  dlock::FairLock holder(holder_client, name, lease, fair);
  auto held = holder.acquire();
  ASSERT_TRUE(held.ok()) << held.error().what();

  // Each waiter takes the lock, holds it for `hold` (longer than the TTL for the first two) and
  // releases it; the result is its fencing token (0: it failed).
  auto waiter = [&](std::chrono::milliseconds hold) {
    return std::async(std::launch::async, [url, name, lease, fair, hold] {
      dlock::Client c(url);
      dlock::FairLock l(c, name, lease, fair);
      auto r = l.acquire();
      if (!r) return FencingToken{};
      std::this_thread::sleep_for(hold);
      const FencingToken t = r->token();
      if (!r->release()) return FencingToken{};
      return t;
    });
  };
  auto first = waiter(700ms);
  ASSERT_TRUE(eventually([&] { return queued(name) == 1; }, scaled(5s)));
  auto second = waiter(700ms);
  ASSERT_TRUE(eventually([&] { return queued(name) == 2; }, scaled(5s)));
  auto third = waiter(0ms);
  ASSERT_TRUE(eventually([&] { return queued(name) == 3; }, scaled(5s)));

  const FencingToken mine = held->token();
  ASSERT_TRUE(held->release().ok());
  const FencingToken t1 = first.get();
  const FencingToken t2 = second.get();
  const FencingToken t3 = third.get();
  ASSERT_TRUE(t1 && t2 && t3);
  EXPECT_EQ(t1.value, mine.value + 1);
  EXPECT_EQ(t2.value, t1.value + 1);
  // Handed over too: one acquisition, one token. A refused grant costs a token and the waiter's
  // own try another.
  EXPECT_EQ(t3.value, t2.value + 1) << "the grant to the third waiter was refused";
}

}  // namespace
}  // namespace dlock::test
