// Integration tests of the `dlock` CLI on the production deployments of issue #5: a real Redis
// Cluster (3 primaries + 3 replicas), a Sentinel-managed primary with a replica, and Redlock over
// independent servers (--redlock). Every deployment is started by the harness on free loopback
// ports and torn down; the binary is the real one (as in cli_test.cpp).

#include <gtest/gtest.h>

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/mutex.hpp"
#include "support/cli_binary.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_sentinel.hpp"
#include "support/server_group.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::CommandResult;
using dlock::test::RawConnection;
using dlock::test::RedisCluster;
using dlock::test::RedisSentinelGroup;
using dlock::test::ServerGroup;
using dlock::test::eventually;
using dlock::test::scaled;

using dlock::test::cli_binary;

// Runs the CLI with `args`, nothing inherited from the caller's DLOCK_* variables.
CommandResult run_dlock(const std::vector<std::string>& args, std::vector<std::pair<std::string, std::string>> env = {}) {
  std::vector<std::string> argv{cli_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::pair<std::string, std::string>> all = {
      {"DLOCK_REDIS_URL", ""}, {"DLOCK_PREFIX", ""}, {"DLOCK_OWNER", ""}, {"DLOCK_REDIS_PASSWORD", ""}, {"DLOCK_REDIS_USER", ""}};
  for (auto& [name, value] : env) {
    bool replaced = false;
    for (auto& [n, v] : all) {
      if (n == name) {
        v = value;
        replaced = true;
      }
    }
    if (!replaced) all.emplace_back(name, value);
  }
  return dlock::test::run_command(argv, all, scaled(60s));
}

std::string describe(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

// "DLOCK_OWNER=..." from acquire's output (the value possibly single-quoted).
std::string owner_of(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("DLOCK_OWNER=", 0) != 0) continue;
    std::string v = line.substr(12);
    if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
    return v;
  }
  return {};
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

std::string key_of(const std::string& name) { return "dlock:{" + name + "}"; }

// Starts the CLI in the background (to signal it), with no DLOCK_* variables from the caller
// and its output discarded.
std::unique_ptr<dlock::test::ChildProcess> start_dlock(const std::vector<std::string>& args) {
  struct Prepared {
    std::vector<std::string> argv, env;
    std::vector<char*> cargv, cenv;
  };
  auto prep = std::make_shared<Prepared>();
  prep->argv.push_back(cli_binary());
  prep->argv.insert(prep->argv.end(), args.begin(), args.end());
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::string_view(*e).substr(0, 6) != "DLOCK_") prep->env.emplace_back(*e);
  }
  for (auto& a : prep->argv) prep->cargv.push_back(a.data());
  prep->cargv.push_back(nullptr);
  for (auto& e : prep->env) prep->cenv.push_back(e.data());
  prep->cenv.push_back(nullptr);
  return std::make_unique<dlock::test::ChildProcess>([prep]() -> int {
    dlock::test::detail::reset_signals();
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd < 0) return 125;
    for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) ::dup2(null_fd, fd);
    dlock::test::detail::close_fds_from(3);
    ::execve(prep->cargv[0], prep->cargv.data(), prep->cenv.data());
    return 127;
  });
}

// ---------------------------------------------------------------------------------- Cluster

// One cluster for the suite (starting one costs seconds); each test uses its own lock names.
class CliClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cli_binary().empty()) cluster_ = new RedisCluster(3, 1);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (cli_binary().empty()) GTEST_SKIP() << "the dlock CLI is not built";
  }
  // Seeded with one node only: the rest of the cluster must be discovered.
  std::vector<std::string> with_url(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--redis", "redis-cluster://127.0.0.1:" + std::to_string(cluster_->node(0).port())});
    return args;
  }
  // `per_primary` names with `stem` on each primary of the cluster: name -> node index.
  std::map<std::string, std::size_t> names_on_every_primary(const std::string& stem, std::size_t per_primary) {
    std::map<std::string, std::size_t> names;
    std::map<std::size_t, std::size_t> count;
    for (int i = 0; i < 1000 && names.size() < 3 * per_primary; ++i) {
      const std::string name = stem + "-" + std::to_string(i);
      const std::size_t owner = cluster_->owner_of_key(key_of(name));
      if (count[owner] < per_primary) {
        ++count[owner];
        names.emplace(name, owner);
      }
    }
    return names;
  }

  static RedisCluster* cluster_;
};
RedisCluster* CliClusterTest::cluster_ = nullptr;

