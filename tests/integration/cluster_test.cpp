// Every lock kind on a real Redis Cluster (3 primaries + 3 replicas, started by the harness):
// slot routing, sharded release notifications, MOVED and ASK during a slot migration, and a
// primary killed while locks are held.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include "dlock/dlock.hpp"
#include "support/lock_helpers.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_cluster.hpp"
#include "support/wait.hpp"
#include "util/slot.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

// One cluster for the tests that do not break it (starting one costs a few seconds).
class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new RedisCluster(3, 1); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    // Seeded with one node only: the rest must be discovered.
    client.emplace(cluster_->url_with_seed(0));
    ASSERT_TRUE(client->ping(10s).ok());
  }
  void TearDown() override { client.reset(); }

  RawConnection on_owner(const std::string& key) { return RawConnection(cluster_->node(cluster_->owner_of_key(key))); }

  static RedisCluster* cluster_;
  std::optional<Client> client;
};
RedisCluster* ClusterTest::cluster_ = nullptr;

TEST_F(ClusterTest, MutexOnNamesSpreadOverAllSlots) {
  std::set<std::size_t> owners;
  std::set<std::uint16_t> slots;
  for (int i = 0; i < 120; ++i) {
    const std::string name = "spread-" + std::to_string(i);
    Mutex m(*client, name);
    auto lease = m.acquire(no_wait());
    ASSERT_TRUE(lease.ok()) << name << ": " << lease.error().what();
    slots.insert(detail::key_slot(key_of(name)));
    if (i % 10 == 0) {
      // The key lives where the cluster says its slot lives, with our token in it.
      const std::size_t owner = cluster_->owner_of_key(key_of(name));
      owners.insert(owner);
      RawConnection c(cluster_->node(owner));
      EXPECT_EQ(c.cmd({"GET", key_of(name)}), lease->owner());
    }
    ASSERT_TRUE(lease->release().ok());
  }
  EXPECT_GE(slots.size(), 100u);
  EXPECT_EQ(owners.size(), 3u) << "names should land on every primary";
}

TEST_F(ClusterTest, EveryKindWorks) {
  {
    ReentrantMutex r(*client, "kinds-reentrant");
    r.lock();
    r.lock();
    r.unlock();
    r.unlock();
  }
  {
    FairLock f(*client, "kinds-fair");
    auto l = f.acquire(no_wait());
    ASSERT_TRUE(l.ok()) << l.error().what();
    ASSERT_TRUE(l->release().ok());
  }
  {
    SharedMutex rw(*client, "kinds-rw");
    auto r1 = rw.acquire_shared(no_wait());
    auto r2 = rw.acquire_shared(no_wait());
    ASSERT_TRUE(r1.ok() && r2.ok());
    EXPECT_EQ(rw.acquire(no_wait()).code(), errc::busy);
    ASSERT_TRUE(r1->release().ok());
    ASSERT_TRUE(r2->release().ok());
    auto w = rw.acquire(no_wait());
    ASSERT_TRUE(w.ok()) << w.error().what();
  }
  {
    Semaphore s(*client, "kinds-sem", 2);
    auto a = s.acquire(2, no_wait());
    ASSERT_TRUE(a.ok()) << a.error().what();
    EXPECT_EQ(s.acquire(1, no_wait()).code(), errc::busy);
  }
}

