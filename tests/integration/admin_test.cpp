// Integration tests of the admin API (dlock/admin.hpp): inspect() tells every kind apart from
// its real keys and reports holders and waiters; force_unlock() removes the holds of any kind,
// wakes waiters (a FairLock's head only), and leaves foreign keys alone. Real redis-server.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/mutex.hpp"
#include "dlock/reentrant_mutex.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/shared_mutex.hpp"
#include "support/lock_helpers.hpp"
#include "support/server_fixture.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::LockHolder;
using dlock::LockKind;
using dlock::LockWaiter;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::LossProbe;
using dlock::test::ms_since;
using dlock::test::no_wait;
using dlock::test::SteadyClock;
using dlock::test::watchdog;
using std::chrono::milliseconds;

using AdminTest = dlock::test::ServerFixture;

using dlock::test::scaled;

dlock::LockInfo inspect_ok(dlock::Client& c, const std::string& name) {
  auto info = dlock::inspect(c, name);
  EXPECT_TRUE(info.ok()) << info.error().what();
  return info.ok() ? *info : dlock::LockInfo{};
}

TEST_F(AdminTest, FreeNameIsNone) {
  auto info = inspect_ok(*client, "nothing");
  EXPECT_EQ(info.kind, LockKind::none);
  EXPECT_EQ(info.key, key_of("nothing"));
  EXPECT_FALSE(info.held());
  EXPECT_TRUE(info.waiters.empty());
  EXPECT_FALSE(info.fencing_counter);
  auto r = dlock::force_unlock(*client, "nothing");
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_TRUE(r->removed.empty());
  EXPECT_EQ(dlock::inspect(*client, "bad{name}").code(), make_error_code(dlock::errc::invalid_argument));
}

TEST_F(AdminTest, MutexHolderAndSubscribedWaiter) {
  dlock::Mutex m(*client, "m", watchdog(30s));
  auto lease = m.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  // A waiter of another Client subscribes to the lock's channel.
  dlock::Client other(server->url());
  dlock::Mutex waiter(other, "m");
  auto waited = std::async(std::launch::async, [&] { return waiter.acquire(dlock::WaitOptions{20s, 5s}); });
  ASSERT_TRUE(eventually([&] { return inspect_ok(*client, "m").subscribers == 1; }, scaled(5s)));
  // Its try after subscribing put its Client on the roll: the place lasts 2.4 rechecks + 1 s.
  ASSERT_TRUE(eventually([&] { return inspect_ok(*client, "m").waiters.size() == 1; }, scaled(5s)));

  auto info = inspect_ok(*client, "m");
  EXPECT_EQ(info.waiters[0].role, LockWaiter::Role::roll);
  EXPECT_FALSE(info.waiters[0].id.empty());
  EXPECT_GT(info.waiters[0].ttl, 0s);  // refreshed only at the waiter's rechecks (4-6 s)
  EXPECT_LE(info.waiters[0].ttl, 13s);
  EXPECT_EQ(info.kind, LockKind::mutex);
  EXPECT_EQ(info.redis_type, "string");
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, lease->owner());
  EXPECT_EQ(info.holders[0].mode, LockHolder::Mode::exclusive);
  ASSERT_TRUE(info.holders[0].ttl);
  EXPECT_GT(*info.holders[0].ttl, 20s);
  EXPECT_EQ(info.fencing_counter, std::optional<std::uint64_t>(lease->token().value));
  EXPECT_EQ(info.value, std::optional<std::string>(lease->owner()));

  // The forced unlock wakes the waiter at once (its recheck is 5 s away).
  const auto t0 = SteadyClock::now();
  auto r = dlock::force_unlock(*client, "m");
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->kind, LockKind::mutex);
  ASSERT_EQ(r->removed.size(), 1u);
  EXPECT_EQ(r->removed[0].owner, lease->owner());
  auto got = waited.get();
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_LT(ms_since(t0), scaled(2s));
  EXPECT_EQ(lease->release().code(), make_error_code(dlock::errc::lock_lost)) << "no release marker was set";
}