TEST_F(CliClusterTest, ListLeaksAndStatusSeeLocksOnEveryPrimary) {
  const auto names = names_on_every_primary("spread", 2);
  ASSERT_EQ(names.size(), 6u);
  std::set<std::size_t> primaries;
  std::map<std::string, std::string> owners;
  for (const auto& [name, node] : names) {
    primaries.insert(node);
    auto r = run_dlock(with_url({"acquire", name, "--ttl", "2m"}));
    ASSERT_EQ(r.exit_code, 0) << name << ": " << describe(r);
    owners[name] = owner_of(r.out);
    // The lock lives on the primary that serves its slot.
    RawConnection raw(cluster_->node(node));
    EXPECT_EQ(raw.cmd({"GET", key_of(name)}), owners[name]) << name;
  }
  ASSERT_EQ(primaries.size(), 3u);
  // A key without expiry under a lock name, on one primary: a leak only a scan of that node sees.
  const std::string leaked = names_on_every_primary("leaky", 1).begin()->first;
  RawConnection(cluster_->node(cluster_->owner_of_key(key_of(leaked)))).cmd({"SET", key_of(leaked), "not-a-token"});

  auto list = run_dlock(with_url({"list", "--json"}));
  ASSERT_EQ(list.exit_code, 0) << describe(list);
  for (const auto& [name, node] : names) {
    EXPECT_NE(list.out.find("\"name\":\"" + name + "\""), std::string::npos) << name << " on node " << node << ": " << list.out;
    EXPECT_NE(list.out.find(owners[name]), std::string::npos) << name;
  }
  EXPECT_NE(list.out.find("\"name\":\"" + leaked + "\""), std::string::npos) << list.out;
  auto pattern = run_dlock(with_url({"list", "spread-*"}));
  ASSERT_EQ(pattern.exit_code, 0) << describe(pattern);
  for (const auto& [name, node] : names) EXPECT_NE(pattern.out.find(name), std::string::npos) << name;
  EXPECT_EQ(pattern.out.find(leaked), std::string::npos) << pattern.out;

  auto leaks = run_dlock(with_url({"leaks"}));
  EXPECT_EQ(leaks.exit_code, 1) << describe(leaks);
  EXPECT_NE(leaks.out.find(leaked), std::string::npos) << leaks.out;
  EXPECT_EQ(count_of(leaks.out, "spread-"), 0u) << leaks.out;  // they all expire

  // status, release and unlock --force route by the name's slot.
  for (const auto& [name, node] : names) {
    auto st = run_dlock(with_url({"status", name}));
    ASSERT_EQ(st.exit_code, 0) << describe(st);
    EXPECT_NE(st.out.find("state    held"), std::string::npos) << st.out;
    EXPECT_NE(st.out.find(owners[name]), std::string::npos) << st.out;
    auto rel = run_dlock(with_url({"release", name, owners[name]}));
    EXPECT_EQ(rel.exit_code, 0) << describe(rel);
    EXPECT_EQ(RawConnection(cluster_->node(node)).cmd_int({"EXISTS", key_of(name)}), 0) << name;
  }
  auto force = run_dlock(with_url({"unlock", "--force", leaked}));
  EXPECT_EQ(force.exit_code, 0) << describe(force);
  auto after = run_dlock(with_url({"leaks"}));
  EXPECT_EQ(after.exit_code, 0) << describe(after);
}

// dlock release publishes on the lock's shard (SPUBLISH), where the library's waiters listen:
// a waiter whose rechecks are 10 min apart and whose holder's TTL is minutes long can only learn of
// the release from that notification.
TEST_F(CliClusterTest, ReleaseWakesALibraryWaiterOnTheShard) {
  const std::string name = "wake-" + std::to_string(::getpid());
  auto taken = run_dlock(with_url({"acquire", name, "--ttl", "5m"}));
  ASSERT_EQ(taken.exit_code, 0) << describe(taken);
  dlock::Client client("redis-cluster://127.0.0.1:" + std::to_string(cluster_->node(0).port()));
  ASSERT_TRUE(client.ping(scaled(10s)).ok());
  dlock::Mutex mutex(client, name);
  auto waiter = std::async(std::launch::async, [&] {
    return mutex.acquire(dlock::WaitOptions{scaled(30s), 600s});
  });
  // The waiter is subscribed (on the shard that owns the lock's slot) before the release.
  RawConnection shard(cluster_->node(cluster_->owner_of_key(key_of(name))));
  ASSERT_TRUE(eventually(
      [&] {
        auto counts = shard.cmd_array({"PUBSUB", "SHARDNUMSUB", key_of(name) + ":ch"});
        return counts.size() == 2 && counts[1] == "1";
      },
      scaled(10s), 10ms));
  const auto released_at = std::chrono::steady_clock::now();
  auto rel = run_dlock(with_url({"release", name, owner_of(taken.out)}));
  ASSERT_EQ(rel.exit_code, 0) << describe(rel);
  auto lease = waiter.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(dlock::test::ms_since(released_at), scaled(20s));
  EXPECT_TRUE(lease->release().ok());
}

