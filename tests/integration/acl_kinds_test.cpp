// The README's ACL, kind by kind ("Minimal ACL" under "Operating requirements"): a user with
// the base line plus one kind's own commands takes that kind, is refused nothing while a waiter
// waits, and its waiter is woken by the release, not by its recheck. An admin user with the
// base line plus the inspection commands inspects and force-unlocks every kind. The command
// lists here are the README's: change both together.
//
// Real redis-server (Redis 7 ACLs).

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::Client;
using dlock::Result;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::eventually;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// The README's line, without the user, password and key/channel patterns.
const std::vector<std::string> kBase = {"+get",  "+set",     "+del",     "+exists",    "+type",     "+pttl",
                                        "+pexpire", "+incr", "+decr", "+time", "+zadd",      "+zpopmin",  "+zrem",
                                        "+publish", "+subscribe", "+unsubscribe", "+evalsha", "+eval", "+ping",
                                        "+client|setname"};
const std::vector<std::string> kFair = {"+lindex", "+lpop", "+lpos", "+lrem", "+rpush", "+hget",
                                        "+hset",   "+hdel", "+zrem", "+zscore", "+zrangebyscore"};
const std::vector<std::string> kReentrant = {"+hincrby", "+hmget", "+hset"};
const std::vector<std::string> kSharedAndSemaphore = {"+hget",  "+hmget", "+hset",   "+hdel",
                                                      "+zrange", "+zcard", "+zcount", "+zscore",
                                                      "+zremrangebyscore", "+zremrangebyrank"};
const std::vector<std::string> kAdmin = {"+hget",   "+hgetall", "+hexists",       "+lindex",
                                         "+lrange", "+zscore",  "+zrangebyscore", "+pubsub|numsub"};

template <class T>
std::string describe(const Result<T>& r) {
  return r.ok() ? std::string("success") : r.code().message() + ": " + r.error().what();
}

class AclKinds : public testing::Test {
 protected:
  void SetUp() override { admin_.emplace(server_); }

  // A user with the README's base line plus `extra`; returns its URL.
  std::string user(const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> cmd{"ACL", "SETUSER", name, "on", ">pw", "~dlock:*", "&dlock:*"};
    cmd.insert(cmd.end(), kBase.begin(), kBase.end());
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    EXPECT_EQ(admin_->cmd(cmd), "OK");
    return "redis://" + name + ":pw@127.0.0.1:" + std::to_string(server_.port());
  }

  // `holder` takes the lock, `waiter` (on another Client) waits with a 10 s recheck, the
  // holder releases: the waiter must have it within 2 s, with nothing refused on the way.
  template <class Lock, class Take, class Wait>
  void waiter_is_woken(Lock& holder, Lock& waiter, Take take, Wait acquire) {
    auto held = take(holder, dlock::WaitOptions{2000ms, 500ms});
    ASSERT_TRUE(held.ok()) << describe(held);
    auto waiting = std::async(std::launch::async, [&] { return acquire(waiter, dlock::WaitOptions{8000ms, 10000ms}); });
    std::this_thread::sleep_for(300ms);  // its first tries found the lock busy
    ASSERT_EQ(waiting.wait_for(0ms), std::future_status::timeout) << "the waiter got a held lock";
    const auto t0 = SteadyClock::now();
    auto released = held->release();
    ASSERT_TRUE(released.ok()) << released.error().what();
    ASSERT_EQ(waiting.wait_for(5000ms), std::future_status::ready) << "the waiter was not woken";
    auto next = waiting.get();
    ASSERT_TRUE(next.ok()) << describe(next);
    EXPECT_LT(SteadyClock::now() - t0, 2000ms) << "woken by its recheck, not by the release";
    auto again = next->release();
    EXPECT_TRUE(again.ok()) << again.error().what();
  }
  template <class Lock, class Acquire>
  void waiter_is_woken(Lock& holder, Lock& waiter, Acquire acquire) {
    waiter_is_woken(holder, waiter, acquire, acquire);
  }

  RedisServer server_;
  std::optional<RawConnection> admin_;
};

const auto plain = [](auto& lock, dlock::WaitOptions w) { return lock.acquire(w); };

TEST_F(AclKinds, MutexAndMultiLockWithTheBaseLine) {
  const std::string url = user("base", {});
  Client h(url), w(url);
  dlock::Mutex a(h, "acl-m"), b(w, "acl-m");
  waiter_is_woken(a, b, plain);
  dlock::MultiLock c(h, {"acl-m", "acl-m2"}), d(w, {"acl-m", "acl-m2"});
  waiter_is_woken(c, d, plain);
}

