#include "support/redis_cluster.hpp"

#include <stdexcept>
#include <thread>

#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/wait.hpp"

namespace dlock::test {
namespace {

std::string addr(const RedisServer& s) { return s.host() + ":" + std::to_string(s.port()); }

}  // namespace

RedisCluster::RedisCluster(int primaries, int replicas_per_primary) {
  const int total = primaries * (1 + replicas_per_primary);
  for (int i = 0; i < total; ++i) {
    RedisServerOptions o;
    o.cluster_bus = true;
    // A short node timeout makes failover take about two seconds instead of fifteen.
    o.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
                    "1000", "--cluster-replica-validity-factor", "0", "--cluster-require-full-coverage", "yes"};
    nodes_.push_back(std::make_unique<RedisServer>(o));
  }
  std::vector<std::string> argv = {"redis-cli", "--cluster", "create"};
  for (auto& n : nodes_) argv.push_back(addr(*n));
  argv.insert(argv.end(), {"--cluster-replicas", std::to_string(replicas_per_primary), "--cluster-yes"});
  auto r = run_command(argv, {}, std::chrono::seconds(60));
  if (r.exit_code != 0) throw std::runtime_error("redis-cli --cluster create failed:\n" + r.out + r.err);
  wait_ok();
  // Replicas attach asynchronously; a failover test needs them in sync.
  const bool attached = eventually(
      [&] {
        for (std::size_t p : this->primaries()) {
          RawConnection c(*nodes_[p]);
          auto info = c.cmd({"INFO", "replication"});
          if (info.find("connected_slaves:" + std::to_string(replicas_per_primary)) == std::string::npos) return false;
          // Past the initial sync: a replica still loading the RDB acknowledges nothing (WAIT).
          for (int k = 0; k < replicas_per_primary; ++k) {
            const std::string line = "slave" + std::to_string(k) + ":";
            auto at = info.find(line);
            if (at == std::string::npos) return false;
            if (info.substr(at, info.find('\n', at) - at).find("state=online") == std::string::npos) return false;
          }
        }
        return true;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(100));
  if (!attached) throw std::runtime_error("cluster replicas did not attach");
}

RedisCluster::~RedisCluster() = default;

std::string RedisCluster::url() const {
  std::string u = "redis-cluster://";
  for (std::size_t i = 0; i < nodes_.size(); ++i) u += (i ? "," : "") + addr(*nodes_[i]);
  return u;
}

std::string RedisCluster::url_with_seed(std::size_t i) const { return "redis-cluster://" + addr(*nodes_[i]); }

void RedisCluster::wait_ok(std::chrono::milliseconds timeout) {
  const bool ok = eventually(
      [&] {
        for (auto& n : nodes_) {
          if (!n->running()) continue;
          try {
            RawConnection c(n->host(), n->port(), std::chrono::seconds(2));
            if (c.cmd({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) return false;
          } catch (const std::exception&) {
            return false;
          }
        }
        return true;
      },
      timeout, std::chrono::milliseconds(50));
  if (!ok) throw std::runtime_error("the cluster did not reach cluster_state:ok");
}

std::size_t RedisCluster::index_of_port(int port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return i;
  }
  throw std::runtime_error("no node on port " + std::to_string(port));
}

std::size_t RedisCluster::owner_of_slot(std::uint16_t slot) {
  for (auto& n : nodes_) {
    if (!n->running()) continue;
    RawConnection c(*n);
    // CLUSTER SLOTS rendered flat: start, end, host, port, id, ... per range; parse by lines.
    auto lines = c.cmd_array({"CLUSTER", "SLOTS"});
    for (const auto& range : lines) {
      // Each element is "start\nend\nhost\nport\nid\n..." (nested arrays joined by newlines).
      std::vector<std::string> f;
      std::size_t at = 0;
      while (at <= range.size()) {
        auto nl = range.find('\n', at);
        f.push_back(range.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
        if (nl == std::string::npos) break;
        at = nl + 1;
      }
      if (f.size() < 4) continue;
      if (std::stoi(f[0]) <= slot && slot <= std::stoi(f[1])) return index_of_port(std::stoi(f[3]));
    }
  }
  throw std::runtime_error("no node serves slot " + std::to_string(slot));
}

std::size_t RedisCluster::owner_of_key(const std::string& key) {
  for (auto& n : nodes_) {
    if (!n->running()) continue;
    RawConnection c(*n);
    return owner_of_slot(static_cast<std::uint16_t>(c.cmd_int({"CLUSTER", "KEYSLOT", key})));
  }
  throw std::runtime_error("no running node");
}

std::vector<std::size_t> RedisCluster::primaries() {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]->running()) continue;
    RawConnection c(*nodes_[i]);
    if (c.cmd({"ROLE"}).rfind("master", 0) == 0) out.push_back(i);
  }
  return out;
}