TEST_F(CliClusterTest, RunHoldsTheLockOnItsPrimary) {
  const auto names = names_on_every_primary("runner", 1);
  for (const auto& [name, node] : names) {
    auto r = run_dlock(with_url({"run", name, "--", "sh", "-c", "echo \"$DLOCK_OWNER\""}));
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_FALSE(r.out.empty());
    // Released on exit, with the release marker next to the key on the same primary.
    RawConnection raw(cluster_->node(node));
    EXPECT_EQ(raw.cmd_int({"EXISTS", key_of(name)}), 0) << name;
    EXPECT_EQ(raw.cmd({"GET", key_of(name) + ":rel"}) + "\n", r.out) << name;
  }
}

TEST_F(CliClusterTest, DoctorChecksEveryPrimary) {
  auto r = run_dlock(with_url({"doctor"}));
  EXPECT_EQ(r.exit_code, 0) << describe(r);  // warnings (persistence, replication) only
  std::set<std::string> primary_ports;
  for (std::size_t i : cluster_->primaries()) primary_ports.insert(std::to_string(cluster_->node(i).port()));
  ASSERT_EQ(primary_ports.size(), 3u);
  for (const auto& port : primary_ports) {
    const std::string node = "[127.0.0.1:" + port + "] ";
    EXPECT_NE(r.out.find("cluster-state     " + node + "cluster_state ok"), std::string::npos) << node << r.out;
    EXPECT_NE(r.out.find("maxmemory-policy  " + node + "noeviction"), std::string::npos) << node << r.out;
    EXPECT_NE(r.out.find("replication       " + node + "primary with 1 replica(s), and replication acknowledgement is off"),
              std::string::npos)
        << node << r.out;
  }
  // Replicas are never checked as primaries.
  for (std::size_t i = 0; i < cluster_->size(); ++i) {
    const std::string port = std::to_string(cluster_->node(i).port());
    if (primary_ports.count(port) == 0) {
      EXPECT_EQ(r.out.find("127.0.0.1:" + port + "]"), std::string::npos) << r.out;
    }
  }

  auto acked = run_dlock(with_url({"doctor", "--replicas", "1", "--json"}));
  EXPECT_EQ(acked.exit_code, 0) << describe(acked);
  EXPECT_EQ(count_of(acked.out, "each acquisition waits for 1 of them to acknowledge"), 3u) << acked.out;
  EXPECT_EQ(count_of(acked.out, "\"check\":\"cluster-state\",\"status\":\"ok\""), 3u) << acked.out;

  auto too_many = run_dlock(with_url({"doctor", "--replicas", "2"}));
  EXPECT_EQ(too_many.exit_code, 78) << describe(too_many);
  EXPECT_EQ(count_of(too_many.out, "--replicas 2 but the primary has 1 connected replica(s)"), 3u) << too_many.out;

  // On a Cluster the notifications are sharded: a user refused SPUBLISH fails the ACL check
  // (one allowed PUBLISH only would pass a standalone probe and still wake no waiter).
  for (std::size_t i = 0; i < cluster_->size(); ++i) {
    RawConnection(cluster_->node(i)).cmd({"ACL", "SETUSER", "nospublish", "on", ">pw", "~dlock:*", "&dlock:*", "+@all", "-spublish"});
  }
  auto acl = run_dlock(with_url({"doctor"}), {{"DLOCK_REDIS_USER", "nospublish"}, {"DLOCK_REDIS_PASSWORD", "pw"}});
  for (std::size_t i = 0; i < cluster_->size(); ++i) RawConnection(cluster_->node(i)).cmd({"ACL", "DELUSER", "nospublish"});
  EXPECT_EQ(acl.exit_code, 78) << describe(acl);
  EXPECT_NE(acl.out.find("is refused: SPUBLISH release notifications"), std::string::npos) << describe(acl);
  EXPECT_NE(acl.out.find("+spublish +ssubscribe"), std::string::npos) << acl.out;
}