// Names in different slots cannot share a script: the MultiLock takes them slot by slot, in a
// fixed order, all-or-nothing, and two overlapping MultiLocks do not deadlock.
TEST_F(ClusterTest, MultiLockAcrossSlotsIsAllOrNothing) {
  std::vector<std::string> names;
  std::set<std::size_t> owners;
  for (int i = 0; owners.size() < 3 && i < 100; ++i) {
    std::string n = "ml-" + std::to_string(i);
    if (owners.insert(cluster_->owner_of_key(key_of(n))).second) names.push_back(n);
  }
  ASSERT_EQ(names.size(), 3u);
  MultiLock all(*client, names, watchdog(5s));
  auto lease = all.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  for (const auto& n : names) {
    RawConnection c = on_owner(key_of(n));
    EXPECT_EQ(c.cmd({"EXISTS", key_of(n)}), "1") << n;
  }
  // Overlapping on one name: busy, and nothing of it is left behind.
  Mutex other(*client, "ml-free");
  MultiLock overlap(*client, {"ml-free", names[1]});
  EXPECT_EQ(overlap.acquire(no_wait()).code(), errc::busy);
  EXPECT_EQ(on_owner(key_of("ml-free")).cmd({"EXISTS", key_of("ml-free")}), "0");
  ASSERT_TRUE(lease->release().ok());
  for (const auto& n : names) EXPECT_EQ(on_owner(key_of(n)).cmd({"EXISTS", key_of(n)}), "0") << n;

  // Two MultiLocks over the same names in opposite orders, from several threads: no deadlock.
  std::vector<std::string> reversed(names.rbegin(), names.rend());
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      MultiLock m(*client, t % 2 ? names : reversed);
      for (int i = 0; i < 10; ++i) {
        auto l = m.acquire(WaitOptions{.timeout = 20s});
        if (l.ok()) (void)l->release();
      }
      ++done;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 4);
}

TEST_F(ClusterTest, ReleaseWakesTheWaiterThroughShardedPubSub) {
  const std::string name = "sharded-wake";
  Client other(cluster_->url_with_seed(1));
  Mutex holder_lock(*client, name, watchdog(30s));
  Mutex waiter_lock(other, name);
  auto held = holder_lock.acquire(no_wait());
  ASSERT_TRUE(held.ok());
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    WaitOptions w;
    w.timeout = 20s;
    auto l = waiter_lock.acquire(w);
    got = l.ok();
  });
  // The waiter is subscribed on the shard that owns the lock, with SSUBSCRIBE (not SUBSCRIBE).
  const std::string channel = key_of(name) + ":ch";
  ASSERT_TRUE(eventually(
      [&] {
        auto c = on_owner(key_of(name));
        auto n = c.cmd_array({"PUBSUB", "SHARDNUMSUB", channel});
        return n.size() == 2 && n[1] == "1";
      },
      5s));
  {
    auto c = on_owner(key_of(name));
    EXPECT_EQ(c.cmd_array({"PUBSUB", "NUMSUB", channel})[1], "0");
  }
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  waiter.join();
  EXPECT_TRUE(got);
  // Woken by the notification, far sooner than the holder's 30 s TTL.
  EXPECT_LT(ms_since(t0), 10s);
}

// Redisson mode takes names as they are; one with a brace is its own hash tag, and the channel
// and the per-take release latch must name the same slot (Redisson's prefixName), or every
// release fails with CROSSSLOT and the watchdog keeps the lock for as long as the Lease lives.
TEST_F(ClusterTest, RedissonNamesWithBracesReleaseAndWakeWaiters) {
  ReentrantMutex::Options redisson;
  redisson.redisson_compat = true;
  for (const std::string name : {"app{shard-1}:lock", "orders", "{x}"}) {
    SCOPED_TRACE(name);
    Client other(cluster_->url_with_seed(1));
    ReentrantMutex holder_lock(*client, name, redisson);
    ReentrantMutex waiter_lock(other, name, redisson);
    auto held = holder_lock.acquire(no_wait());
    ASSERT_TRUE(held.ok()) << held.error().what();
    const std::string channel = name.find('{') != std::string::npos ? "redisson_lock__channel:" + name
                                                                     : "redisson_lock__channel:{" + name + "}";
    ASSERT_EQ(detail::key_slot(channel), detail::key_slot(name));
    std::atomic<bool> got{false};
    std::thread waiter([&] {
      WaitOptions w;
      w.timeout = 5s;  // far below the 30 s TTL: only the release can wake it in time
      auto l = waiter_lock.acquire(w);
      got = l.ok();
      if (l.ok()) {
        EXPECT_TRUE(l->release().ok()) << "the waiter's release";
      }
    });
    EXPECT_TRUE(eventually(
        [&] {
          auto c = on_owner(name);
          auto n = c.cmd_array({"PUBSUB", "SHARDNUMSUB", channel});
          return n.size() == 2 && n[1] == "1";
        },
        5s))
        << "the waiter listens on Redisson's channel, on the shard of the lock";
    const auto t0 = SteadyClock::now();
    auto released = held->release();
    EXPECT_TRUE(released.ok()) << released.error().what();
    waiter.join();
    EXPECT_TRUE(got) << "woken by the release within 5 s, not by the 30 s TTL";
    EXPECT_LT(ms_since(t0), 10s);
    EXPECT_EQ(on_owner(name).cmd_int({"EXISTS", name}), 0);
  }
  // A name whose channel and latch would hash to other slots is refused up front.
  for (const std::string name : {"a{}b", "a{b", "a}b"}) {
    try {
      ReentrantMutex bad(*client, name, redisson);
      ADD_FAILURE() << name << " was accepted";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), make_error_code(errc::invalid_argument)) << name;
      EXPECT_NE(std::string(e.what()).find("hash tag"), std::string::npos) << e.what();
    }
  }
}