// A holder that listens for revocation loses its lease at once, not at its next renewal.
TEST_F(AdminTest, ListeningHoldersLearnOfTheRevocationAtOnce) {
  LossProbe mutex_probe, reentrant_probe;
  auto lo = watchdog(60s);  // next renewal in 20 s
  lo.listen_for_revocation = true;
  auto mutex_lo = lo;
  mutex_probe.attach(mutex_lo);
  dlock::Mutex m(*client, "listening", mutex_lo);
  auto held = m.acquire();
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::ReentrantMutex::Options ro;
  ro.lease = lo;
  ro.owner = "admin-test";
  reentrant_probe.attach(ro.lease);
  dlock::ReentrantMutex rm(*client, "listening-r", ro);
  auto take1 = rm.acquire();
  ASSERT_TRUE(take1.ok()) << take1.error().what();
  auto take2 = rm.acquire(no_wait());
  ASSERT_TRUE(take2.ok()) << take2.error().what();

  auto info = inspect_ok(*client, "listening-r");
  EXPECT_EQ(info.kind, LockKind::reentrant);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].count, 2);
  EXPECT_EQ(info.holders[0].token, std::optional<std::uint64_t>(take1->token().value));
  EXPECT_NE(info.holders[0].owner.find("admin-test"), std::string::npos) << info.holders[0].owner;

  // The holders subscribe in the background: a revocation published before that is only found
  // at the next renewal (20 s away).
  auto listening = [&](const char* name) { return inspect_ok(*client, name).subscribers == 1; };
  ASSERT_TRUE(eventually([&] { return listening("listening") && listening("listening-r"); }, scaled(3s)));
  const auto t0 = SteadyClock::now();
  auto r1 = dlock::force_unlock(*client, "listening");
  auto r2 = dlock::force_unlock(*client, "listening-r");
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(r2->kind, LockKind::reentrant);
  ASSERT_EQ(r2->removed.size(), 1u);
  EXPECT_EQ(r2->removed[0].count, 2);
  ASSERT_TRUE(eventually([&] { return held->lost() && take1->lost() && take2->lost(); }, scaled(3s)));
  EXPECT_LT(ms_since(t0), scaled(3s));
  // A lease reads as lost a moment before its on_lost has run on the loop thread: wait for the calls.
  ASSERT_TRUE(eventually([&] { return mutex_probe.calls.load() >= 1 && reentrant_probe.calls.load() >= 2; },
                         scaled(3s)));
  EXPECT_EQ(mutex_probe.reason.load(), static_cast<int>(dlock::LossReason::taken));
  EXPECT_EQ(reentrant_probe.calls.load(), 2) << "each take of the hold is told once";
}

// The queue is shown head first; a forced unlock wakes the head, which then takes the lock
// ahead of the second waiter.
TEST_F(AdminTest, FairQueueInOrderAndTheHeadIsWoken) {
  dlock::FairLock holder_lock(*client, "fair", watchdog(30s));
  auto held = holder_lock.acquire();
  ASSERT_TRUE(held.ok()) << held.error().what();
  dlock::Client c1(server->url()), c2(server->url());
  dlock::FairLock first(c1, "fair", watchdog(30s)), second(c2, "fair", watchdog(30s));
  auto first_wait = std::async(std::launch::async, [&] { return first.acquire(dlock::WaitOptions{30s, 10s}); });
  ASSERT_TRUE(eventually([&] { return inspect_ok(*client, "fair").waiters.size() == 1; }, scaled(5s)));
  auto second_wait = std::async(std::launch::async, [&] { return second.acquire(dlock::WaitOptions{30s, 10s}); });
  ASSERT_TRUE(eventually([&] { return inspect_ok(*client, "fair").waiters.size() == 2; }, scaled(5s)));

  auto info = inspect_ok(*client, "fair");
  EXPECT_EQ(info.kind, LockKind::fair);
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].owner, held->owner());
  for (const auto& w : info.waiters) {
    EXPECT_EQ(w.role, LockWaiter::Role::fair_queue);
    EXPECT_GT(w.ttl, 0ms);
  }
  const std::string head = info.waiters[0].id;

  auto r = dlock::force_unlock(*client, "fair");
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->kind, LockKind::fair);
  EXPECT_EQ(r->woken_head, std::optional<std::string>(head));
  // Only the head was woken; it holds the lock well before any periodic re-try.
  ASSERT_EQ(first_wait.wait_for(scaled(3s)), std::future_status::ready);
  auto got = first_wait.get();
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_EQ(got->owner(), head);
  EXPECT_EQ(second_wait.wait_for(0ms), std::future_status::timeout) << "the second waiter overtook the head";
  ASSERT_TRUE(got->release().ok());
  auto got2 = second_wait.get();
  ASSERT_TRUE(got2.ok()) << got2.error().what();
}

