// Connections that go silent without a reset (FaultProxy::sever(): a host that vanished, a NAT
// or firewall that dropped an idle flow). Nothing ever arrives on them again, not even an end:
// only ClientOptions::ping_interval finds them out. The server itself stays reachable.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>

#include "dlock/dlock.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::channel_subscribers;
using dlock::test::eventually;
using dlock::test::FaultProxy;
using dlock::test::key_of;
using dlock::test::ms_since;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::scaled;
using dlock::test::SteadyClock;

class SilentPeerTest : public ::testing::Test {
 protected:
  RedisServer server;
  FaultProxy proxy{server.host(), server.port()};
  RawConnection direct{server};
};

TEST_F(SilentPeerTest, SeverSilencesOpenConnectionsAndPassesNewOnes) {
  RawConnection before("127.0.0.1", proxy.port(), 500ms);
  ASSERT_EQ(before.cmd({"PING"}), "PONG");
  proxy.sever();
  EXPECT_THROW(before.cmd({"SET", "k", "before"}), std::runtime_error) << "no answer, no reset";
  EXPECT_EQ(direct.cmd({"GET", "k"}), "(nil)");
  EXPECT_EQ(proxy.open_connections(), 1u) << "the proxy does not close the client's side";
  RawConnection after("127.0.0.1", proxy.port(), 500ms);
  EXPECT_EQ(after.cmd({"SET", "k", "after"}), "OK");
  EXPECT_EQ(direct.cmd({"GET", "k"}), "after");
}

// A waiter's connections go silent while it waits: its subscription would never deliver the
// release. With rechecks made rare (recheck_interval 60 s; the default 500 ms would hide the dead
// subscription behind a half-second delay per handoff) and the lock's TTL (30 s, renewed) far
// beyond the waiter's timeout, only the notification can wake it in time. Its PINGs find the
// dead connections, the subscription is made again on a new one, and the waiter re-checks.
TEST_F(SilentPeerTest, AWaiterWhoseConnectionsWentSilentStillSeesTheRelease) {
  dlock::Client holder_client(server.url());
  dlock::Mutex held(holder_client, "job");
  auto lease = held.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();

  dlock::ClientOptions o;
  o.ping_interval = 200ms;
  o.command_timeout = 300ms;
  o.connect_timeout = 300ms;
  dlock::Client waiter_client(proxy.url(), o);
  dlock::Mutex wanted(waiter_client, "job");
  auto waiter = std::async(std::launch::async, [&] {
    dlock::WaitOptions w;
    w.timeout = 15s;
    w.recheck_interval = 60s;
    return wanted.acquire(w);
  });
  ASSERT_TRUE(eventually([&] { return channel_subscribers(direct, key_of("job") + ":ch") == 1; }, scaled(3s)));

  proxy.sever();
  // The server drops the subscription with the connection; the waiter does not know.
  ASSERT_TRUE(eventually([&] { return channel_subscribers(direct, key_of("job") + ":ch") == 0; }, scaled(3s)));
  std::this_thread::sleep_for(100ms);
  const auto released = SteadyClock::now();
  ASSERT_TRUE(lease->release().ok());

  ASSERT_EQ(waiter.wait_for(scaled(20s)), std::future_status::ready);
  auto got = waiter.get();
  const auto took = ms_since(released);
  // ping_interval + command_timeout + a reconnect; without the PINGs only the 15 s timeout.
  EXPECT_LT(took, scaled(5s)) << took.count() << " ms";
  EXPECT_GE(proxy.accepted(), 2u) << "the waiter reconnected";
  if (got.ok()) {
    EXPECT_TRUE(got->release().ok());
  } else {
    // Woken by the new subscription, its try can meet its command connection still being
    // replaced (its own PING timed out too): a connection error, at once, as documented. Or the
    // try went out on that silent connection before its PING found it out: no reply within
    // command_timeout (errc::timeout; CI under ASan once saw this).
    EXPECT_TRUE(got.code() == dlock::errc::connection || got.code() == dlock::errc::timeout)
        << got.error().what() << " after " << took.count() << " ms";
    // While it is down (until its backoff's reconnect), tries fail at once as well.
    std::optional<dlock::Result<dlock::Lease>> again;
    ASSERT_TRUE(eventually(
        [&] {
          again.emplace(wanted.acquire(dlock::test::no_wait()));
          return again->ok();
        },
        scaled(3s), 20ms))
        << (*again).error().what();
    EXPECT_TRUE((*again)->release().ok());
  }
}

// A command connection that went silent while idle: the next acquisition would wait
// command_timeout for a reply that never comes and fail. Found out by its PING first, it is
// made anew, and the acquisition just works.
TEST_F(SilentPeerTest, AnIdleConnectionThatWentSilentIsReplacedBeforeItIsNeeded) {
  dlock::ClientOptions o;
  o.ping_interval = 200ms;
  o.command_timeout = 300ms;
  o.connect_timeout = 300ms;
  dlock::Client client(proxy.url(), o);
  ASSERT_TRUE(client.ping().ok());
  proxy.sever();
  ASSERT_TRUE(eventually([&] { return proxy.accepted() >= 2 && proxy.open_connections() == 1; }, scaled(3s)))
      << "accepted " << proxy.accepted() << ", open " << proxy.open_connections();
  dlock::Mutex m(client, "m");
  auto lease = m.acquire(dlock::test::no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_TRUE(lease->release().ok());
}

// An extension whose outcome stays unknown (it ran on the server; its replies, and those of
// every resend, never came back) may have set the shorter TTL: until the server confirms, the
// lease is valid only up to the earlier end. It went on reading as valid for the old TTL (30 s)
// while its key had 2 s left.
TEST_F(SilentPeerTest, AShorterExtensionWithAnUnknownOutcomeLowersTheValidity) {
  dlock::ClientOptions o;
  o.command_timeout = 300ms;
  o.connect_timeout = 300ms;
  o.reconnect.max = 100ms;
  dlock::Client client(proxy.url(), o);
  dlock::Mutex m(client, "ext");
  auto lease = m.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  ASSERT_GT(lease->remaining(), 20s);

  proxy.hold_replies();
  auto extended = lease->extend(2s);
  ASSERT_FALSE(extended.ok()) << "extend() got an answer through a proxy that holds every reply";
  EXPECT_LT(direct.cmd_int({"PTTL", key_of("ext")}), 2000) << "the extension ran on the server";
  EXPECT_LE(lease->remaining(), 2000ms) << "still believed valid for " << lease->remaining().count() << " ms";
  proxy.pass();
}

}  // namespace
