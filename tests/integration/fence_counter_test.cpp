// A fencing counter (P{N}:fence) that someone wrote by hand and that is no counter: every kind
// refuses to acquire under it by name, takes nothing, and leaves it as it was. A counter is a
// whole number from 0 to 2^53 - 2 (src/scripts/include/next_token.lua): a negative one
// made INCR answer zero or a negative token, which the client turned into a huge unsigned one;
// one at 2^53 or above gave tokens Lua's doubles round, so two holders could get the same.
//
// Real redis-server (three for Redlock).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/server_fixture.hpp"
#include "support/server_group.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::Result;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::no_wait;

std::string fence_of(const std::string& name) { return key_of(name) + ":fence"; }

// Texts a hand may leave in a counter. Negative ("-1": INCR answers 0, no token), past the last
// token (2^53 - 1) and far past it, at the edge of 64 bits, and no integer at all.
const std::vector<std::string> kNoCounters = {"-5",    "-1",  "9007199254740992", "99999999999999999",
                                              "9223372036854775807", "abc", "1e5", "-0"};

// The highest counter that still gives a token, and the token it gives.
constexpr const char* kTop = "9007199254740990";
constexpr std::uint64_t kTopToken = 9007199254740991ULL;

template <class T>
std::string describe(const Result<T>& r) {
  return r.ok() ? std::string("acquired") : r.code().message() + ": " + r.error().what();
}

struct Kind {
  const char* label;
  // Acquires `name` once, without waiting.
  std::function<Result<dlock::Lease>(dlock::Client&, const std::string&)> acquire;
  // The keys an acquisition writes, which a refusal must leave missing.
  std::function<std::vector<std::string>(const std::string&)> written;
};

std::vector<Kind> kinds() {
  auto lock_key = [](const std::string& n) { return std::vector<std::string>{key_of(n)}; };
  return {
      {"Mutex", [](dlock::Client& c, const std::string& n) { return dlock::Mutex(c, n).acquire(no_wait()); }, lock_key},
      {"ReentrantMutex",
       [](dlock::Client& c, const std::string& n) { return dlock::ReentrantMutex(c, n).acquire(no_wait()); },
       lock_key},
      {"FairLock", [](dlock::Client& c, const std::string& n) { return dlock::FairLock(c, n).acquire(no_wait()); },
       lock_key},
      {"SharedMutex (writer)",
       [](dlock::Client& c, const std::string& n) { return dlock::SharedMutex(c, n).acquire(no_wait()); }, lock_key},
      {"SharedMutex (reader)",
       [](dlock::Client& c, const std::string& n) { return dlock::SharedMutex(c, n).acquire_shared(no_wait()); },
       [](const std::string& n) { return std::vector<std::string>{key_of(n), key_of(n) + ":readers"}; }},
      {"Semaphore",
       [](dlock::Client& c, const std::string& n) { return dlock::Semaphore(c, n, 2).acquire(1, no_wait()); },
       [](const std::string& n) { return std::vector<std::string>{key_of(n), key_of(n) + ":permits"}; }},
      // The set's first name has the bad counter; the second, a sound one, takes no lock either.
      {"MultiLock",
       [](dlock::Client& c, const std::string& n) { return dlock::MultiLock(c, {n, n + "-b"}).acquire(no_wait()); },
       [](const std::string& n) { return std::vector<std::string>{key_of(n), key_of(n + "-b")}; }},
  };
}

class FenceCounterTest : public dlock::test::ServerFixture {
 protected:
  long long exists(const std::string& key) { return raw->cmd_int({"EXISTS", key}); }
};