// A redis:// URL naming a Cluster node makes dlock treat that node as the whole deployment:
// locks in other nodes' slots fail with MOVED, list and leaks see one node. `doctor` passed it
// (exit 0); now the cluster-mode check fails (78) and names the redis-cluster:// URL to use.
TEST_F(CliClusterTest, DoctorFailsASingleServerUrlNamingAClusterNode) {
  const std::string address = "127.0.0.1:" + std::to_string(cluster_->node(0).port());
  auto r = run_dlock({"--redis", "redis://" + address, "doctor"});
  EXPECT_EQ(r.exit_code, 78) << describe(r);
  EXPECT_NE(r.out.find("FAIL  cluster-mode      this server is a Cluster node (cluster_enabled:1)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fix: use --redis redis-cluster://" + address), std::string::npos) << r.out;
  // The same server through a redis-cluster:// URL: no cluster-mode check, cluster_state ok.
  auto cluster = run_dlock(with_url({"doctor"}));
  EXPECT_EQ(cluster.exit_code, 0) << describe(cluster);
  EXPECT_EQ(cluster.out.find("cluster-mode"), std::string::npos) << cluster.out;
}

// A wait that runs out with its try unanswered is checked on the lock's own primary (the check
// names the lock's key): with that primary paused while the others answer, the exit is 69, not
// 75 (a keyless PING went to another primary, which answered). A cluster of its own, without
// replicas: a paused primary in the shared one would be failed over.
TEST(CliClusterPausedPrimary, WaitRunningOutOnThePausedLocksPrimaryIsUnreachable) {
  if (cli_binary().empty()) GTEST_SKIP() << "the dlock CLI is not built";
  RedisCluster cluster(3, 0);
  std::string name;
  std::size_t owner = 0;
  for (int i = 0; i < 1000 && name.empty(); ++i) {
    const std::string candidate = "paused-" + std::to_string(i);
    owner = cluster.owner_of_key(key_of(candidate));
    if (owner != 0) name = candidate;  // not the seed, which a keyless command would reach
  }
  ASSERT_FALSE(name.empty());
  const std::string url = "redis-cluster://127.0.0.1:" + std::to_string(cluster.node(0).port());
  // The slot map is learnt first; then the lock's primary stops answering.
  auto free = run_dlock({"--redis", url, "run", name, "--no-wait", "--", "true"});
  ASSERT_EQ(free.exit_code, 0) << describe(free);
  cluster.node(owner).pause();
  auto r = run_dlock({"--redis", url, "run", name, "--wait", "600ms", "--conflict-exit-code", "0", "--", "true"});
  cluster.node(owner).resume();
  EXPECT_EQ(r.exit_code, 69) << describe(r);
}

// ---------------------------------------------------------------------------------- Sentinel