TEST_F(ClusterTest, ScriptsSurviveAFlushedScriptCache) {
  Mutex m(*client, "flushed");
  ASSERT_TRUE(m.acquire(no_wait())->release().ok());
  for (std::size_t p : cluster_->primaries()) RawConnection(cluster_->node(p)).cmd({"SCRIPT", "FLUSH"});
  auto l = m.acquire(no_wait());
  ASSERT_TRUE(l.ok()) << l.error().what();
  EXPECT_TRUE(l->release().ok());
}

TEST_F(ClusterTest, PrimariesAndPerNodeCommands) {
  for (int i = 0; i < 30; ++i) {
    Mutex m(*client, "per-node-" + std::to_string(i));
    ASSERT_TRUE(m.acquire(no_wait()).ok());  // its fence counter stays: keys on every node
  }
  auto nodes = client->primaries();
  ASSERT_EQ(nodes.size(), 3u);
  long long keys = 0;
  for (const auto& n : nodes) {
    auto r = client->command_on(n, {"DBSIZE"});
    ASSERT_TRUE(r.ok()) << r.error().what();
    keys += r->integer();
  }
  EXPECT_GE(keys, 30);  // at least the 30 fence counters, spread over the nodes
  EXPECT_EQ(client->deployment().kind, Deployment::Kind::cluster);
}

TEST_F(ClusterTest, CrossSlotCommandsGetAClearError) {
  auto r = client->command({"MSET", "{a}x", "1", "{b}y", "2"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("CROSSSLOT"), std::string::npos) << r.error().what();
}

// A command whose key is not its first argument is routed by a guess; a MOVED then sends it
// where the redirect says (it went back to the guessed node until "too many redirections").
TEST_F(ClusterTest, CommandsWhoseKeyIsNotFirstFollowMoved) {
  std::set<std::size_t> owners;
  for (int i = 0; i < 40; ++i) {
    const std::string k = "enc-" + std::to_string(i);
    owners.insert(cluster_->owner_of_key(k));
    ASSERT_EQ(on_owner(k).cmd({"SET", k, "12345"}), "OK");
    auto r = client->command({"OBJECT", "ENCODING", k});
    ASSERT_TRUE(r.ok()) << k << ": " << r.error().what();
    EXPECT_EQ(r->str(), "int") << k;
  }
  EXPECT_EQ(owners.size(), 3u) << "keys on every primary";
}

// Slot migration: the lock's keys move to another primary while the lock is held. The renewals
// follow (ASK while migrating, MOVED after), the lease is not lost, unlock works on the new owner.
TEST_F(ClusterTest, HeldLockSurvivesASlotMigration) {
  const std::string name = "migrating";
  const std::string key = key_of(name);
  const auto slot = detail::key_slot(key);
  LossProbe probe;
  auto opts = watchdog(900ms);
  probe.attach(opts);
  Mutex m(*client, name, opts);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok());
  const std::size_t from = cluster_->owner_of_slot(slot);
  std::size_t to = from;
  for (std::size_t p : cluster_->primaries()) {
    if (p != from) to = p;
  }
  ASSERT_NE(from, to);
  // Half-way: only the lock key moves; the fence counter stays behind (ASK for the lock key,
  // TRYAGAIN for scripts that need both until the migration ends).
  cluster_->begin_migration(slot, from, to, {key});
  std::this_thread::sleep_for(1500ms);  // more than a TTL: renewals had to go through ASK
  EXPECT_TRUE(lease->held());
  cluster_->finish_migration(slot, from, to);
  std::this_thread::sleep_for(1500ms);  // renewals now meet MOVED and follow it
  EXPECT_TRUE(lease->held());
  EXPECT_EQ(probe.calls.load(), 0);
  RawConnection target(cluster_->node(to));
  EXPECT_EQ(target.cmd({"GET", key}), lease->owner());
  ASSERT_TRUE(lease->release().ok());
  EXPECT_EQ(target.cmd({"EXISTS", key}), "0");
  // And the next acquisition goes to the new owner straight away.
  auto again = m.acquire(no_wait());
  ASSERT_TRUE(again.ok()) << again.error().what();
  EXPECT_GT(again->token().value, lease->token().value);
  // Put the slot back so the suite's other tests see the original layout.
  ASSERT_TRUE(again->release().ok());
  cluster_->begin_migration(slot, to, from);
  cluster_->finish_migration(slot, to, from);
}

