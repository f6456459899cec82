// The waiters' roll of a Mutex (P{N}:waiters, mutex_acquire.lua / mutex_release.lua /
// mutex_withdraw.lua): a release wakes the Client whose place comes first, and only it tries;
// the other waiting Clients sleep on. Before the roll every waiting Client tried on every release
// (one failed script per waiting process per handoff: 12 client commands per acquisition with 8
// processes in dlock-bench's contended scenario).
//
// Real redis-server; each waiting Client is a separate dlock::Client, as another process would be.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "locks/multi_lock_ordered.hpp"
#include "scripts/script.hpp"
#include "support/fault_proxy.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace dlock::detail::scripts {
extern const Script mutex_withdraw;
}  // namespace dlock::detail::scripts

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::no_wait;
using dlock::test::script_calls;
using std::chrono::milliseconds;

class MutexRollTest : public dlock::test::ServerFixture {
 protected:
  long long roll_size(const std::string& name) { return raw->cmd_int({"ZCARD", key_of(name) + ":waiters"}); }
  std::vector<std::string> roll(const std::string& name) {
    return raw->cmd_array({"ZRANGE", key_of(name) + ":waiters", "0", "-1"});
  }

  // A waiter on its own Client (as another process would be), started on its own thread.
  struct Waiter {
    dlock::Client client;
    dlock::Mutex mutex;
    std::stop_source stop;
    std::future<dlock::Result<dlock::Lease>> result;
    Waiter(const std::string& url, const std::string& name) : client(url), mutex(client, name) {}
    ~Waiter() {
      stop.request_stop();
      if (result.valid()) result.wait();
    }
    void start(dlock::WaitOptions wait) {
      result = std::async(std::launch::async, [this, wait] { return mutex.acquire(wait, stop.get_token()); });
    }
    bool done_within(milliseconds d) { return result.wait_for(d) == std::future_status::ready; }
  };
  std::unique_ptr<Waiter> waiter(const std::string& name) { return std::make_unique<Waiter>(server->url(), name); }

  void multi_lock_waiter_gets_its_turn(const std::string& name, bool ordered);
  void multi_lock_release_names_the_next_mutex_waiter(const std::string& name, bool ordered);
};

// Long rechecks: in these tests only a notification may wake a waiter in time.
const dlock::WaitOptions patient{30000ms, 30000ms};

TEST_F(MutexRollTest, AReleaseWakesOnlyTheClientWhosePlaceComesFirst) {
  dlock::Mutex holder(*client, "roll");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  auto first = waiter("roll");
  first->start(patient);
  ASSERT_TRUE(eventually([&] { return roll_size("roll") == 1; }, 3000ms)) << "the first waiter took no place";
  auto second = waiter("roll");
  second->start(patient);
  ASSERT_TRUE(eventually([&] { return roll_size("roll") == 2; }, 3000ms)) << "the second waiter took no place";
  // The roll expires with its places (2.4 rechecks + 1 s): it cannot outlive its waiters.
  const long long pttl = raw->cmd_int({"PTTL", key_of("roll") + ":waiters"});
  EXPECT_GT(pttl, 60000);
  EXPECT_LE(pttl, 73000);

  const long long before = script_calls(*raw);
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(first->done_within(2000ms)) << "the first waiter was not woken";
  auto lease = first->result.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(second->done_within(0ms));
  // The release and the first waiter's try; the second waiter did not try (before the roll it
  // did, and failed: 3).
  EXPECT_EQ(script_calls(*raw) - before, 2);
  EXPECT_EQ(roll_size("roll"), 1) << "the second waiter keeps its place; the first left the roll";

  ASSERT_TRUE(lease->release().ok());
  ASSERT_TRUE(second->done_within(2000ms)) << "the second waiter was not woken";
  auto next = second->result.get();
  ASSERT_TRUE(next.ok()) << next.error().what();
  EXPECT_EQ(roll_size("roll"), 0);
  EXPECT_TRUE(next->release().ok());
}

