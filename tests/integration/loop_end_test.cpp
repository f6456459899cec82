// Integration tests of what becomes of work posted to a Client's event loop once the loop has
// ended (ClientCore::post, client_loop.cpp): it runs on the posting thread instead of waiting in
// a queue that nothing reads, so no call made during or after a shutdown is left unanswered and
// no handler keeps its Client alive. Against real redis-servers.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "dlock/dlock.hpp"
#include "dlock/redlock.hpp"
#include "notify/notifier.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/server_group.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::pointers;
using dlock::test::scaled;
using dlock::test::watchdog;
using std::chrono::milliseconds;

// Calls and answers of async acquisitions, shared with the callbacks (which may outlive a
// failed test's stack).
struct Tally {
  std::atomic<int> calls{0};
  std::atomic<int> answered{0};
  std::atomic<int> shutdown{0};
};

std::function<void(dlock::Result<dlock::Lease>)> count_into(const std::shared_ptr<Tally>& t) {
  return [t](dlock::Result<dlock::Lease> r) {
    if (!r.ok() && r.code() == make_error_code(dlock::errc::shutdown)) t->shutdown.fetch_add(1);
    t->answered.fetch_add(1);
  };
}

// Calls `call(done)` on this thread until a few calls after `gone` (the Client was destroyed),
// so every round has calls before, during and after the destruction.
template <class Call>
void call_until_after(const std::atomic<bool>& gone, const std::shared_ptr<Tally>& tally, Call call) {
  int after = 0;
  while (!gone.load() || ++after <= 3) {
    tally->calls.fetch_add(1);
    call(count_into(tally));
    std::this_thread::yield();
  }
}

// A Client whose shutdown has finished: its loop has ended, and nothing runs it any more.
std::shared_ptr<dlock::detail::ClientCore> ended_core(const dlock::test::RedisServer& server) {
  auto client = std::make_unique<dlock::Client>(server.url());
  EXPECT_TRUE(client->ping().ok());
  auto core = client->core();
  client.reset();
  EXPECT_TRUE(core->is_shut_down());
  return core;
}

// A handler posted after the end runs before post() returns, as the loop would run it: with
// on_loop_thread() true, and a handler it posts in turn after it, not inside it.
TEST(LoopEndTest, APostAfterTheLoopEndedRunsOnThePostingThreadInOrder) {
  dlock::test::RedisServer server;
  auto core = ended_core(server);
  std::vector<int> order;
  bool on_loop = false;
  core->post([&] {
    order.push_back(1);
    on_loop = core->on_loop_thread();
    core->post([&] { order.push_back(3); });
    order.push_back(2);
  });
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(on_loop);
  EXPECT_FALSE(core->on_loop_thread());
}

// A post made from another Client's handler (as a Redlock answer from another node is handed
// to its home Client) runs on a thread of its own, not on that Client's loop thread: there it
// would pass for this loop's handler, and a blocking call on that Client, or its destruction,
// made from it would wait for the very thread it holds.
TEST(LoopEndTest, APostFromAnotherClientsLoopAfterTheEndRunsOffThatLoop) {
  dlock::test::RedisServer server;
  auto ended = ended_core(server);
  dlock::Client other(server.url());
  ASSERT_TRUE(other.ping().ok());
  struct Seen {
    std::thread::id posted_from, ran_on;
    bool ran_as_ended_loop = false, ran_as_other_loop = true;
    bool blocking_on_other_ok = false;
  };
  auto seen = std::make_shared<std::promise<Seen>>();
  auto fut = seen->get_future();
  other.async_command({"PING"}, [&, seen](dlock::Result<dlock::Reply>) {
    const auto from = std::this_thread::get_id();
    ended->post([&, seen, from] {
      Seen s;
      s.posted_from = from;
      s.ran_on = std::this_thread::get_id();
      s.ran_as_ended_loop = ended->on_loop_thread();
      s.ran_as_other_loop = other.on_event_loop_thread();
      s.blocking_on_other_ok = other.ping().ok();  // waited for other's loop thread: not this one
      seen->set_value(s);
    });
  });
  ASSERT_EQ(fut.wait_for(scaled(5000ms)), std::future_status::ready) << "the handler never ran";
  const Seen s = fut.get();
  EXPECT_NE(s.ran_on, s.posted_from);
  EXPECT_TRUE(s.ran_as_ended_loop);
  EXPECT_FALSE(s.ran_as_other_loop);
  EXPECT_TRUE(s.blocking_on_other_ok);
}