TEST_F(FenceCounterTest, ACounterThatIsNoCounterIsRefusedByNameAndKept) {
  const auto wrong = make_error_code(dlock::errc::wrong_type);
  int round = 0;
  for (const Kind& kind : kinds()) {
    for (const std::string& stored : kNoCounters) {
      const std::string name = "bad-fence-" + std::to_string(round++);
      ASSERT_EQ(raw->cmd({"SET", fence_of(name), stored}), "OK");
      auto r = kind.acquire(*client, name);
      EXPECT_EQ(r.code(), wrong) << kind.label << ", counter '" << stored << "': " << describe(r);
      if (r.ok()) {
        ADD_FAILURE() << kind.label << " acquired under counter '" << stored << "' with token " << r->token().value;
        continue;
      }
      EXPECT_NE(r.error().what().find(fence_of(name)), std::string::npos)
          << kind.label << ": names the counter: " << r.error().what();
      EXPECT_NE(r.error().what().find("not a counter"), std::string::npos) << kind.label << ": " << r.error().what();
      for (const std::string& key : kind.written(name)) {
        EXPECT_EQ(exists(key), 0) << kind.label << ", counter '" << stored << "': " << key << " was written";
      }
      EXPECT_EQ(raw->cmd({"GET", fence_of(name)}), stored) << kind.label << ": the counter was changed";
    }
  }
}

// A counter of another type is named with its type, as before.
TEST_F(FenceCounterTest, ACounterOfAnotherTypeIsRefusedWithItsType) {
  const auto wrong = make_error_code(dlock::errc::wrong_type);
  int round = 0;
  for (const Kind& kind : kinds()) {
    const std::string name = "list-fence-" + std::to_string(round++);
    ASSERT_EQ(raw->cmd_int({"RPUSH", fence_of(name), "1"}), 1);
    auto r = kind.acquire(*client, name);
    EXPECT_EQ(r.code(), wrong) << kind.label << ": " << describe(r);
    if (!r.ok()) {
      EXPECT_NE(r.error().what().find("list"), std::string::npos) << kind.label << ": " << r.error().what();
    }
    for (const std::string& key : kind.written(name)) EXPECT_EQ(exists(key), 0) << kind.label << ": " << key;
    EXPECT_EQ(raw->cmd_array({"LRANGE", fence_of(name), "0", "-1"}), std::vector<std::string>{"1"}) << kind.label;
  }
}

// The bounds themselves: a counter of 2^53 - 2 gives the token 2^53 - 1, exactly (a reader
// carries the counter itself); a zero counter is seeded from the server's clock, as a missing one.
TEST_F(FenceCounterTest, TheLastCounterGivesAnExactTokenAndZeroIsSeeded) {
  const long long now_us = raw->server_ms() * 1000;
  int round = 0;
  for (const Kind& kind : kinds()) {
    const bool reader = std::string(kind.label) == "SharedMutex (reader)";
    const std::string top = "top-" + std::to_string(round);
    ASSERT_EQ(raw->cmd({"SET", fence_of(top), kTop}), "OK");
    auto r = kind.acquire(*client, top);
    ASSERT_TRUE(r.ok()) << kind.label << ": " << describe(r);
    EXPECT_EQ(r->token().value, reader ? kTopToken - 1 : kTopToken) << kind.label;
    EXPECT_TRUE(r->release().ok()) << kind.label;

    // A counter at the last token gives no more: a writer is refused, and the counter kept; a
    // reader carries it.
    const std::string last = "last-" + std::to_string(round);
    ASSERT_EQ(raw->cmd({"SET", fence_of(last), std::to_string(kTopToken)}), "OK");
    auto l = kind.acquire(*client, last);
    if (reader) {
      ASSERT_TRUE(l.ok()) << kind.label << ": " << describe(l);
      EXPECT_EQ(l->token().value, kTopToken);
      EXPECT_TRUE(l->release().ok());
    } else {
      EXPECT_EQ(l.code(), make_error_code(dlock::errc::wrong_type)) << kind.label << ": " << describe(l);
    }
    EXPECT_EQ(raw->cmd({"GET", fence_of(last)}), std::to_string(kTopToken)) << kind.label;

    const std::string zero = "zero-" + std::to_string(round++);
    ASSERT_EQ(raw->cmd({"SET", fence_of(zero), "0"}), "OK");
    auto z = kind.acquire(*client, zero);
    ASSERT_TRUE(z.ok()) << kind.label << ": " << describe(z);
    EXPECT_GE(z->token().value, static_cast<std::uint64_t>(now_us)) << kind.label << ": the zero counter was not seeded";
    EXPECT_TRUE(z->release().ok()) << kind.label;
  }
}