TEST(CliSentinelTest, DoctorNamesThePrimaryAndWarnsAboutReplicationAck) {
  if (cli_binary().empty()) GTEST_SKIP() << "the dlock CLI is not built";
  RedisSentinelGroup group(1, 1);
  const std::size_t primary = group.wait_stable();
  const std::string primary_port = std::to_string(group.data_node(primary).port());
  RawConnection raw(group.data_node(primary));
  // Connected and done with the initial sync: only then does it acknowledge writes.
  ASSERT_TRUE(eventually(
      [&] {
        const std::string info = raw.cmd({"INFO", "replication"});
        return info.find("connected_slaves:1") != std::string::npos && info.find("state=online") != std::string::npos;
      },
      scaled(20s), 50ms));

  auto r = run_dlock({"--redis", group.url(), "doctor"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("the sentinels name 127.0.0.1:" + primary_port + " as the primary of '" +
                       std::string(RedisSentinelGroup::master_name) + "'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("primary with 1 replica(s), and replication acknowledgement is off"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--replicas K"), std::string::npos) << r.out;

  auto acked = run_dlock({"--redis", group.url(), "doctor", "--replicas", "1"});
  EXPECT_EQ(acked.exit_code, 0) << describe(acked);
  EXPECT_EQ(acked.out.find("acknowledgement is off"), std::string::npos) << acked.out;
  EXPECT_NE(acked.out.find("each acquisition waits for 1 of them to acknowledge"), std::string::npos) << acked.out;

  // --replicas on acquire: acknowledged by the one replica, and held on the named primary and
  // (replicated) on the replica; with more replicas than there are, it fails closed.
  // Ready to acknowledge: a write of ours is acknowledged by the replica (state=online alone
  // came before the replica's first acknowledgement on this loaded machine).
  ASSERT_TRUE(eventually(
      [&] {
        raw.cmd({"SET", "probe", "1"});
        return raw.cmd_int({"WAIT", "1", "100"}) == 1;
      },
      scaled(10s), 20ms));
  auto taken = run_dlock({"--redis", group.url(), "acquire", "acked", "--ttl", "1m", "--replicas", "1"});
  ASSERT_EQ(taken.exit_code, 0) << describe(taken);
  EXPECT_EQ(raw.cmd({"GET", key_of("acked")}), owner_of(taken.out));
  auto refused = run_dlock({"--redis", group.url(), "acquire", "unacked", "--ttl", "1m", "--replicas", "2", "--json"});
  EXPECT_EQ(refused.exit_code, 76) << describe(refused);
  EXPECT_NE(refused.out.find("\"error\":\"not_replicated\""), std::string::npos) << describe(refused);
  EXPECT_EQ(raw.cmd_int({"EXISTS", key_of("unacked")}), 0);

  // list and status work through the sentinels too.
  auto list = run_dlock({"--redis", group.url(), "list"});
  EXPECT_EQ(list.exit_code, 0) << describe(list);
  EXPECT_NE(list.out.find("acked"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("unacked"), std::string::npos) << list.out;
}

// ---------------------------------------------------------------------------------- Redlock

class CliRedlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cli_binary().empty()) GTEST_SKIP() << "the dlock CLI is not built";
    group.emplace(3);
    auto urls = group->urls();
    for (const auto& u : urls) redlock += (redlock.empty() ? "" : ",") + u;
  }
  std::vector<std::string> with_redlock(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--redlock", redlock});
    return args;
  }
  std::size_t nodes_holding(const std::string& name, const std::string& owner) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < group->size(); ++i) {
      if (group->server(i).running() && group->raw(i).cmd({"GET", key_of(name)}) == owner) ++n;
    }
    return n;
  }

  std::optional<ServerGroup> group;
  std::string redlock;
};

TEST_F(CliRedlockTest, AcquireStatusExtendReleaseOnAMajority) {
  auto taken = run_dlock(with_redlock({"acquire", "job", "--ttl", "1m"}));
  ASSERT_EQ(taken.exit_code, 0) << describe(taken);
  const std::string owner = owner_of(taken.out);
  ASSERT_FALSE(owner.empty()) << taken.out;
  EXPECT_GE(nodes_holding("job", owner), 2u);

  // Another acquirer cannot take it while a majority holds it.
  auto busy = run_dlock(with_redlock({"acquire", "job", "--ttl", "1m", "--no-wait"}));
  EXPECT_EQ(busy.exit_code, 75) << describe(busy);

  auto st = run_dlock(with_redlock({"status", "job", "--json"}));
  ASSERT_EQ(st.exit_code, 0) << describe(st);
  EXPECT_NE(st.out.find("\"state\":\"held\""), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("\"majority\":true"), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("\"owner\":\"" + owner + "\""), std::string::npos) << st.out;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NE(st.out.find("\"node\":\"127.0.0.1:" + std::to_string(group->server(i).port()) + "\""), std::string::npos);
  }

  // One master down: still a majority for extend, and status says which node failed. A Redlock
  // promises a majority only, so the master stopped is one without the key if there is one.
  std::size_t victim = 2;
  for (std::size_t i = 0; i < 3; ++i) {
    if (group->raw(i).cmd({"GET", key_of("job")}) != owner) victim = i;
  }
  std::vector<std::size_t> up;
  for (std::size_t i = 0; i < 3; ++i) {
    if (i != victim) up.push_back(i);
  }
  group->server(victim).kill();
  auto ext = run_dlock(with_redlock({"extend", "job", owner, "--ttl", "2m"}));
  EXPECT_EQ(ext.exit_code, 0) << describe(ext);
  for (std::size_t i : up) {
    const long long pttl = group->raw(i).cmd_int({"PTTL", key_of("job")});
    EXPECT_GT(pttl, 60000) << "node " << i;
  }
  auto st2 = run_dlock(with_redlock({"status", "job"}));
  EXPECT_EQ(st2.exit_code, 0) << describe(st2);
  EXPECT_NE(st2.out.find("127.0.0.1:" + std::to_string(group->server(victim).port()) + ": cannot inspect"),
            std::string::npos)
      << st2.out;
  EXPECT_NE(st2.out.find("state    held: 2 of 3 masters agree"), std::string::npos) << st2.out;

  // A stranger's extend and release are refused (77), and change nothing.
  EXPECT_EQ(run_dlock(with_redlock({"extend", "job", "someone-else", "--ttl", "1s"})).exit_code, 77);
  EXPECT_EQ(run_dlock(with_redlock({"release", "job", "someone-else"})).exit_code, 77);
  EXPECT_EQ(nodes_holding("job", owner), 2u);

  auto rel = run_dlock(with_redlock({"release", "job"}), {{"DLOCK_OWNER", owner}});
  EXPECT_EQ(rel.exit_code, 0) << describe(rel);
  EXPECT_EQ(nodes_holding("job", owner), 0u);
  auto st3 = run_dlock(with_redlock({"status", "job"}));
  EXPECT_NE(st3.out.find("state    free"), std::string::npos) << st3.out;
}