// That thread belongs to the Client whose handler posted: its destruction waits for it, so the
// ended Client's callbacks do not run on after every Client is gone (and what they use freed).
TEST(LoopEndTest, TheClientWhoseHandlerPostedJoinsThatThreadAtItsDestruction) {
  dlock::test::RedisServer server;
  auto ended = ended_core(server);
  auto other = std::make_unique<dlock::Client>(server.url());
  ASSERT_TRUE(other->ping().ok());
  auto finished = std::make_shared<std::atomic<bool>>(false);
  auto posted = std::make_shared<std::promise<void>>();
  other->async_command({"PING"}, [ended, finished, posted](dlock::Result<dlock::Reply>) {
    ended->post([finished] {
      std::this_thread::sleep_for(300ms);
      finished->store(true);
    });
    posted->set_value();
  });
  ASSERT_EQ(posted->get_future().wait_for(scaled(5000ms)), std::future_status::ready);
  other.reset();
  EXPECT_TRUE(finished->load()) << "the Client was gone before the work it handed over had run";
}

// A Client destroyed from one of its own callbacks: its loop thread is detached, and the core
// must not be destroyed inside that callback (it was, when the Client held the last reference);
// it goes once that thread has finished.
TEST(LoopEndTest, AClientDestroyedFromItsOwnCallbackGoesOnceItsThreadIsDone) {
  dlock::test::RedisServer server;
  auto client = std::make_shared<std::unique_ptr<dlock::Client>>(std::make_unique<dlock::Client>(server.url()));
  ASSERT_TRUE((*client)->ping().ok());
  std::weak_ptr<dlock::detail::ClientCore> core = (*client)->core();
  auto destroyed = std::make_shared<std::promise<void>>();
  auto fut = destroyed->get_future();
  (*client)->async_command({"PING"}, [client, destroyed](dlock::Result<dlock::Reply>) {
    client->reset();  // ~Client on its own loop thread
    destroyed->set_value();
  });
  ASSERT_EQ(fut.wait_for(scaled(5000ms)), std::future_status::ready) << "the callback never ran";
  EXPECT_TRUE(eventually([&] { return core.expired(); }, scaled(5000ms))) << "the core was never freed";
}

// Posts from several threads after the end each run once, and never two at a time: loop-thread
// state needs no lock then either.
TEST(LoopEndTest, PostsFromSeveralThreadsAfterTheEndRunOneAtATime) {
  dlock::test::RedisServer server;
  auto core = ended_core(server);
  constexpr int threads = 4, each = 2000;
  std::atomic<int> running{0}, most{0}, ran{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < threads; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < each; ++i) {
        core->post([&] {
          const int now = running.fetch_add(1) + 1;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::yield();
          ran.fetch_add(1);
          running.fetch_sub(1);
        });
      }
    });
  }
  for (auto& p : posters) p.join();
  EXPECT_EQ(ran.load(), threads * each);
  EXPECT_EQ(most.load(), 1);
}