// A Client with more waiters queued behind the one that acquired keeps a place, at the end of
// the roll: the lock goes round the Clients instead of staying in one while it has waiters.
TEST_F(MutexRollTest, AClientWithMoreWaitersKeepsAPlaceAtTheEnd) {
  dlock::Mutex holder(*client, "round");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  dlock::Client busy_client(server->url());
  dlock::Mutex busy(busy_client, "round");
  auto b1 = std::async(std::launch::async, [&] { return busy.acquire(patient); });
  ASSERT_TRUE(eventually([&] { return roll_size("round") == 1; }, 3000ms));
  std::promise<dlock::Result<dlock::Lease>> b2_done;
  auto b2 = b2_done.get_future();
  busy.async_acquire(patient, [&](dlock::Result<dlock::Lease> r) { b2_done.set_value(std::move(r)); });
  // The acquisition starts on the Client's event loop in order with this ping: once it is
  // answered, b2 is queued behind b1 in its Client (nothing sent for it).
  ASSERT_TRUE(busy_client.ping().ok());
  auto other = waiter("round");
  other->start(patient);
  ASSERT_TRUE(eventually([&] { return roll_size("round") == 2; }, 3000ms));

  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(b1.wait_for(2000ms), std::future_status::ready);
  auto l1 = b1.get();
  ASSERT_TRUE(l1.ok()) << l1.error().what();
  EXPECT_EQ(roll_size("round"), 2) << "b2 is still waiting: its Client keeps a place";

  ASSERT_TRUE(l1->release().ok());
  ASSERT_TRUE(other->done_within(2000ms)) << "the other Client's place came first";
  auto l2 = other->result.get();
  ASSERT_TRUE(l2.ok()) << l2.error().what();
  EXPECT_EQ(b2.wait_for(100ms), std::future_status::timeout);

  ASSERT_TRUE(l2->release().ok());
  ASSERT_EQ(b2.wait_for(2000ms), std::future_status::ready);
  auto l3 = b2.get();
  ASSERT_TRUE(l3.ok()) << l3.error().what();
  EXPECT_EQ(roll_size("round"), 0);
  EXPECT_TRUE(l3->release().ok());
}

// A Client whose named waiter acquired with nobody queued behind it (when its try was sent)
// leaves the roll; a waiter that queued behind it while the try was in flight must put the
// Client back on, or no release would ever name it (found in dlock-bench: the other process took
// every turn until this one's recheck). The slow link (300 ms each way) makes that window wide.
TEST_F(MutexRollTest, AWaiterQueuedBehindAnAcquiringTryPutsItsClientBackOnTheRoll) {
  dlock::test::FaultProxy proxy("127.0.0.1", server->port());
  dlock::Client slow_client(proxy.url());
  dlock::Mutex slow(slow_client, "behind");
  dlock::Mutex holder(*client, "behind");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  std::promise<dlock::Result<dlock::Lease>> first_done, second_done;
  slow.async_acquire(patient, [&](dlock::Result<dlock::Lease> r) { first_done.set_value(std::move(r)); });
  ASSERT_TRUE(eventually([&] { return roll_size("behind") == 1; }, 3000ms));

  proxy.delay(300ms);
  ASSERT_TRUE(held->release().ok());  // names the slow Client; its try (alone) is sent ~300 ms later
  std::this_thread::sleep_for(550ms);  // the try is in flight (its answer is due at ~900 ms)
  slow.async_acquire(patient, [&](dlock::Result<dlock::Lease> r) { second_done.set_value(std::move(r)); });
  auto first = first_done.get_future();
  ASSERT_EQ(first.wait_for(3000ms), std::future_status::ready);
  auto lease = first.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_TRUE(eventually([&] { return roll_size("behind") == 1; }, 3000ms))
      << "the second waiter waits without a place: no release would name its Client";

  proxy.pass();
  auto second = second_done.get_future();
  ASSERT_TRUE(lease->release().ok());
  ASSERT_EQ(second.wait_for(3000ms), std::future_status::ready);
  auto next = second.get();
  ASSERT_TRUE(next.ok()) << next.error().what();
  EXPECT_TRUE(next->release().ok());
}