// Readers are holders (mode read), a waiting writer is an intent; the forced unlock removes all
// readers and the writer then gets in at once.
TEST_F(AdminTest, RwReadersWriterIntentAndForcedUnlock) {
  LossProbe readers_probe;
  auto reader_lo = watchdog(900ms);  // renewed every 300 ms: a revoked reader learns quickly
  readers_probe.attach(reader_lo);
  dlock::SharedMutex r1(*client, "rw", reader_lo), r2(*client, "rw", reader_lo);
  auto read1 = r1.acquire_shared();
  auto read2 = r2.acquire_shared();
  ASSERT_TRUE(read1.ok() && read2.ok());
  dlock::Client wc(server->url());
  dlock::SharedMutex writer(wc, "rw", watchdog(30s));
  auto writing = std::async(std::launch::async, [&] { return writer.acquire(dlock::WaitOptions{30s, 10s}); });
  ASSERT_TRUE(eventually([&] { return !inspect_ok(*client, "rw").waiters.empty(); }, scaled(5s)));

  auto info = inspect_ok(*client, "rw");
  EXPECT_EQ(info.kind, LockKind::rw);
  ASSERT_EQ(info.holders.size(), 2u);
  for (const auto& h : info.holders) {
    EXPECT_EQ(h.mode, LockHolder::Mode::read);
    EXPECT_TRUE(h.owner == read1->owner() || h.owner == read2->owner()) << h.owner;
  }
  ASSERT_EQ(info.waiters.size(), 1u);
  EXPECT_EQ(info.waiters[0].role, LockWaiter::Role::writer_intent);

  auto r = dlock::force_unlock(*client, "rw");
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->kind, LockKind::rw);
  EXPECT_EQ(r->removed.size(), 2u);
  ASSERT_EQ(writing.wait_for(scaled(3s)), std::future_status::ready);
  auto w = writing.get();
  ASSERT_TRUE(w.ok()) << w.error().what();
  auto after = inspect_ok(*client, "rw");
  ASSERT_EQ(after.holders.size(), 1u);
  EXPECT_EQ(after.holders[0].mode, LockHolder::Mode::write);
  EXPECT_EQ(after.holders[0].owner, w->owner());
  ASSERT_TRUE(eventually([&] { return read1->lost() && read2->lost(); }, scaled(3s)));
  // Each reader's on_lost runs a moment after its lease reads as lost: wait for both calls.
  ASSERT_TRUE(eventually([&] { return readers_probe.calls.load() >= 2; }, scaled(3s)));
  EXPECT_EQ(readers_probe.calls.load(), 2);
}

// Each acquisition is one holder with its permit count; the size is reported and survives a
// forced unlock, which reclaims every permit.
TEST_F(AdminTest, SemaphorePermitsAndForcedUnlock) {
  auto lo = watchdog(900ms);
  dlock::Semaphore sem(*client, "sem", 5, lo);
  auto two = sem.acquire(2);
  auto one = sem.acquire(1);
  ASSERT_TRUE(two.ok() && one.ok());
  auto info = inspect_ok(*client, "sem");
  EXPECT_EQ(info.kind, LockKind::semaphore);
  EXPECT_EQ(info.redis_type, "hash") << "P{N}: the semaphore's claim on the name";
  EXPECT_EQ(info.permits_limit, std::optional<long long>(5));
  ASSERT_EQ(info.holders.size(), 2u);
  long long total = 0;
  for (const auto& h : info.holders) {
    EXPECT_EQ(h.mode, LockHolder::Mode::permits);
    EXPECT_EQ(h.count, h.owner == two->owner() ? 2 : 1) << h.owner;
    total += h.count;
  }
  EXPECT_EQ(total, 3);

  auto r = dlock::force_unlock(*client, "sem");
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->kind, LockKind::semaphore);
  EXPECT_EQ(r->removed.size(), 2u);
  auto after = inspect_ok(*client, "sem");
  EXPECT_EQ(after.kind, LockKind::semaphore);
  EXPECT_EQ(after.redis_type, "none") << "the claim outlived the forced unlock";
  EXPECT_FALSE(after.held());
  EXPECT_EQ(after.permits_limit, std::optional<long long>(5)) << "the size must survive";
  ASSERT_TRUE(eventually([&] { return two->lost() && one->lost(); }, scaled(3s)));
  auto all = sem.acquire(5, no_wait());
  EXPECT_TRUE(all.ok()) << "every permit came back: " << all.error().what();
}