TEST_F(CliRedlockTest, NoMajorityFailsCleanly) {
  group->server(1).kill();
  group->server(2).kill();
  auto r = run_dlock(with_redlock({"acquire", "job", "--ttl", "1m", "--no-wait"}));
  EXPECT_EQ(r.exit_code, 69) << describe(r);  // unreachable: no majority
  // The one reachable master does not keep the failed try's key.
  EXPECT_TRUE(eventually([&] { return group->raw(0).cmd_int({"EXISTS", key_of("job")}) == 0; }, scaled(5s), 20ms));
  // status cannot tell free from held without a majority answering.
  auto st = run_dlock(with_redlock({"status", "job"}));
  EXPECT_EQ(st.exit_code, 69) << describe(st);
  EXPECT_NE(st.out.find("state    unknown: only 1 of 3 masters answered"), std::string::npos) << describe(st);
  // extend cannot reach a majority: an error, not "extended".
  group->raw(0).cmd({"SET", key_of("job"), "tok", "PX", "60000"});
  auto ext = run_dlock(with_redlock({"extend", "job", "tok", "--ttl", "1m"}));
  EXPECT_EQ(ext.exit_code, 69) << describe(ext);
  EXPECT_NE(ext.err.find("only 1 of 3 masters"), std::string::npos) << describe(ext);
}

// A wait that runs out while a paused majority leaves its try unanswered is "unreachable" (69),
// not "held by someone else" (75, which --conflict-exit-code 0 turns into success).
TEST_F(CliRedlockTest, WaitRunningOutOnAPausedMajorityIsUnreachable) {
  group->server(1).pause();
  group->server(2).pause();
  auto r = run_dlock(with_redlock({"run", "paused", "--wait", "600ms", "--conflict-exit-code", "0", "--", "true"}));
  group->server(1).resume();
  group->server(2).resume();
  EXPECT_EQ(r.exit_code, 69) << describe(r);

  // A held lock with one master paused: the majority that answers makes it "held" (75).
  auto taken = run_dlock(with_redlock({"acquire", "paused", "--ttl", "1m"}));
  ASSERT_EQ(taken.exit_code, 0) << describe(taken);
  group->server(2).pause();
  auto busy = run_dlock(with_redlock({"run", "paused", "--wait", "300ms", "--", "true"}));
  group->server(2).resume();
  EXPECT_EQ(busy.exit_code, 75) << describe(busy);
}

// status asks every master at once: two masters that take longer than the command timeout (3 s)
// to answer cost one timeout together, not one each. CLIENT PAUSE WRITE lets the Client's
// connection handshake through and holds the inspect script (a script not flagged no-writes
// counts as a write), so the masters are connected but silent when status asks them; SIGSTOP
// would fail the connections while the Client starts, which costs one timeout either way.
// Measured by hand: 6.0 s asking one master after the other, 3.0 s at once.
TEST_F(CliRedlockTest, StatusAsksEveryMasterAtOnce) {
  group->raw(2).cmd({"SET", key_of("job"), "someone", "PX", "60000"});
  for (std::size_t i = 0; i < 2; ++i) group->raw(i).cmd({"CLIENT", "PAUSE", "20000", "WRITE"});
  const auto started = std::chrono::steady_clock::now();
  auto st = run_dlock(with_redlock({"status", "job"}));
  const auto took = dlock::test::ms_since(started);
  for (std::size_t i = 0; i < 2; ++i) group->raw(i).cmd({"CLIENT", "UNPAUSE"});
  EXPECT_EQ(st.exit_code, 69) << describe(st);
  EXPECT_NE(st.out.find("state    unknown: only 1 of 3 masters answered"), std::string::npos) << describe(st);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_NE(st.out.find("127.0.0.1:" + std::to_string(group->server(i).port()) + ": cannot inspect"), std::string::npos)
        << describe(st);
  }
  EXPECT_NE(st.out.find("127.0.0.1:" + std::to_string(group->server(2).port()) + ": mutex"), std::string::npos)
      << describe(st);
  // Asking the two silent masters one after the other costs two command timeouts (6 s) at the
  // least, whatever the machine's speed; at once, one.
  EXPECT_LT(took, std::chrono::milliseconds(6000)) << describe(st);
}