// A single-key command for a key that already moved answers ASK: followed with ASKING.
// A waiter's sharded subscription lives on the shard of the lock's slot. When the slot moves,
// the old owner drops it ("sunsubscribe"); the waiter subscribes on the new owner and is still
// woken by the release, long before the holder's TTL.
TEST_F(ClusterTest, WaiterFollowsItsSlotToTheNewOwner) {
  const std::string name = "moving-waiter";
  const std::string key = key_of(name);
  const std::string channel = key + ":ch";
  const auto slot = detail::key_slot(key);
  Client other(cluster_->url_with_seed(2));
  Mutex holder(*client, name, watchdog(30s));
  Mutex waiter(other, name);
  auto held = holder.acquire(no_wait());
  ASSERT_TRUE(held.ok());
  auto pending = std::async(std::launch::async, [&] { return waiter.acquire(WaitOptions{.timeout = 25s}); });
  const std::size_t from = cluster_->owner_of_slot(slot);
  std::size_t to = from;
  for (std::size_t p : cluster_->primaries()) {
    if (p != from) to = p;
  }
  auto subscribed_on = [&](std::size_t node) {
    RawConnection c(cluster_->node(node));
    auto n = c.cmd_array({"PUBSUB", "SHARDNUMSUB", channel});
    return n.size() == 2 && n[1] == "1";
  };
  ASSERT_TRUE(eventually([&] { return subscribed_on(from); }, scaled(5s)));
  cluster_->begin_migration(slot, from, to);
  cluster_->finish_migration(slot, from, to);
  EXPECT_TRUE(eventually([&] { return subscribed_on(to); }, scaled(10s))) << "the subscription did not follow";
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  auto got = pending.get();
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_LT(ms_since(t0), 10s);  // woken by the release on the new owner, not the 30 s TTL
  ASSERT_TRUE(got->release().ok());
  cluster_->begin_migration(slot, to, from);
  cluster_->finish_migration(slot, to, from);
}

TEST_F(ClusterTest, CommandsFollowAskDuringMigration) {
  const std::string key = "{asked}plain";
  const auto slot = detail::key_slot(key);
  ASSERT_TRUE(client->command({"SET", key, "v1"}).ok());
  const std::size_t from = cluster_->owner_of_slot(slot);
  std::size_t to = from;
  for (std::size_t p : cluster_->primaries()) {
    if (p != from) to = p;
  }
  cluster_->begin_migration(slot, from, to, {key});
  auto r = client->command({"GET", key});
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->str(), "v1");
  cluster_->finish_migration(slot, from, to);
  cluster_->begin_migration(slot, to, from);
  cluster_->finish_migration(slot, to, from);
}