// A waiter that gives up gives its place back, so the next release wakes a Client still waiting
// instead of naming one that no longer listens (whose turn nobody would take until a recheck).
TEST_F(MutexRollTest, AWaiterThatGivesUpGivesItsPlaceBack) {
  dlock::Mutex holder(*client, "give-up");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  auto quitter = waiter("give-up");
  quitter->start(dlock::WaitOptions{400ms, 30000ms});
  ASSERT_TRUE(eventually([&] { return roll_size("give-up") == 1; }, 3000ms));
  auto stayer = waiter("give-up");
  stayer->start(patient);
  ASSERT_TRUE(eventually([&] { return roll_size("give-up") == 2; }, 3000ms));

  ASSERT_TRUE(quitter->done_within(3000ms));
  auto gave_up = quitter->result.get();
  ASSERT_FALSE(gave_up.ok());
  EXPECT_EQ(gave_up.code(), make_error_code(dlock::errc::timeout));
  ASSERT_TRUE(eventually([&] { return roll_size("give-up") == 1; }, 3000ms)) << "the place was not given back";

  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(stayer->done_within(2000ms)) << "the release named the waiter that had given up";
  auto lease = stayer->result.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_TRUE(lease->release().ok());
}

// Destroying a Client that holds the lock and also waits for it: its waiters leave the roll
// before the lease is released, so the release names the next Client. Before, the shutdown sent
// no withdrawal at all: the release named the Client going away (still subscribed, so the
// PUBLISH was heard and the release stopped there), and the other Client slept on to its
// recheck (30 s here). With two waiters of its own, the second no longer becomes head while the
// first is failed: its try, on the other of two connections, could land after the withdrawal
// and put the place back. That order is rare on loopback (without the fix the case passed 12
// tries of 12), so the case guards the two-waiter shutdown rather than proving the race.
TEST_F(MutexRollTest, ShutdownGivesItsPlaceBackBeforeItsReleaseNamesTheNextClient) {
  // Only the roll may wake the next waiter in time: a keyspace listener would wake it on `del`.
  ASSERT_EQ(raw->cmd_array({"CONFIG", "GET", "notify-keyspace-events"}).at(1), "");
  struct Case {
    unsigned conns;
    int own_waiters;
  };
  for (const Case c : {Case{1, 1}, Case{2, 1}, Case{2, 2}}) {
    SCOPED_TRACE("connections_per_node " + std::to_string(c.conns) + ", own waiters " + std::to_string(c.own_waiters));
    const std::string name = "shutdown-roll-" + std::to_string(c.conns) + "-" + std::to_string(c.own_waiters);
    dlock::ClientOptions o;
    o.connections_per_node = c.conns;
    auto going = std::make_unique<dlock::Client>(server->url(), o);
    auto holder = std::make_shared<dlock::Mutex>(*going, name);
    auto held = holder->acquire(no_wait());
    ASSERT_TRUE(held.ok()) << held.error().what();
    auto own_waiter = std::make_shared<dlock::Mutex>(*going, name);
    std::vector<std::future<dlock::Result<dlock::Lease>>> own;
    for (int i = 0; i < c.own_waiters; ++i) {
      own.push_back(std::async(std::launch::async, [own_waiter] { return own_waiter->acquire(patient); }));
    }
    ASSERT_TRUE(eventually([&] { return roll_size(name) == 1; }, 3000ms)) << "the own waiters took no place";
    auto next = waiter(name);
    next->start(patient);
    ASSERT_TRUE(eventually([&] { return roll_size(name) == 2; }, 3000ms)) << "the next waiter took no place";

    going.reset();
    for (auto& f : own) {
      ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
      auto r = f.get();
      EXPECT_EQ(r.code(), make_error_code(dlock::errc::shutdown))
          << (r.ok() ? "acquired on a Client being destroyed" : r.error().what());
    }
    ASSERT_TRUE(next->done_within(3000ms)) << "the shutdown's release named the Client going away";
    auto lease = next->result.get();
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    EXPECT_EQ(raw->cmd({"GET", key_of(name)}), lease->owner());
    EXPECT_EQ(roll_size(name), 0);
    EXPECT_TRUE(lease->release().ok());
  }
}