// The status line asks the first master, which is silent here, while a majority (the other two)
// answers the wait. The line must not hold up the wait's loop (its signals, the lock's arrival)
// until that question times out: it says after a second that the master has not answered.
// Before, its blocking inspect printed nothing until the connection to the master timed out
// (3 s), after the 1.5 s wait had already run out.
TEST_F(CliRedlockTest, ASilentFirstMasterDoesNotHoldUpTheStatusLine) {
  for (std::size_t i = 1; i < 3; ++i) group->raw(i).cmd({"SET", key_of("quiet"), "thief", "PX", "60000"});
  group->server(0).pause();
  auto r = run_dlock(with_redlock({"-v", "run", "quiet", "--wait", "1500ms", "--", "true"}));
  group->server(0).resume();
  EXPECT_EQ(r.exit_code, 75) << describe(r);
  const std::string silent = "dlock: waiting for mutex lock 'quiet' (no answer from 127.0.0.1:" +
                             std::to_string(group->server(0).port()) + " for 1s";
  EXPECT_NE(r.err.find(silent), std::string::npos) << describe(r);
  // Printed while the wait went on, not after it ended.
  EXPECT_LT(r.err.find(silent), r.err.find("timed out waiting for Redlock 'quiet'")) << describe(r);
}

TEST_F(CliRedlockTest, RunHoldsAMajorityAndReleasesEverywhere) {
  // The command sees the lock held on the masters while it runs.
  const std::string script = "echo \"$DLOCK_OWNER\"; for p in " + std::to_string(group->server(0).port()) + " " +
                             std::to_string(group->server(1).port()) + " " + std::to_string(group->server(2).port()) +
                             "; do redis-cli -p $p GET 'dlock:{nightly}'; done";
  auto r = run_dlock(with_redlock({"run", "nightly", "--", "sh", "-c", script}));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::istringstream lines(r.out);
  std::string owner, line;
  std::getline(lines, owner);
  ASSERT_FALSE(owner.empty());
  std::size_t seen = 0;
  while (std::getline(lines, line)) seen += line == owner;
  EXPECT_GE(seen, 2u) << r.out;
  EXPECT_TRUE(eventually([&] { return nodes_holding("nightly", owner) == 0; }, scaled(5s), 20ms))
      << nodes_holding("nightly", owner) << " masters still hold " << owner << "\n" << describe(r);

  // Held by another (acquire): run --no-wait is refused with the conflict code.
  auto taken = run_dlock(with_redlock({"acquire", "nightly", "--ttl", "1m"}));
  ASSERT_EQ(taken.exit_code, 0) << describe(taken);
  auto refused = run_dlock(with_redlock({"run", "nightly", "--no-wait", "--", "true"}));
  EXPECT_EQ(refused.exit_code, 75) << describe(refused);
}

// Another owner's key on a majority of the masters: run's renewal reports the Redlock lost, the
// command is stopped and dlock exits 70; the other owner's keys are never overwritten.
TEST_F(CliRedlockTest, RunStopsTheCommandWhenAMajorityIsTaken) {
  const auto started = std::chrono::steady_clock::now();
  auto running = std::async(std::launch::async, [&] {
    return run_dlock(with_redlock({"run", "stolen", "--ttl", "3s", "--grace", "500ms", "--", "sleep", "100"}));
  });
  std::string owner;
  ASSERT_TRUE(eventually(
      [&] {
        owner = group->raw(0).cmd({"GET", key_of("stolen")});
        return owner != "(nil)" && nodes_holding("stolen", owner) >= 2;
      },
      scaled(10s), 10ms));
  for (std::size_t i = 0; i < 3; ++i) group->raw(i).cmd({"SET", key_of("stolen"), "thief", "PX", "60000"});
  const auto taken_at = std::chrono::steady_clock::now();
  ASSERT_EQ(running.wait_for(scaled(20s)), std::future_status::ready) << "the loss was not noticed";
  const CommandResult r = running.get();
  EXPECT_EQ(r.exit_code, 70) << describe(r);
  // Renewals run every ttl/3 (1 s): the loss is seen at the next one, not when sleep ends.
  EXPECT_LT(dlock::test::ms_since(taken_at), scaled(15s)) << describe(r);
  EXPECT_LT(dlock::test::ms_since(started), 100s);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(group->raw(i).cmd({"GET", key_of("stolen")}), "thief") << "node " << i;
}

