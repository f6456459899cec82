// Lease::release() on one thread while another destroys the lease's Client, in the two windows
// between release()'s check for the shutdown and its claim on the lease. A test seam
// (locks/release_seam.hpp) runs inside that window; the shutdown is put there, and the slow
// link of a FaultProxy (300 ms each way) keeps the shutdown's step 1 in flight meanwhile.
//
// What release() must say either way is what became of the key: released by the shutdown
// (success), or lost (lock_lost), not success while the shutdown's release is still unanswered,
// and not "expires at its TTL" for a lease the shutdown could still release.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include "client_core.hpp"
#include "dlock/dlock.hpp"
#include "io/command.hpp"
#include "locks/release_seam.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_helpers.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::no_wait;
using std::chrono::milliseconds;

// The seam is a plain function pointer; it runs the test's action once, on the first release
// that reaches it after arm() (the fixture's own releases pass through untouched).
std::function<void()> seam_action;
std::atomic<bool> seam_armed{false};
void run_seam() {
  if (seam_armed.exchange(false)) seam_action();
}

class ReleaseAtShutdownTest : public dlock::test::ServerFixture {
 protected:
  void SetUp() override {
    ServerFixture::SetUp();
    dlock::detail::release_claim_seam.store(&run_seam);
  }
  void TearDown() override {
    seam_armed.store(false);
    dlock::detail::release_claim_seam.store(nullptr);
    seam_action = {};
    ServerFixture::TearDown();
  }
  void arm(std::function<void()> action) {
    seam_action = std::move(action);
    seam_armed.store(true);
  }
  long long exists(const std::string& key) { return raw->cmd_int({"EXISTS", key}); }
  std::string get(const std::string& key) { return raw->cmd({"GET", key}); }
};

// The shutdown's step 1 claims the lease after release() found no shutdown, and sends its own
// release, which finds the key taken over. release() used to see the lease "being released by
// another thread" and return success at once; it now awaits step 1 and reports the loss.
TEST_F(ReleaseAtShutdownTest, AReleaseThatStepOneClaimedFirstReportsStepOnesOutcome) {
  dlock::test::FaultProxy proxy("127.0.0.1", server->port());
  dlock::ClientOptions options;
  options.shutdown_timeout = 6000ms;
  auto going = std::make_unique<dlock::Client>(proxy.url(), options);
  dlock::Mutex m(*going, "claimed-by-shutdown");
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  raw->cmd({"SET", m.key(), "someone-else", "PX", "60000"});

  std::promise<void> in_window;
  std::atomic<bool> claimed_by_step_one{false};
  arm([&] {
    in_window.set_value();
    // Held until the shutdown's step 1 has claimed the lease (its release then takes 600 ms).
    claimed_by_step_one.store(eventually([&] { return !lease->held(); }, 5000ms));
  });
  std::promise<std::error_code> released;
  std::thread worker([&] { released.set_value(lease->release().code()); });
  ASSERT_EQ(in_window.get_future().wait_for(5s), std::future_status::ready);
  proxy.delay(300ms);
  going.reset();
  worker.join();
  ASSERT_TRUE(claimed_by_step_one.load()) << "the shutdown never claimed the lease";
  const std::error_code code = released.get_future().get();
  EXPECT_EQ(code, make_error_code(dlock::errc::lock_lost)) << code.message();
  EXPECT_TRUE(lease->lost());
  EXPECT_EQ(get(m.key()), "someone-else");
}