// A lock script names several keys of one slot. While the slot migrates and only some of them
// have moved, the importing node answers TRYAGAIN: the acquisition is retried (within the command
// timeout) and succeeds once the migration ends.
TEST_F(ClusterTest, AcquireRetriesTryAgainUntilTheMigrationEnds) {
  const std::string name = "tryagain";
  const std::string key = key_of(name);
  const auto slot = detail::key_slot(key);
  Mutex m(*client, name);
  ASSERT_TRUE(m.acquire(no_wait())->release().ok());  // creates the fence counter and :rel marker
  const std::size_t from = cluster_->owner_of_slot(slot);
  std::size_t to = from;
  for (std::size_t p : cluster_->primaries()) {
    if (p != from) to = p;
  }
  cluster_->begin_migration(slot, from, to);
  std::thread finisher([&] {
    std::this_thread::sleep_for(300ms);
    cluster_->finish_migration(slot, from, to);
  });
  auto lease = m.acquire(no_wait());
  finisher.join();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  RawConnection target(cluster_->node(to));
  EXPECT_EQ(target.cmd({"GET", key}), lease->owner());
  ASSERT_TRUE(lease->release().ok());
  cluster_->begin_migration(slot, to, from);
  cluster_->finish_migration(slot, to, from);
}

// A primary dies while locks on its slots are held and a replica is promoted. Each lease is then
// either still held (the replica had the key and renewals reach it) or reported lost — never
// silently both: a lease that says held has its token in the new primary.
TEST(ClusterFailoverTest, PrimaryKilledWhileLocksAreHeld) {
  RedisCluster cluster(3, 1);
  Client client(cluster.url());
  ASSERT_TRUE(client.ping(10s).ok());
  const std::size_t victim = cluster.primaries().front();
  std::vector<std::string> names;
  for (int i = 0; names.size() < 5 && i < 500; ++i) {
    std::string n = "fo-" + std::to_string(i);
    if (cluster.owner_of_key(key_of(n)) == victim) names.push_back(n);
  }
  ASSERT_EQ(names.size(), 5u);
  std::vector<std::unique_ptr<Mutex>> locks;
  std::vector<Lease> leases;
  std::vector<std::unique_ptr<LossProbe>> probes;
  for (const auto& n : names) {
    probes.push_back(std::make_unique<LossProbe>());
    auto o = watchdog(3s);
    probes.back()->attach(o);
    locks.push_back(std::make_unique<Mutex>(client, n, o));
    auto l = locks.back()->acquire(no_wait());
    ASSERT_TRUE(l.ok()) << l.error().what();
    leases.push_back(std::move(*l));
  }
  // Let the replica catch up, then kill the primary.
  std::this_thread::sleep_for(200ms);
  const std::size_t promoted = cluster.kill_primary_and_wait_failover(victim);
  std::this_thread::sleep_for(4s);  // more than a TTL: every lease was renewed or lost by now
  RawConnection now(cluster.node(promoted));
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (leases[i].held()) {
      EXPECT_EQ(now.cmd({"GET", key_of(names[i])}), leases[i].owner()) << names[i] << " says held but is not";
    } else {
      EXPECT_TRUE(leases[i].lost());
      EXPECT_EQ(probes[i]->calls.load(), 1) << names[i];
    }
  }
  // New acquisitions on the promoted node work, with tokens above the old ones.
  Mutex fresh(client, "fo-after-" + names[0]);
  auto l = fresh.acquire(no_wait());
  ASSERT_TRUE(l.ok()) << l.error().what();
  for (auto& lease : leases) (void)lease.release();
}