// Keys of another type or shape under a lock's name: reported as foreign, never modified.
TEST_F(AdminTest, ForeignKeysAreReportedAndLeftAlone) {
  raw->cmd({"HSET", key_of("h"), "field", "value"});
  raw->cmd({"RPUSH", key_of("l"), "x"});
  raw->cmd({"HSET", key_of("almost"), ":fence", "7", "owner", "not-a-count"});
  for (const char* name : {"h", "l", "almost"}) {
    auto info = inspect_ok(*client, name);
    EXPECT_EQ(info.kind, LockKind::foreign) << name;
    auto r = dlock::force_unlock(*client, name);
    EXPECT_EQ(r.code(), make_error_code(dlock::errc::wrong_type)) << name;
  }
  EXPECT_EQ(inspect_ok(*client, "h").redis_type, "hash");
  EXPECT_EQ(inspect_ok(*client, "l").redis_type, "list");
  EXPECT_EQ(raw->cmd({"HGET", key_of("h"), "field"}), "value");
  EXPECT_EQ(raw->cmd({"LINDEX", key_of("l"), "0"}), "x");
  EXPECT_EQ(raw->cmd({"HGET", key_of("almost"), "owner"}), "not-a-count");
}

// A fencing counter that holds no counter (every acquisition of the name fails: fence_counter_test)
// is reported as such, not as "no token issued yet"; one at the last token is still a counter.
TEST_F(AdminTest, AFencingCounterThatIsNoCounterIsReported) {
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"-5", "'-5'"}, {"9007199254740992", "'9007199254740992'"}, {"abc", "'abc'"}, {"007", "'007'"}, {"", "''"}};
  for (const auto& [stored, shown] : faults) {
    ASSERT_EQ(raw->cmd({"SET", key_of("bad") + ":fence", stored}), "OK");
    auto info = inspect_ok(*client, "bad");
    EXPECT_FALSE(info.fencing_counter) << stored;
    EXPECT_EQ(info.fencing_counter_fault, std::optional<std::string>(shown)) << stored;
  }
  ASSERT_EQ(raw->cmd_int({"DEL", key_of("bad") + ":fence"}), 1);
  ASSERT_EQ(raw->cmd_int({"RPUSH", key_of("bad") + ":fence", "1"}), 1);
  EXPECT_EQ(inspect_ok(*client, "bad").fencing_counter_fault, std::optional<std::string>("a list"));

  for (const char* sound : {"0", "42", "9007199254740990"}) {
    ASSERT_EQ(raw->cmd({"SET", key_of("good") + ":fence", sound}), "OK");
    auto info = inspect_ok(*client, "good");
    EXPECT_EQ(info.fencing_counter, std::optional<std::uint64_t>(std::stoull(sound))) << sound;
    EXPECT_FALSE(info.fencing_counter_fault) << sound;
  }
  // The last token: still the counter, and a fault (nothing that counts can follow it).
  ASSERT_EQ(raw->cmd({"SET", key_of("good") + ":fence", "9007199254740991"}), "OK");
  auto last = inspect_ok(*client, "good");
  EXPECT_EQ(last.fencing_counter, std::optional<std::uint64_t>(9007199254740991ULL));
  ASSERT_TRUE(last.fencing_counter_fault);
  EXPECT_NE(last.fencing_counter_fault->find("the last token"), std::string::npos) << *last.fencing_counter_fault;

  // What a hand wrote is shown safely: control bytes escaped, a long value cut.
  ASSERT_EQ(raw->cmd({"SET", key_of("odd") + ":fence", std::string("a\n\x1b[2Jb'")}), "OK");
  EXPECT_EQ(inspect_ok(*client, "odd").fencing_counter_fault, std::optional<std::string>("'a\\x0a\\x1b[2Jb\\x27'"));
  ASSERT_EQ(raw->cmd({"SET", key_of("odd") + ":fence", std::string(100, 'x')}), "OK");
  EXPECT_EQ(inspect_ok(*client, "odd").fencing_counter_fault,
            std::optional<std::string>("'" + std::string(40, 'x') + "...(100 bytes)'"));
}

// Many names in one pipelined call, in the order asked.
TEST_F(AdminTest, InspectManyNamesAtOnce) {
  dlock::Mutex a(*client, "many-a");
  dlock::SharedMutex b(*client, "many-b");
  auto la = a.acquire();
  auto lb = b.acquire_shared();
  ASSERT_TRUE(la.ok() && lb.ok());
  auto infos = dlock::inspect(*client, std::vector<std::string>{"many-b", "many-free", "many-a"});
  ASSERT_TRUE(infos.ok()) << infos.error().what();
  ASSERT_EQ(infos->size(), 3u);
  EXPECT_EQ((*infos)[0].kind, LockKind::rw);
  EXPECT_EQ((*infos)[1].kind, LockKind::none);
  EXPECT_EQ((*infos)[2].kind, LockKind::mutex);
  EXPECT_EQ((*infos)[2].holders.at(0).owner, la->owner());
}

