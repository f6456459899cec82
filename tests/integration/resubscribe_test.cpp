// A subscription that comes back after its connection dropped tells every listener of the channel
// to re-check, whoever sent the SUBSCRIBE that restored it: a release published while the
// channel was not subscribed reached none of them.
//
// The case this guards: the subscriber connection drops; while it reconnects (its handshake held
// back by a fault proxy), a second waiter of the same Client subscribes to the same channel. Its
// SUBSCRIBE is the one that goes out (the reconnect skips a channel whose SUBSCRIBE is in
// flight), and its confirmation used to count as a first subscription, so the waiter already
// sleeping was never told to re-check and slept until its recheck interval or the holder's TTL.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "dlock/dlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/proxied_fixture.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;

class ResubscribeTest : public dlock::test::ProxiedServerFixture {};

TEST_F(ResubscribeTest, ASubscribeSentDuringTheReconnectStillWakesTheWaitersAlreadyListening) {
  const std::string name = "resub";
  const std::string channel = "dlock:{resub}:ch";
  dlock::SharedMutex writer(*client, name);
  dlock::SharedMutex first(*via_proxy, name);
  dlock::SharedMutex second(*via_proxy, name);

  auto w = writer.acquire();
  ASSERT_TRUE(w.ok()) << w.error().what();

  // Neither the recheck interval nor the writer's TTL (30 s, renewed) ends these waits in time:
  // only a notification, or a re-check on resubscription, can.
  dlock::WaitOptions opts;
  opts.timeout = 10000ms;
  opts.recheck_interval = 60000ms;
  auto r1 = std::async(std::launch::async, [&] { return first.acquire_shared(opts); });
  // The first reader is subscribed (its try, sent after the SUBSCRIBE was confirmed, found the
  // writer).
  ASSERT_TRUE(eventually(
      [&] {
        auto numsub = raw->cmd_array({"PUBSUB", "NUMSUB", channel});
        return numsub.size() == 2 && numsub[1] == "1";
      },
      3000ms));
  std::this_thread::sleep_for(100ms);
  ASSERT_EQ(r1.wait_for(0ms), std::future_status::timeout);

  // Connections accepted from now on have their bytes held (the command connection, accepted
  // before, still works): a reconnect hangs in its handshake. Then the server drops the
  // subscriber connection.
  const auto accepted = proxy->accepted();
  proxy->pause_new();
  ASSERT_GE(raw->cmd_int({"CLIENT", "KILL", "TYPE", "pubsub"}), 1);
  ASSERT_TRUE(eventually([&] { return proxy->accepted() >= accepted + 1; }, 3000ms))
      << "the proxied Client did not reconnect its subscriber connection";

  // The second reader's try finds the writer; it then subscribes while the channel is down:
  // its SUBSCRIBE waits in the reconnecting connection.
  auto r2 = std::async(std::launch::async, [&] { return second.acquire_shared(opts); });
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(r2.wait_for(0ms), std::future_status::timeout);

  // Published while the proxied Client has no subscription: nobody of it hears this.
  ASSERT_TRUE(w->release().ok());
  proxy->pass();

  ASSERT_EQ(r2.wait_for(8000ms), std::future_status::ready);
  auto l2 = r2.get();
  ASSERT_TRUE(l2.ok()) << l2.error().what();
  ASSERT_EQ(r1.wait_for(8000ms), std::future_status::ready)
      << "the reader already waiting was not told to re-check when its channel was subscribed again";
  auto l1 = r1.get();
  ASSERT_TRUE(l1.ok()) << l1.error().what();
}

}  // namespace