// A signal and a release arriving together: whichever wins, no master keeps a key of dlock's.
// The try that the release's notification started takes the lock on every master, and its
// late win is given back from the first master's loop; before, dlock settled with the first
// master only and could exit before that release had reached the others.
TEST_F(CliRedlockTest, SigtermRacingAReleaseLeavesNoKeyOnAnyMaster) {
  const std::string foreign = "0123456789abcdef0123456789abcdef@otherhost:4242:1700000000000";
  for (int i = 0; i < 12; ++i) {
    const std::string name = "race" + std::to_string(i);
    for (std::size_t n = 0; n < group->size(); ++n) group->raw(n).cmd({"SET", key_of(name), foreign, "PX", "30000"});
    auto bg = start_dlock(with_redlock({"run", name, "--wait", "30s", "--", "sleep", "5"}));
    ASSERT_TRUE(eventually(
        [&] {
          for (std::size_t n = 0; n < group->size(); ++n) {
            auto r = group->raw(n).cmd_array({"PUBSUB", "NUMSUB", key_of(name) + ":ch"});
            if (r.size() != 2 || r[1] != "1") return false;
          }
          return true;
        },
        scaled(10s), 10ms))
        << "the waiter never subscribed on every master";
    for (std::size_t n = 0; n < group->size(); ++n) {
      group->raw(n).cmd({"DEL", key_of(name)});
      group->raw(n).cmd({"PUBLISH", key_of(name) + ":ch", "released"});
    }
    if (i % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200 * i));
    bg->signal(SIGTERM);
    auto code = bg->wait_for(scaled(10s));
    ASSERT_TRUE(code.has_value()) << "SIGTERM was not heard";
    EXPECT_EQ(*code, 128 + SIGTERM) << "interrupted while waiting, or the forwarded signal ended sleep";
    for (std::size_t n = 0; n < group->size(); ++n) {
      EXPECT_EQ(group->raw(n).cmd_int({"EXISTS", key_of(name)}), 0)
          << "master " << n << " kept a key (iteration " << i << ")";
    }
  }
}

TEST_F(CliRedlockTest, UsageErrorsNameWhatWorks) {
  auto list = run_dlock(with_redlock({"list"}));
  EXPECT_EQ(list.exit_code, 64) << describe(list);
  EXPECT_NE(list.err.find("--redlock works with run, acquire, extend, release and status"), std::string::npos) << list.err;
  EXPECT_EQ(run_dlock(with_redlock({"unlock", "--force", "x"})).exit_code, 64);
  EXPECT_EQ(run_dlock(with_redlock({"doctor"})).exit_code, 64);
  auto fair = run_dlock(with_redlock({"run", "x", "--kind", "fair", "--", "true"}));
  EXPECT_EQ(fair.exit_code, 64) << describe(fair);
  EXPECT_NE(fair.err.find("--redlock holds a mutex"), std::string::npos) << fair.err;
  EXPECT_EQ(run_dlock(with_redlock({"acquire", "x", "--ttl", "1m", "--replicas", "1"})).exit_code, 64);
  auto even = run_dlock({"--redlock", group->urls()[0] + "," + group->urls()[1], "status", "x"});
  EXPECT_EQ(even.exit_code, 64) << describe(even);
  // --redis with --redlock: one of them would be ignored (it was, silently: --redlock won).
  auto both = run_dlock(with_redlock({"--redis", group->urls()[0], "status", "x"}));
  EXPECT_EQ(both.exit_code, 64) << describe(both);
  EXPECT_NE(both.err.find("--redis and --redlock"), std::string::npos) << both.err;

  // --help names the URL forms and the new options.
  auto help = run_dlock({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* text : {"redis-cluster://", "redis-sentinel://", "rediss://", "--redlock URL,URL", "doctor [--replicas K]"}) {
    EXPECT_NE(help.out.find(text), std::string::npos) << text << "\n" << help.out;
  }
  EXPECT_NE(run_dlock({"run", "--help"}).out.find("--replicas K"), std::string::npos);
}

}  // namespace