// Without TIME (an ACL), a name's first acquisition cannot seed its counter: it fails, takes
// nothing, and leaves the counter missing, so that the next try cannot count on from the 1 its
// INCR wrote (tokens near 1 after data loss, below those resources stored).
TEST_F(FenceCounterTest, WithoutTimeAFirstAcquisitionFailsAndLeavesNoCounter) {
  ASSERT_EQ(raw->cmd({"ACL", "SETUSER", "notime", "on", ">pw", "~*", "&*", "+@all", "-time"}), "OK");
  dlock::Client notime("redis://notime:pw@" + server->host() + ":" + std::to_string(server->port()));
  int round = 0;
  for (const Kind& kind : kinds()) {
    const std::string name = "notime-" + std::to_string(round++);
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto r = kind.acquire(notime, name);
      EXPECT_EQ(r.code(), make_error_code(dlock::errc::auth)) << kind.label << " #" << attempt << ": " << describe(r);
      EXPECT_EQ(exists(fence_of(name)), 0) << kind.label << " #" << attempt << ": the counter was left at "
                                           << raw->cmd({"GET", fence_of(name)});
      for (const std::string& key : kind.written(name)) {
        EXPECT_EQ(exists(key), 0) << kind.label << ": " << key << " was written";
      }
    }
  }
}

// A FairLock's release hands the lock to the head waiter inside the script, counting the
// head's token there. With no counter to count from, the release still releases (it used to
// fail and leave the lock held until its TTL), and the head, woken, is told why it cannot
// take the lock.
TEST_F(FenceCounterTest, AFairReleaseWithNoCounterReleasesAndTheWaiterIsToldWhy) {
  const std::string name = "fair-handover";
  dlock::FairLock holder(*client, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << describe(held);
  dlock::Client other(server->url());
  dlock::FairLock waiter(other, name);
  auto waiting = std::async(std::launch::async, [&] { return waiter.acquire(dlock::WaitOptions{10s, 30s}); });
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"LLEN", key_of(name) + ":queue"}) == 1; }, 5000ms));
  ASSERT_EQ(raw->cmd({"SET", fence_of(name), "-5"}), "OK");

  auto released = held->release();
  EXPECT_TRUE(released.ok()) << released.error().what();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready) << "the head was not woken";
  auto r = waiting.get();
  EXPECT_EQ(r.code(), make_error_code(dlock::errc::wrong_type)) << describe(r);
  if (!r.ok()) {
    EXPECT_NE(r.error().what().find(fence_of(name)), std::string::npos) << r.error().what();
  }
  EXPECT_EQ(exists(key_of(name)), 0) << "the lock is held by " << raw->cmd({"GET", key_of(name)});
  EXPECT_TRUE(eventually([&] { return exists(key_of(name) + ":queue") == 0; }, 2000ms)) << "the waiter kept its place";
  EXPECT_EQ(raw->cmd({"GET", fence_of(name)}), "-5");

  // Repaired, the name works again.
  ASSERT_EQ(raw->cmd_int({"DEL", fence_of(name)}), 1);
  auto again = waiter.acquire(no_wait());
  ASSERT_TRUE(again.ok()) << describe(again);
  EXPECT_TRUE(again->release().ok());
}