std::string RedisCluster::node_id(std::size_t i) {
  RawConnection c(*nodes_[i]);
  return c.cmd({"CLUSTER", "MYID"});
}

std::size_t RedisCluster::kill_primary_and_wait_failover(std::size_t i, std::chrono::milliseconds timeout) {
  std::vector<std::size_t> replicas;
  const std::string id = node_id(i);
  for (std::size_t r = 0; r < nodes_.size(); ++r) {
    if (r == i || !nodes_[r]->running()) continue;
    RawConnection c(*nodes_[r]);
    auto role = c.cmd({"ROLE"});
    if (role.rfind("slave", 0) == 0 && role.find("\n" + std::to_string(nodes_[i]->port()) + "\n") != std::string::npos) {
      replicas.push_back(r);
    }
  }
  if (replicas.empty()) throw std::runtime_error("primary has no replica to promote");
  nodes_[i]->kill();
  std::size_t promoted = replicas.front();
  const bool ok = eventually(
      [&] {
        for (std::size_t r : replicas) {
          try {
            RawConnection c(nodes_[r]->host(), nodes_[r]->port(), std::chrono::seconds(1));
            if (c.cmd({"ROLE"}).rfind("master", 0) == 0) {
              promoted = r;
              return true;
            }
          } catch (const std::exception&) {
          }
        }
        return false;
      },
      timeout, std::chrono::milliseconds(50));
  if (!ok) throw std::runtime_error("no replica was promoted");
  wait_ok(timeout);
  return promoted;
}

void RedisCluster::migrate_keys(std::uint16_t slot, std::size_t from, std::size_t to, const std::vector<std::string>& keys) {
  RawConnection src(*nodes_[from]);
  std::vector<std::string> move = keys;
  if (move.empty()) {
    move = src.cmd_array({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "1000"});
  }
  if (move.empty()) return;
  std::vector<std::string> cmd = {"MIGRATE", nodes_[to]->host(), std::to_string(nodes_[to]->port()), "", "0", "5000", "KEYS"};
  cmd.insert(cmd.end(), move.begin(), move.end());
  auto r = src.cmd(cmd);
  if (r != "OK" && r != "NOKEY") throw std::runtime_error("MIGRATE failed: " + r);
}

void RedisCluster::begin_migration(std::uint16_t slot, std::size_t from, std::size_t to, const std::vector<std::string>& keys) {
  const std::string s = std::to_string(slot);
  RawConnection dst(*nodes_[to]);
  RawConnection src(*nodes_[from]);
  auto a = dst.cmd({"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(from)});
  auto b = src.cmd({"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to)});
  if (a != "OK" || b != "OK") throw std::runtime_error("SETSLOT failed: " + a + " / " + b);
  migrate_keys(slot, from, to, keys);
}

void RedisCluster::finish_migration(std::uint16_t slot, std::size_t from, std::size_t to) {
  migrate_keys(slot, from, to, {});
  const std::string target = node_id(to);
  const std::string s = std::to_string(slot);
  // The target first, then the source, then everyone else (the order redis-cli uses).
  for (std::size_t i : {to, from}) {
    RawConnection c(*nodes_[i]);
    auto r = c.cmd({"CLUSTER", "SETSLOT", s, "NODE", target});
    if (r != "OK") throw std::runtime_error("SETSLOT NODE failed: " + r);
  }
  for (std::size_t p : primaries()) {
    if (p == to || p == from) continue;
    RawConnection c(*nodes_[p]);
    (void)c.cmd({"CLUSTER", "SETSLOT", s, "NODE", target});
  }
}

}  // namespace dlock::test