// A subscription asked for after the end fails at once with the shutdown, instead of opening a
// connection that nothing reads; the listener is not kept.
TEST(LoopEndTest, ASubscriptionAskedForAfterTheEndFailsAtOnce) {
  struct Deaf final : dlock::detail::Notifier::Listener {
    void on_notification(std::string_view) override {}
    void on_resubscribed() override {}
  } listener;
  dlock::test::RedisServer server;
  auto core = ended_core(server);
  std::error_code got;
  bool answered = false;
  core->post([&] {
    core->notifier().subscribe("loop-end:ch", &listener, [&](const dlock::Error& e) {
      answered = true;
      got = e.code;
    });
  });
  EXPECT_TRUE(answered);
  EXPECT_EQ(got, make_error_code(dlock::errc::shutdown));
  EXPECT_EQ(core->notifier().channel_count(), 0u);
}

// Async acquisitions made from other threads while the Client is destroyed are all answered
// (acquired, busy or errc::shutdown), and once the lock objects are gone nothing keeps the
// Client's core alive. Before, a call that checked for the shutdown just before it and posted
// just after the loop ended was never answered, and its handler kept the core for ever.
TEST(LoopEndTest, AsyncAcquisitionsRacingTheClientsDestructionAreAllAnswered) {
  dlock::test::RedisServer server;
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto client = std::make_unique<dlock::Client>(server.url());
    ASSERT_TRUE(client->ping().ok());
    std::weak_ptr<dlock::detail::ClientCore> core = client->core();
    auto tally = std::make_shared<Tally>();
    {
      std::vector<std::unique_ptr<dlock::Mutex>> locks;
      for (int i = 0; i < 3; ++i) {
        locks.push_back(std::make_unique<dlock::Mutex>(*client, "loop-end-" + std::to_string(i), watchdog(10s)));
      }
      std::atomic<bool> gone{false};
      std::vector<std::thread> callers;
      for (auto& lock : locks) {
        callers.emplace_back([&, m = lock.get()] { call_until_after(gone, tally, [m](auto done) {
                               m->async_acquire(dlock::test::no_wait(), std::move(done));
                             }); });
      }
      ASSERT_TRUE(eventually([&] { return tally->calls.load() >= 3; }, scaled(5000ms)));
      std::this_thread::sleep_for(milliseconds(2 + round % 5));
      client.reset();
      gone.store(true);
      for (auto& t : callers) t.join();
      EXPECT_TRUE(eventually([&] { return tally->answered.load() == tally->calls.load(); }, scaled(5000ms)))
          << tally->answered.load() << " of " << tally->calls.load() << " calls answered";
    }
    EXPECT_GT(tally->shutdown.load(), 0) << "no call met the shutdown";
    EXPECT_TRUE(eventually([&] { return core.expired(); }, scaled(5000ms)))
        << "the Client's core outlived its Client and its lock objects";
  }
}