// A waiter that leaves the queue (fair_dequeue.lua) while the lock is free hands it to the next
// live waiter the same way: with no counter to count from, that waiter is woken to try, and is
// told why it cannot take the lock.
TEST_F(FenceCounterTest, ADequeueWithNoCounterWakesTheNextWaiter) {
  const std::string name = "fair-dequeue";
  dlock::FairLock holder(*client, name, dlock::test::watchdog(1000ms));
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << describe(held);
  dlock::Client other(server->url());
  dlock::FairLock first(other, name);
  dlock::FairLock second(other, name);
  std::stop_source give_up;
  auto first_wait = std::async(std::launch::async, [&] { return first.acquire(dlock::WaitOptions{10s, 30s}, give_up.get_token()); });
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"LLEN", key_of(name) + ":queue"}) == 1; }, 5000ms));
  auto second_wait = std::async(std::launch::async, [&] { return second.acquire(dlock::WaitOptions{10s, 30s}); });
  ASSERT_TRUE(eventually([&] { return raw->cmd_int({"LLEN", key_of(name) + ":queue"}) == 2; }, 5000ms));
  // The lock goes without a release (deleted behind dlock's back); the counter is no counter.
  ASSERT_EQ(raw->cmd({"SET", fence_of(name), "abc"}), "OK");
  ASSERT_EQ(raw->cmd_int({"DEL", key_of(name)}), 1);
  give_up.request_stop();
  auto f = first_wait.get();
  EXPECT_FALSE(f.ok()) << describe(f);
  ASSERT_EQ(second_wait.wait_for(5s), std::future_status::ready) << "the next waiter was not woken";
  auto s = second_wait.get();
  EXPECT_EQ(s.code(), make_error_code(dlock::errc::wrong_type)) << describe(s);
  EXPECT_EQ(exists(key_of(name)), 0) << "the lock is held by " << raw->cmd({"GET", key_of(name)});
  EXPECT_EQ(raw->cmd({"GET", fence_of(name)}), "abc");
}

// Redlock: a node whose counter is no counter refuses, and leaves it as it was (neither the
// write-back of the chosen token nor a renewal overwrites it); a majority of sound nodes still
// grants the lock. A majority of such nodes refuses by name.
TEST(FenceCounterRedlockTest, ANodeWithNoCounterRefusesAndKeepsIt) {
  dlock::test::ServerGroup group(3);
  auto clients = group.clients();
  const std::string name = "redlock-fence";
  ASSERT_EQ(group.raw(0).cmd({"SET", fence_of(name), "-5"}), "OK");
  // Counters that disagree, so the chosen token is written back to every node.
  ASSERT_EQ(group.raw(1).cmd({"SET", fence_of(name), "100"}), "OK");
  ASSERT_EQ(group.raw(2).cmd({"SET", fence_of(name), "50"}), "OK");
  dlock::Redlock lock(dlock::test::pointers(clients), name, dlock::test::watchdog(1500ms));
  auto held = lock.acquire(no_wait());
  ASSERT_TRUE(held.ok()) << describe(held);
  EXPECT_EQ(held->token().value, 101u);
  EXPECT_EQ(group.raw(0).cmd_int({"EXISTS", key_of(name)}), 0) << "the refusing node holds the lock";
  EXPECT_EQ(group.raw(0).cmd({"GET", fence_of(name)}), "-5");
  // Renewals (every 500 ms) find the key missing there and set it again; the counter stays.
  std::this_thread::sleep_for(1200ms);
  EXPECT_EQ(group.raw(0).cmd({"GET", fence_of(name)}), "-5");
  EXPECT_FALSE(held->lost());
  EXPECT_TRUE(held->release().ok());

  ASSERT_EQ(group.raw(1).cmd({"SET", fence_of(name), "9007199254740991"}), "OK");
  auto refused = lock.acquire(no_wait());
  EXPECT_EQ(refused.code(), make_error_code(dlock::errc::wrong_type)) << describe(refused);
  if (!refused.ok()) {
    EXPECT_NE(refused.error().what().find(fence_of(name)), std::string::npos) << refused.error().what();
    EXPECT_NE(refused.error().what().find("not a counter"), std::string::npos) << refused.error().what();
  }
  // Node 2 took the key; the failed try gives it back (without waiting for that reply).
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(eventually([&] { return group.raw(i).cmd_int({"EXISTS", key_of(name)}) == 0; }, 2000ms)) << "node " << i;
  }
  EXPECT_EQ(group.raw(0).cmd({"GET", fence_of(name)}), "-5");
  EXPECT_EQ(group.raw(1).cmd({"GET", fence_of(name)}), "9007199254740991");
}

}  // namespace