// A primary that died and was failed over stays dead: a Client must not keep asking for a new
// slot map because of it. Each reconnect attempt to it went down again and asked for one, about
// once a second per Client for as long as the node stayed dead.
TEST(ClusterFailoverTest, ADeadFormerPrimaryDoesNotKeepTheMapRefreshing) {
  RedisCluster cluster(3, 1);
  const std::size_t victim = cluster.primaries().front();
  const std::size_t survivor = cluster.primaries().back();
  Client all_seeds(cluster.url());                    // the dead node stays a seed
  Client one_seed(cluster.url_with_seed(survivor));  // the dead node was only learnt from the map
  ASSERT_TRUE(all_seeds.ping(10s).ok());
  ASSERT_TRUE(one_seed.ping(10s).ok());
  const std::size_t promoted = cluster.kill_primary_and_wait_failover(victim);
  // Both follow the promoted replica.
  std::string name;
  for (int i = 0; name.empty() && i < 500; ++i) {
    const std::string n = "dead-" + std::to_string(i);
    if (cluster.owner_of_key(key_of(n)) == promoted) name = n;
  }
  ASSERT_FALSE(name.empty());
  for (Client* c : {&all_seeds, &one_seed}) {
    Mutex m(*c, name);
    ASSERT_TRUE(eventually([&] { return m.acquire(no_wait()).ok(); }, 10s));
  }
  std::this_thread::sleep_for(1s);  // refreshes the failover itself asked for are over
  auto slots_calls = [&] {
    long long total = 0;
    for (std::size_t i = 0; i < cluster.size(); ++i) {
      if (i == victim) continue;
      const std::string info = RawConnection(cluster.node(i)).cmd({"INFO", "commandstats"});
      const std::string field = "cmdstat_cluster|slots:calls=";
      const auto at = info.find(field);
      if (at != std::string::npos) total += std::stoll(info.substr(at + field.size()));
    }
    return total;
  };
  const long long before = slots_calls();
  std::this_thread::sleep_for(5s);
  const long long asked = slots_calls() - before;
  EXPECT_LE(asked, 2) << "CLUSTER SLOTS calls in 5 s by two idle Clients with one dead node";
}

// ~Client first lets its waits leave their queues, then releases its leases; a wait whose
// cleanup is stuck on a paused primary (its dequeue unanswered until the command timeout, 3 s,
// beyond the shutdown's 2 s) must not keep the leases on the other primaries from being
// released: they go out after half the shutdown's time at the latest. Waiting for every
// cleanup first sent them only once the connections had closed, and the key sat out its TTL.
TEST(ClusterShutdownTest, ACleanupStuckOnAPausedPrimaryDoesNotHoldBackTheOtherReleases) {
  RedisCluster cluster(3, 0);  // no replicas: a paused primary is not failed over
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    // The other primaries keep serving their slots while one is paused.
    RawConnection c(cluster.node(i));
    ASSERT_EQ(c.cmd({"CONFIG", "SET", "cluster-require-full-coverage", "no"}), "OK");
  }
  const std::string waited = "stuck-wait";
  const std::size_t paused = cluster.owner_of_key(key_of(waited));
  std::string held;
  for (int i = 0; held.empty() && i < 500; ++i) {
    std::string n = "released-" + std::to_string(i);
    if (cluster.owner_of_key(key_of(n)) != paused) held = n;
  }
  ASSERT_FALSE(held.empty());
  RawConnection on_held(cluster.node(cluster.owner_of_key(key_of(held))));
  RawConnection on_paused(cluster.node(paused));

  Client other(cluster.url());
  FairLock fair_holder(other, waited);
  auto fair_held = fair_holder.acquire(no_wait());
  ASSERT_TRUE(fair_held.ok()) << fair_held.error().what();
  auto going = std::make_unique<Client>(cluster.url());
  Mutex m(*going, held);
  auto lease = m.acquire(no_wait());
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  auto waiter = std::make_shared<FairLock>(*going, waited);
  auto waiting = std::async(std::launch::async, [waiter] { return waiter->acquire(WaitOptions{60s, 10s}); });
  ASSERT_TRUE(eventually([&] { return on_paused.cmd_int({"LLEN", key_of(waited) + ":queue"}) == 1; }, 5s));

  cluster.node(paused).pause();
  struct Resume {
    RedisServer& s;
    ~Resume() { s.resume(); }
  } resume{cluster.node(paused)};
  const auto t0 = std::chrono::steady_clock::now();
  going.reset();
  EXPECT_LT(ms_since(t0), 4500ms);
  EXPECT_EQ(on_held.cmd({"GET", key_of(held)}), "(nil)") << "the lease on the other primary was not released";
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(waiting.get().code(), make_error_code(errc::shutdown));
}

}  // namespace
}  // namespace dlock::test