TEST_F(AclKinds, FairLock) {
  const std::string url = user("fair", kFair);
  Client h(url), w(url);
  dlock::FairLock a(h, "acl-fair"), b(w, "acl-fair");
  waiter_is_woken(a, b, plain);
}

TEST_F(AclKinds, ReentrantMutex) {
  const std::string url = user("reentrant", kReentrant);
  Client h(url), w(url);
  dlock::ReentrantMutex a(h, "acl-re"), b(w, "acl-re");
  waiter_is_woken(a, b, plain);
}

TEST_F(AclKinds, SharedMutexAndSemaphore) {
  const std::string url = user("shared", kSharedAndSemaphore);
  Client h(url), w(url);
  dlock::SharedMutex a(h, "acl-rw"), b(w, "acl-rw");
  waiter_is_woken(a, b, plain);
  // A reader holds, a writer waits, and the other way round.
  const auto read = [](dlock::SharedMutex& l, dlock::WaitOptions wait) { return l.acquire_shared(wait); };
  waiter_is_woken(a, b, read, plain);
  waiter_is_woken(a, b, plain, read);
  dlock::Semaphore c(h, "acl-sem", 1), d(w, "acl-sem", 1);
  waiter_is_woken(c, d, [](dlock::Semaphore& l, dlock::WaitOptions wait) { return l.acquire(1, wait); });
}

TEST_F(AclKinds, InspectionAndForcedUnlockOfEveryKind) {
  const std::string all = "redis://locker:pw@127.0.0.1:" + std::to_string(server_.port());
  ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "locker", "on", ">pw", "~dlock:*", "&dlock:*", "+@all"}), "OK");
  Client holder(all);
  dlock::Mutex m(holder, "acl-i-m");
  dlock::FairLock f(holder, "acl-i-fair");
  dlock::ReentrantMutex r(holder, "acl-i-re");
  dlock::SharedMutex s(holder, "acl-i-rw");
  dlock::Semaphore p(holder, "acl-i-sem", 2);
  std::vector<Result<dlock::Lease>> held;
  held.push_back(m.acquire());
  held.push_back(f.acquire());
  held.push_back(r.acquire());
  held.push_back(s.acquire_shared());
  held.push_back(p.acquire(1));
  for (const auto& l : held) ASSERT_TRUE(l.ok()) << describe(l);
  // A FairLock with nobody queued looks like a Mutex (the same key): queue a waiter.
  Client queued(all);
  dlock::FairLock fq(queued, "acl-i-fair");
  auto fair_waiting = std::async(std::launch::async, [&] { return fq.acquire(dlock::WaitOptions{10000ms, 10000ms}); });
  ASSERT_TRUE(eventually([&] { return admin_->cmd({"LLEN", "dlock:{acl-i-fair}:queue"}) == "1"; }, 3000ms));

  Client inspector(user("inspector", kAdmin));
  const std::vector<std::string> names{"acl-i-m", "acl-i-fair", "acl-i-re", "acl-i-rw", "acl-i-sem"};
  const std::vector<dlock::LockKind> kinds{dlock::LockKind::mutex, dlock::LockKind::fair, dlock::LockKind::reentrant,
                                           dlock::LockKind::rw, dlock::LockKind::semaphore};
  auto infos = dlock::inspect(inspector, names);
  ASSERT_TRUE(infos.ok()) << describe(infos);
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ((*infos)[i].kind, kinds[i]) << names[i];
    EXPECT_TRUE((*infos)[i].held()) << names[i];
  }
  for (const auto& name : names) {
    auto removed = dlock::force_unlock(inspector, name);
    ASSERT_TRUE(removed.ok()) << name << ": " << describe(removed);
    EXPECT_FALSE(removed->removed.empty()) << name;
  }
  for (auto& l : held) (void)l->release();  // lost by now: lock_lost, or ok where already told
  // The forced unlock of the FairLock woke its queue's head.
  ASSERT_EQ(fair_waiting.wait_for(5000ms), std::future_status::ready);
  auto got = fair_waiting.get();
  ASSERT_TRUE(got.ok()) << describe(got);
  EXPECT_TRUE(got->release().ok());
}

}  // namespace