// Async releases made from another thread while the Client is destroyed: each is answered, and
// no key is left behind (released by the call, or by the shutdown, which releases what is still
// held), except by a release sent as the connections closed, whose answer says so. Results:
// success, or errc::shutdown when the call could not tell what became of it. Before, a release
// claimed just before the shutdown began and sent just after it was refused, and its key sat out
// its TTL (142 such keys in 10 runs; ReleaseAtShutdownTest.ACommandSentWhileStepOneRunsStillGoesOut).
TEST(LoopEndTest, AsyncReleasesRacingTheClientsDestructionAreAllAnsweredAndLeaveNoKey) {
  dlock::test::RedisServer server;
  dlock::test::RawConnection raw(server);
  constexpr int n = 300;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto client = std::make_unique<dlock::Client>(server.url());
    std::vector<std::unique_ptr<dlock::Mutex>> locks;
    std::vector<dlock::Lease> leases;
    for (int i = 0; i < n; ++i) {
      locks.push_back(std::make_unique<dlock::Mutex>(*client, "loop-end-rel-" + std::to_string(i), watchdog(30s)));
      auto lease = locks.back()->acquire(dlock::test::no_wait());
      ASSERT_TRUE(lease.ok()) << lease.error().what();
      leases.push_back(std::move(*lease));
    }
    struct Outcomes {
      std::mutex mu;
      int answered = 0;
      std::vector<std::string> unexpected;
      std::vector<std::string> said = std::vector<std::string>(n, "(no answer)");
    };
    auto outcomes = std::make_shared<Outcomes>();
    std::thread releaser([&] {
      for (int i = 0; i < n; ++i) {
        leases[i].async_release([outcomes, i](dlock::Result<void> r) {
          std::lock_guard lock(outcomes->mu);
          ++outcomes->answered;
          outcomes->said[i] = r.ok() ? "success" : r.error().what();
          if (!r.ok() && r.code() != make_error_code(dlock::errc::shutdown)) {
            outcomes->unexpected.push_back(r.error().what());
          }
        });
        std::this_thread::yield();
      }
    });
    std::this_thread::sleep_for(milliseconds(1 + round));
    client.reset();
    releaser.join();
    EXPECT_TRUE(eventually(
        [&] {
          std::lock_guard lock(outcomes->mu);
          return outcomes->answered == n;
        },
        scaled(5000ms)))
        << outcomes->answered << " of " << n << " releases answered";
    {
      std::lock_guard lock(outcomes->mu);
      EXPECT_TRUE(outcomes->unexpected.empty()) << outcomes->unexpected.size() << " unexpected, first: "
                                                << outcomes->unexpected.front();
    }
    // A release sent at the very end (after the shutdown's step 1, as the connections close)
    // cannot go out: its key is left to its TTL, and its answer must say so.
    int left_and_told = 0;
    for (int i = 0; i < n; ++i) {
      const std::string key = "dlock:{loop-end-rel-" + std::to_string(i) + "}";
      if (raw.cmd_int({"EXISTS", key}) == 0) continue;
      std::lock_guard lock(outcomes->mu);
      if (outcomes->said[i].find("expires at its TTL") != std::string::npos) ++left_and_told;
      else ADD_FAILURE() << "lock " << i << " left behind; its release said: " << outcomes->said[i];
      raw.cmd({"DEL", key});
    }
    if (left_and_told > 0) std::printf("round %d: %d releases sent as the connections closed\n", round, left_and_told);
  }
}

// The same for Redlock, whose answers come from the other nodes' loops and are handed to the
// home Client's (nodes[0]) loop: destroying the home Client while acquisitions are in flight
// leaves none unanswered, and no lease is handed out by a home that is gone.
TEST(LoopEndTest, RedlockAcquisitionsRacingTheHomeClientsDestructionAreAllAnswered) {
  dlock::test::ServerGroup group{3};
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto clients = group.clients();
    std::weak_ptr<dlock::detail::ClientCore> home = clients.front()->core();
    auto tally = std::make_shared<Tally>();
    {
      dlock::Redlock lock(pointers(clients), "loop-end-redlock", watchdog(10s));
      std::atomic<bool> gone{false};
      std::vector<std::thread> callers;
      for (int i = 0; i < 2; ++i) {
        callers.emplace_back([&] { call_until_after(gone, tally, [&lock](auto done) {
                               lock.async_acquire(dlock::test::no_wait(), std::move(done));
                             }); });
      }
      ASSERT_TRUE(eventually([&] { return tally->calls.load() >= 2; }, scaled(5000ms)));
      std::this_thread::sleep_for(milliseconds(5 + round % 5));
      clients.front().reset();
      gone.store(true);
      for (auto& t : callers) t.join();
      EXPECT_TRUE(eventually([&] { return tally->answered.load() == tally->calls.load(); }, scaled(5000ms)))
          << tally->answered.load() << " of " << tally->calls.load() << " calls answered";
    }
    clients.clear();
    EXPECT_GT(tally->shutdown.load(), 0) << "no call met the shutdown";
    EXPECT_TRUE(eventually([&] { return home.expired(); }, scaled(5000ms)))
        << "the home Client's core outlived its Client and the Redlock";
  }
}

}  // namespace