// A place whose Client no longer listens on its channel (the process died, its connections
// closed) is passed over by the release at once: nobody heard the PUBLISH.
TEST_F(MutexRollTest, APlaceWhoseClientNoLongerListensIsPassedOver) {
  dlock::Mutex holder(*client, "gone");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  // The place of a Client that does not exist, first on the roll (it lapses before the live
  // waiter's: 2.4 rechecks + 1 s).
  ASSERT_EQ(raw->cmd_int({"ZADD", key_of("gone") + ":waiters", std::to_string(raw->server_ms() + 20000), "0123456789abcdef"}), 1);
  auto live = waiter("gone");
  live->start(dlock::WaitOptions{30000ms, 30000ms});
  ASSERT_TRUE(eventually([&] { return roll_size("gone") == 2; }, 3000ms));
  ASSERT_EQ(roll("gone").front(), "0123456789abcdef");

  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(live->done_within(2000ms)) << "the release named the gone Client and stopped there";
  auto lease = live->result.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_EQ(roll_size("gone"), 0);
  EXPECT_TRUE(lease->release().ok());
}

// A Client that still listens but does not act on its turn (hung) costs the others one recheck,
// once: the release used its place up.
TEST_F(MutexRollTest, AHungClientsPlaceCostsOneRecheckOnce) {
  dlock::Mutex holder(*client, "hung");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  // Listens on its channel and never does anything else.
  dlock::test::RawConnection hung(*server);
  ASSERT_FALSE(hung.cmd_array({"SUBSCRIBE", key_of("hung") + ":ch:0123456789abcdef"}).empty());
  // Its place lapses before the live waiter's (2.4 × 300 ms + 1 s), so it comes first.
  ASSERT_EQ(raw->cmd_int({"ZADD", key_of("hung") + ":waiters", std::to_string(raw->server_ms() + 1500), "0123456789abcdef"}), 1);

  auto live = waiter("hung");
  live->start(dlock::WaitOptions{30000ms, 300ms});
  ASSERT_TRUE(eventually([&] { return roll_size("hung") == 2; }, 3000ms));
  EXPECT_EQ(roll("hung").front(), "0123456789abcdef");

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(live->done_within(3000ms)) << "the live waiter never took the free lock";
  auto lease = live->result.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LE(std::chrono::steady_clock::now() - t0, 1500ms);
  for (const auto& id : roll("hung")) EXPECT_NE(id, "0123456789abcdef") << "the hung place was named and is gone";
  EXPECT_TRUE(lease->release().ok());
}

// The withdraw script passes a free lock's turn on: a release may have named the Client just
// before it stopped listening.
TEST_F(MutexRollTest, WithdrawingFromAFreeLockNamesTheNextWaiter) {
  const std::string roll_key = key_of("pass") + ":waiters";
  const std::string until = std::to_string(raw->server_ms() + 20000);
  ASSERT_EQ(raw->cmd_int({"ZADD", roll_key, until, "aaaa", until, "bbbb"}), 2);
  const std::string withdraw = dlock::detail::scripts::mutex_withdraw.source;  // as the library runs it
  // Held: the place is given back, nobody is named.
  ASSERT_EQ(raw->cmd({"SET", key_of("pass"), "someone"}), "OK");
  EXPECT_EQ(raw->cmd_int({"EVAL", withdraw, "2", key_of("pass"), roll_key, "aaaa", key_of("pass") + ":ch"}), 0);
  EXPECT_EQ(roll("pass"), std::vector<std::string>{"bbbb"});
  // Free: the next place is used up (named), on its Client's channel.
  dlock::test::RawConnection listener(*server);
  ASSERT_FALSE(listener.cmd_array({"SUBSCRIBE", key_of("pass") + ":ch:bbbb"}).empty());
  ASSERT_EQ(raw->cmd_int({"ZADD", roll_key, until, "aaaa"}), 1);
  ASSERT_EQ(raw->cmd_int({"DEL", key_of("pass")}), 1);
  EXPECT_EQ(raw->cmd_int({"EVAL", withdraw, "2", key_of("pass"), roll_key, "aaaa", key_of("pass") + ":ch"}), 1);
  EXPECT_EQ(roll_size("pass"), 0);
}