// async_inspect answers what inspect does, on the event loop, without holding up its caller:
// with the server paused the call returns at once and the answer (a timeout) comes later. A bad
// name is reported at once, on the calling thread.
TEST_F(AdminTest, AsyncInspectAnswersWithoutBlockingItsCaller) {
  dlock::Mutex m(*client, "async-inspect");
  auto lease = m.acquire();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  std::promise<dlock::Result<dlock::LockInfo>> held;
  dlock::async_inspect(*client, "async-inspect", [&](dlock::Result<dlock::LockInfo> r) { held.set_value(std::move(r)); });
  auto info = held.get_future().get();
  ASSERT_TRUE(info.ok()) << info.error().what();
  EXPECT_EQ(info->kind, LockKind::mutex);
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].owner, lease->owner());
  EXPECT_EQ(info->key, key_of("async-inspect"));

  const auto caller = std::this_thread::get_id();
  std::thread::id answered_on;
  dlock::Result<dlock::LockInfo> bad = dlock::Error(dlock::errc::connection, "not called");
  dlock::async_inspect(*client, "bad{name}", [&](dlock::Result<dlock::LockInfo> r) {
    answered_on = std::this_thread::get_id();
    bad = std::move(r);
  });
  EXPECT_EQ(answered_on, caller);
  EXPECT_EQ(bad.code(), make_error_code(dlock::errc::invalid_argument));

  server->pause();
  std::promise<dlock::Result<dlock::LockInfo>> silent;
  const auto t0 = SteadyClock::now();
  dlock::async_inspect(*client, "async-inspect", [&](dlock::Result<dlock::LockInfo> r) { silent.set_value(std::move(r)); });
  EXPECT_LT(ms_since(t0), 500ms) << "async_inspect blocked its caller";
  auto future = silent.get_future();
  EXPECT_EQ(future.wait_for(300ms), std::future_status::timeout) << "answered while the server was paused";
  ASSERT_EQ(future.wait_for(scaled(10s)), std::future_status::ready) << "no answer after the command timeout";
  const auto late = future.get();
  server->resume();
  EXPECT_EQ(late.code(), make_error_code(dlock::errc::timeout)) << (late.ok() ? "ok" : late.error().what());
}

// A hold taken by one process, released or extended by another through its owner token (what
// `dlock acquire` / `dlock release` do), with the library's own scripts.
TEST_F(AdminTest, ReleaseAndExtendByOwnerToken) {
  dlock::Mutex m(*client, "owned", dlock::test::watchdog(30s));
  auto lease = m.acquire(dlock::test::no_wait());
  ASSERT_TRUE(lease.ok());
  dlock::Client other(server->url());
  auto ext = dlock::extend_owned(other, "owned", lease->owner(), 60s);
  ASSERT_TRUE(ext.ok()) << ext.error().what();
  EXPECT_TRUE(*ext);
  EXPECT_GT(raw->cmd_int({"PTTL", key_of("owned")}), 31000);
  EXPECT_FALSE(dlock::extend_owned(other, "owned", "someone-else", 60s).value());
  EXPECT_EQ(dlock::release_owned(other, "owned", "someone-else").value(), dlock::OwnedRelease::not_held);
  EXPECT_EQ(dlock::release_owned(other, "owned", lease->owner()).value(), dlock::OwnedRelease::released);
  EXPECT_EQ(raw->cmd({"EXISTS", key_of("owned")}), "0");
  EXPECT_EQ(dlock::release_owned(other, "owned", lease->owner()).value(), dlock::OwnedRelease::already_released);
  EXPECT_FALSE(dlock::extend_owned(other, "owned", lease->owner(), 60s).value());  // never re-created
  EXPECT_EQ(raw->cmd({"EXISTS", key_of("owned")}), "0");

  raw->cmd({"HSET", key_of("hashed"), "f", "v"});
  EXPECT_EQ(dlock::release_owned(other, "hashed", "x").code(), dlock::errc::wrong_type);
  EXPECT_EQ(dlock::extend_owned(other, "hashed", "x", 1s).code(), dlock::errc::wrong_type);
  EXPECT_EQ(dlock::extend_owned(other, "owned", "x", 0ms).code(), dlock::errc::invalid_argument);
  EXPECT_EQ(dlock::release_owned(other, "bad{name", "x").code(), dlock::errc::invalid_argument);
}

}  // namespace