// release() claims the lease just after the shutdown began, before step 1 (held back by a
// wait's cleanup over the slow link) reached it. It once kept the claim and reported that the
// key expires at its TTL, while step 1 skipped the lease. It then handed the lease back to
// step 1, which was too late when step 1 had gone past it; it now sends its release itself
// (the Client sends until it closes its connections) and reports that.
TEST_F(ReleaseAtShutdownTest, AReleaseThatClaimedAfterTheShutdownBeganIsSentAndReported) {
  dlock::test::FaultProxy proxy("127.0.0.1", server->port());
  dlock::ClientOptions options;
  options.shutdown_timeout = 6000ms;
  auto going = std::make_unique<dlock::Client>(proxy.url(), options);
  dlock::Mutex m(*going, "claimed-after-shutdown");
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  dlock::Mutex holder(*client, "claimed-after-shutdown-busy");
  auto busy = holder.acquire(no_wait());
  ASSERT_TRUE(busy.ok()) << busy.error().what();

  // A wait of the going Client: the shutdown fails it first, then sends its cleanup, and only
  // once that is answered (600 ms later) does step 1 release what is held.
  dlock::Mutex waiting(*going, "claimed-after-shutdown-busy");
  std::promise<std::error_code> waited;
  auto wait_ended = waited.get_future().share();
  std::thread waiter([&] { waited.set_value(waiting.acquire(dlock::WaitOptions{std::nullopt, 30000ms}).code()); });
  ASSERT_TRUE(eventually([&] {
    return dlock::test::channel_subscribers(*raw, key_of("claimed-after-shutdown-busy") + ":ch") >= 1;
  }, 3000ms));

  std::promise<void> in_window;
  std::atomic<bool> shutdown_seen{false};
  arm([&] {
    in_window.set_value();
    // Held until the shutdown has begun: the wait it fails first has ended.
    shutdown_seen.store(wait_ended.wait_for(5s) == std::future_status::ready);
  });
  std::promise<std::error_code> released;
  std::thread worker([&] { released.set_value(lease->release().code()); });
  ASSERT_EQ(in_window.get_future().wait_for(5s), std::future_status::ready);
  proxy.delay(300ms);
  going.reset();
  worker.join();
  waiter.join();
  ASSERT_TRUE(shutdown_seen.load()) << "the shutdown never ended the wait";
  EXPECT_EQ(wait_ended.get(), make_error_code(dlock::errc::shutdown)) << wait_ended.get().message();
  const std::error_code code = released.get_future().get();
  EXPECT_FALSE(code) << code.message();
  EXPECT_EQ(exists(m.key()), 0) << "the lease was left to its TTL";
  EXPECT_TRUE(busy->release().ok());
}

// A command sent while the shutdown's step 1 is under way (releasing what the Client holds, over
// a slow link) still goes out: a release claimed by its caller just before the shutdown began
// is sent a moment after it, and step 1 leaves such a lease to that caller. It used to be
// refused as soon as the shutdown began, and the key sat out its TTL.
TEST_F(ReleaseAtShutdownTest, ACommandSentWhileStepOneRunsStillGoesOut) {
  dlock::test::FaultProxy proxy("127.0.0.1", server->port());
  dlock::ClientOptions options;
  options.shutdown_timeout = 6000ms;
  auto going = std::make_unique<dlock::Client>(proxy.url(), options);
  auto core = going->core();
  dlock::Mutex m(*going, "held-at-shutdown");
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  proxy.delay(300ms);  // step 1's release of that lease takes 600 ms
  std::thread destroyer([&] { going.reset(); });
  ASSERT_TRUE(eventually([&] { return core->is_shut_down(); }, 5000ms));
  auto answer = std::make_shared<std::promise<std::error_code>>();
  core->send(dlock::detail::format_command({"SET", "sent-during-step-one", "1"}),
             [answer](dlock::Result<dlock::Reply> r) { answer->set_value(r.code()); });
  destroyer.join();
  // Its reply may come after the connections closed; what counts is that it was sent.
  EXPECT_TRUE(eventually([&] { return exists("sent-during-step-one") == 1; }, 3000ms))
      << "refused: " << answer->get_future().get().message();
  EXPECT_EQ(exists(m.key()), 0) << "step 1 did not release the lease";
}

// An async_release made just before the Client's destruction, whose EVALSHA meets NOSCRIPT (the
// server's scripts were flushed): its EVAL is sent again behind the shutdown's first PING, and
// the shutdown waits for that too before it closes the connections.
TEST_F(ReleaseAtShutdownTest, AnAsyncReleaseRetriedAfterNoscriptAtShutdownStillGoesOut) {
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto going = std::make_unique<dlock::Client>(server->url());
    dlock::Mutex m(*going, "noscript-at-shutdown");
    // A first pair loads the scripts on the connection: its next release is an EVALSHA.
    auto first = m.acquire(no_wait());
    ASSERT_TRUE(first.ok()) << first.error().what();
    ASSERT_TRUE(first->release().ok());
    auto lease = m.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    raw->cmd({"SCRIPT", "FLUSH"});
    auto answer = std::make_shared<std::promise<std::error_code>>();
    lease->async_release([answer](dlock::Result<void> r) { answer->set_value(r.code()); });
    going.reset();
    auto code = answer->get_future();
    ASSERT_EQ(code.wait_for(5s), std::future_status::ready) << "never answered";
    EXPECT_FALSE(code.get()) << "the release was cut off";
    EXPECT_EQ(exists(m.key()), 0) << "the key was left to its TTL";
    raw->cmd({"DEL", m.key()});
  }
}

}  // namespace
