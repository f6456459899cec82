// Integration tests of fencing tokens and the resource-side fenced_set()/fenced_get() check,
// against real redis-server processes.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"
#include "support/redis_server.hpp"

namespace {

using dlock::test::key_of;

using namespace std::chrono_literals;
using dlock::FencingToken;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::eventually;
using dlock::test::ms_since;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using FencingTest = dlock::test::ServerFixture;

// 17a. 50 successive acquisitions through several Mutex objects, Clients and threads: each
// holder's token is greater than every earlier holder's.
TEST_F(FencingTest, TokensStrictlyIncreaseAcrossAcquisitions) {
  constexpr int kThreads = 5;
  constexpr int kPerThread = 10;
  dlock::Client second_client(server->url());
  std::mutex order_mu;
  std::vector<std::uint64_t> tokens;  // in acquisition order: appended while holding the lock
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        dlock::Client& c = t % 2 == 0 ? *client : second_client;
        dlock::Mutex m(c, "fenced");
        for (int i = 0; i < kPerThread; ++i) {
          if (i % 2 == 0) {
            auto lease = m.acquire(dlock::WaitOptions{10000ms, 100ms});
            if (!lease.ok()) throw std::runtime_error(lease.error().what());
            {
              std::lock_guard g(order_mu);
              tokens.push_back(lease->token().value);
            }
            if (!lease->release().ok()) throw std::runtime_error("release failed");
          } else {
            std::lock_guard<dlock::Mutex> hold(m);
            std::lock_guard g(order_mu);
            tokens.push_back(m.fencing_token().value);
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_GT(tokens.front(), 0u);
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_GT(tokens[i], tokens[i - 1]) << "acquisition " << i;
  }
  // The counter is what the server holds, and it never expires.
  EXPECT_EQ(raw->cmd({"GET", key_of("fenced") + ":fence"}), std::to_string(tokens.back()));
  EXPECT_EQ(raw->cmd_int({"PTTL", key_of("fenced") + ":fence"}), -1);
}

// 17b. After the server lost everything, the counter is re-seeded above every earlier token.
TEST_F(FencingTest, TokensKeepIncreasingAfterServerRestartsEmpty) {
  dlock::Mutex m(*client, "reseed");
  std::uint64_t highest = 0;
  for (int i = 0; i < 5; ++i) {
    auto lease = m.acquire(dlock::WaitOptions{milliseconds(0), 500ms});
    ASSERT_TRUE(lease.ok()) << lease.error().what();
    EXPECT_GT(lease->token().value, highest);
    highest = std::max(highest, lease->token().value);
    ASSERT_TRUE(lease->release().ok());
  }
  server->restart_empty();
  raw.emplace(*server);
  ASSERT_EQ(raw->cmd_int({"EXISTS", key_of("reseed") + ":fence"}), 0);

  std::optional<dlock::Result<dlock::Lease>> got;
  dlock::Error last;
  ASSERT_TRUE(eventually([&] {
    got.emplace(m.acquire(dlock::WaitOptions{milliseconds(0), 500ms}));
    if (got->ok()) return true;
    last = got->error();
    return false;
  }, 3000ms, 50ms)) << "no acquire within 3 s after the restart: " << last.what();
  dlock::Lease lease = std::move(*got).value();
  EXPECT_GT(lease.token().value, highest) << "the re-seeded counter went backwards";
  EXPECT_EQ(raw->cmd({"GET", key_of("reseed") + ":fence"}), std::to_string(lease.token().value));
  const std::uint64_t after_restart = lease.token().value;
  ASSERT_TRUE(lease.release().ok());
  auto next = m.acquire(dlock::WaitOptions{milliseconds(0), 500ms});
  ASSERT_TRUE(next.ok()) << next.error().what();
  EXPECT_GT(next->token().value, after_restart);
  EXPECT_TRUE(next->release().ok());
}

// 18a. The fencing rule: >= highest accepted (repeats too), lower rejected, value unchanged.
TEST_F(FencingTest, FencedSetAcceptsCurrentAndRejectsStaleTokens) {
  const std::string key = "resource";
  auto none = dlock::fenced_get(*client, key);
  ASSERT_TRUE(none.ok()) << none.error().what();
  EXPECT_FALSE(none->has_value());

  auto w1 = dlock::fenced_set(*client, key, "v5", FencingToken{5});
  ASSERT_TRUE(w1.ok()) << w1.error().what();
  EXPECT_TRUE(w1->accepted);
  EXPECT_EQ(w1->highest.value, 5u);

  auto w2 = dlock::fenced_set(*client, key, "v5-again", FencingToken{5});
  ASSERT_TRUE(w2.ok()) << w2.error().what();
  EXPECT_TRUE(w2->accepted) << "a repeated write of the current holder was rejected";
  EXPECT_EQ(w2->highest.value, 5u);
  auto v = dlock::fenced_get(*client, key);
  ASSERT_TRUE(v.ok()) << v.error().what();
  EXPECT_EQ(v->value_or("<none>"), "v5-again");

  auto stale = dlock::fenced_set(*client, key, "v3", FencingToken{3});
  ASSERT_TRUE(stale.ok()) << stale.error().what();
  EXPECT_FALSE(stale->accepted);
  EXPECT_EQ(stale->highest.value, 5u);
  v = dlock::fenced_get(*client, key);
  ASSERT_TRUE(v.ok()) << v.error().what();
  EXPECT_EQ(v->value_or("<none>"), "v5-again") << "a stale write changed the value";

  auto newer = dlock::fenced_set(*client, key, "v9", FencingToken{9});
  ASSERT_TRUE(newer.ok()) << newer.error().what();
  EXPECT_TRUE(newer->accepted);
  EXPECT_EQ(newer->highest.value, 9u);
  auto older = dlock::fenced_set(*client, key, "v5-late", FencingToken{5});
  ASSERT_TRUE(older.ok()) << older.error().what();
  EXPECT_FALSE(older->accepted);
  EXPECT_EQ(older->highest.value, 9u);
  v = dlock::fenced_get(*client, key);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value_or("<none>"), "v9");
  // The documented layout: a hash with 'value' and 'fence'.
  EXPECT_EQ(raw->cmd({"HGET", key, "fence"}), "9");
  EXPECT_EQ(raw->cmd({"HGET", key, "value"}), "v9");
}

// 18b. Real tokens: a holder whose fixed-TTL lease ran out is fenced off by the next holder.
TEST_F(FencingTest, StaleHolderIsFencedOffByNextHolder) {
  dlock::LeaseOptions short_lease;
  short_lease.mode = dlock::LeaseMode::fixed_ttl;
  short_lease.ttl = 200ms;
  dlock::Mutex first(*client, "fenced-resource", short_lease);
  dlock::Mutex second(*client, "fenced-resource");
  auto a = first.acquire();
  ASSERT_TRUE(a.ok()) << a.error().what();
  auto wa = dlock::fenced_set(*client, "stock", "from-a", a->token());
  ASSERT_TRUE(wa.ok()) << wa.error().what();
  EXPECT_TRUE(wa->accepted);
  EXPECT_EQ(wa->highest, a->token());

  auto b = second.acquire(dlock::WaitOptions{3000ms, 100ms});  // after a's lease expired
  ASSERT_TRUE(b.ok()) << b.error().what();
  ASSERT_GT(b->token(), a->token());
  auto wb = dlock::fenced_set(*client, "stock", "from-b", b->token());
  ASSERT_TRUE(wb.ok()) << wb.error().what();
  EXPECT_TRUE(wb->accepted);
  EXPECT_EQ(wb->highest, b->token());

  auto late = dlock::fenced_set(*client, "stock", "late-from-a", a->token());
  ASSERT_TRUE(late.ok()) << late.error().what();
  EXPECT_FALSE(late->accepted);
  EXPECT_EQ(late->highest, b->token());
  auto v = dlock::fenced_get(*client, "stock");
  ASSERT_TRUE(v.ok()) << v.error().what();
  EXPECT_EQ(v->value_or("<none>"), "from-b");
  EXPECT_TRUE(b->release().ok());
}

// 18c. Errors: a zero token; a key of another type; a 'fence' field that is no token.
TEST_F(FencingTest, FencedSetErrors) {
  auto zero = dlock::fenced_set(*client, "res", "v", FencingToken{0});
  EXPECT_EQ(zero.code(), make_error_code(dlock::errc::invalid_argument)) << zero.error().what();
  EXPECT_EQ(raw->cmd_int({"EXISTS", "res"}), 0) << "a rejected zero-token write touched the key";

  // Above 2^53 - 1 the script's numbers are not exact: 2^53 would pass as equal to 2^53 + 1, a
  // stale write accepted. Refused before anything is sent.
  auto exact = dlock::fenced_set(*client, "res", "v", FencingToken{(std::uint64_t{1} << 53) - 1});
  EXPECT_TRUE(exact.ok()) << exact.error().what();
  auto huge = dlock::fenced_set(*client, "res", "w", FencingToken{std::uint64_t{1} << 53});
  EXPECT_EQ(huge.code(), make_error_code(dlock::errc::invalid_argument)) << (huge.ok() ? "accepted" : huge.error().what());
  EXPECT_EQ(raw->cmd({"HGET", "res", "value"}), "v");
  ASSERT_EQ(raw->cmd_int({"DEL", "res"}), 1);

  ASSERT_EQ(raw->cmd({"SET", "plain", "x"}), "OK");
  auto wrong = dlock::fenced_set(*client, "plain", "v", FencingToken{7});
  EXPECT_EQ(wrong.code(), make_error_code(dlock::errc::wrong_type)) << wrong.error().what();
  EXPECT_EQ(raw->cmd({"GET", "plain"}), "x");
  auto wrong_get = dlock::fenced_get(*client, "plain");
  EXPECT_EQ(wrong_get.code(), make_error_code(dlock::errc::wrong_type)) << wrong_get.error().what();

  ASSERT_EQ(raw->cmd_int({"RPUSH", "list", "x"}), 1);
  auto wrong_list = dlock::fenced_set(*client, "list", "v", FencingToken{7});
  EXPECT_EQ(wrong_list.code(), make_error_code(dlock::errc::wrong_type)) << wrong_list.error().what();

  // A hash whose 'fence' is no token was not written by fenced_set(): refused by name, and left
  // as it was (it used to end in a Lua comparison error, or to compare '1e5' as 100000).
  for (const char* fence : {"abc", "1e5", "-3", "2.5", ""}) {
    ASSERT_GE(raw->cmd_int({"HSET", "odd", "value", "kept", "fence", fence}), 0);
    auto odd = dlock::fenced_set(*client, "odd", "v", FencingToken{7});
    EXPECT_EQ(odd.code(), make_error_code(dlock::errc::wrong_type))
        << "'" << fence << "': " << (odd.ok() ? std::string("answered, no error") : odd.error().what());
    if (!odd.ok()) {
      EXPECT_NE(odd.error().what().find("fencing token"), std::string::npos) << odd.error().what();
    }
    EXPECT_EQ(raw->cmd({"HGET", "odd", "value"}), "kept") << fence;
    EXPECT_EQ(raw->cmd({"HGET", "odd", "fence"}), fence);
  }
}

}  // namespace