// A MultiLock waiter listens on P{N}:ch only, where a release that names a Mutex waiter's Client
// says nothing. Its busy try leaves the shared place '*' on each busy lock's roll; when that
// place's turn comes, the release wakes every waiting process. Places of two listening (fake)
// Clients around it keep the roll from running dry: a dry roll wakes everyone anyway, which is
// how a MultiLock waiter heard of a release before it took places, 500 ms late at worst.
void MutexRollTest::multi_lock_waiter_gets_its_turn(const std::string& name, bool ordered) {
  const std::string roll_key = key_of(name) + ":waiters";
  const std::string ch = key_of(name) + ":ch";
  dlock::Mutex holder(*client, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::test::RawConnection first_listens(*server), last_listens(*server);
  ASSERT_FALSE(first_listens.cmd_array({"SUBSCRIBE", ch + ":first"}).empty());
  ASSERT_FALSE(last_listens.cmd_array({"SUBSCRIBE", ch + ":last"}).empty());
  // The MultiLock's place will count for 2.4 rechecks + 1 s = 73 s: between these two.
  const long long now = raw->server_ms();
  ASSERT_EQ(raw->cmd_int({"ZADD", roll_key, std::to_string(now + 60000), "first", std::to_string(now + 200000), "last"}), 2);

  dlock::Client other(server->url());
  dlock::MultiLock multi(other, {name, name + "_b"});
  if (ordered) dlock::detail::MultiLockAccess::force_ordered(multi);
  ASSERT_EQ(dlock::detail::MultiLockAccess::ordered(multi), ordered);
  std::stop_source stop;
  auto result = std::async(std::launch::async, [&] { return multi.acquire(patient, stop.get_token()); });
  dlock::test::StopAtExit<std::future<dlock::Result<dlock::Lease>>> stop_at_exit{stop, &result};
  ASSERT_TRUE(eventually([&] { return roll(name).size() == 3; }, 3000ms)) << "the MultiLock waiter took no place";
  EXPECT_EQ(roll(name), (std::vector<std::string>{"first", "*", "last"}));
  EXPECT_TRUE(roll(name + "_b").empty()) << "a place on the roll of a lock that was free";

  // "first" is named; the MultiLock waiter sleeps on.
  ASSERT_TRUE(held->release().ok());
  std::this_thread::sleep_for(300ms);
  EXPECT_NE(result.wait_for(0ms), std::future_status::ready) << "woken by a release that named another Client";
  EXPECT_EQ(roll(name), (std::vector<std::string>{"*", "last"}));

  // The test takes "first"'s turn; its release comes to the '*' place: every waiting process
  // wakes, and the MultiLock takes its set ("last" would have been named without the place).
  auto again = holder.acquire(no_wait());
  ASSERT_TRUE(again.ok()) << again.error().what();
  ASSERT_TRUE(again->release().ok());
  ASSERT_EQ(result.wait_for(2000ms), std::future_status::ready) << "the '*' place did not wake the MultiLock";
  auto lease = result.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_EQ(roll(name), std::vector<std::string>{"last"});
  EXPECT_TRUE(lease->release().ok());
}

TEST_F(MutexRollTest, AMultiLockWaiterGetsItsTurnOnTheRoll) { multi_lock_waiter_gets_its_turn("mturn", false); }

TEST_F(MutexRollTest, AnOrderedMultiLockWaiterGetsItsTurnOnTheRoll) {
  multi_lock_waiter_gets_its_turn("mturn_o", true);
}

// A MultiLock's release gives each lock's next turn as a Mutex release does: the Client whose
// place comes first is named and only it tries. Before, the MultiLock published 'released' on
// P{N}:ch and every waiting Client tried (one failed script per other waiting process).
void MutexRollTest::multi_lock_release_names_the_next_mutex_waiter(const std::string& name, bool ordered) {
  dlock::MultiLock multi(*client, {name, name + "_b"});
  if (ordered) dlock::detail::MultiLockAccess::force_ordered(multi);
  auto held = multi.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();

  auto first = waiter(name);
  first->start(patient);
  ASSERT_TRUE(eventually([&] { return roll_size(name) == 1; }, 3000ms)) << "the first waiter took no place";
  auto second = waiter(name);
  second->start(patient);
  ASSERT_TRUE(eventually([&] { return roll_size(name) == 2; }, 3000ms)) << "the second waiter took no place";

  const long long before = script_calls(*raw);
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(first->done_within(2000ms)) << "the first waiter was not woken";
  auto lease = first->result.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(second->done_within(0ms));
  // The release (one script per slot group when ordered) and the first waiter's try; the
  // second waiter did not try.
  EXPECT_EQ(script_calls(*raw) - before, (ordered ? 2 : 1) + 1);
  EXPECT_EQ(roll_size(name), 1) << "the second waiter keeps its place; the first left the roll";

  ASSERT_TRUE(lease->release().ok());
  ASSERT_TRUE(second->done_within(2000ms)) << "the second waiter was not woken";
  auto next = second->result.get();
  ASSERT_TRUE(next.ok()) << next.error().what();
  EXPECT_TRUE(next->release().ok());
}

TEST_F(MutexRollTest, AMultiLockReleaseNamesTheNextMutexWaiter) {
  multi_lock_release_names_the_next_mutex_waiter("mrel", false);
}

TEST_F(MutexRollTest, AnOrderedMultiLockReleaseNamesTheNextMutexWaiter) {
  multi_lock_release_names_the_next_mutex_waiter("mrel_o", true);
}

// Withdrawing from a free lock whose next place is '*' wakes the waiters on P{N}:ch.
TEST_F(MutexRollTest, WithdrawingBeforeTheSharedPlaceWakesEveryWaiter) {
  const std::string roll_key = key_of("shared") + ":waiters";
  const std::string until = std::to_string(raw->server_ms() + 20000);
  ASSERT_EQ(raw->cmd_int({"ZADD", roll_key, until, "aaaa", until, "*"}), 2);
  const std::string withdraw = dlock::detail::scripts::mutex_withdraw.source;
  dlock::test::RawConnection listener(*server);
  ASSERT_FALSE(listener.cmd_array({"SUBSCRIBE", key_of("shared") + ":ch"}).empty());
  EXPECT_EQ(raw->cmd_int({"EVAL", withdraw, "2", key_of("shared"), roll_key, "aaaa", key_of("shared") + ":ch"}), 1);
  EXPECT_EQ(roll_size("shared"), 0);
}

// A foreign value under the roll's key is never touched; the lock works as before the roll
// (every waiter is woken).
TEST_F(MutexRollTest, AForeignValueUnderTheRollsKeyIsLeftAlone) {
  const std::string roll_key = key_of("foreign") + ":waiters";
  ASSERT_EQ(raw->cmd({"SET", roll_key, "not a roll"}), "OK");
  dlock::Mutex holder(*client, "foreign");
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  auto w = waiter("foreign");
  w->start(patient);
  ASSERT_TRUE(eventually([&] { return dlock::test::channel_subscribers(*raw, key_of("foreign") + ":ch") == 1; }, 3000ms));
  std::this_thread::sleep_for(200ms);  // its try found the lock busy
  ASSERT_TRUE(held->release().ok());
  ASSERT_TRUE(w->done_within(2000ms));
  auto lease = w->result.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_TRUE(lease->release().ok());
  EXPECT_EQ(raw->cmd({"GET", roll_key}), "not a roll");
  EXPECT_EQ(raw->cmd_int({"PTTL", roll_key}), -1);
}

}  // namespace
