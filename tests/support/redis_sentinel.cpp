#include "support/redis_sentinel.hpp"

#include <stdexcept>

#include "support/raw_connection.hpp"
#include "support/wait.hpp"

namespace dlock::test {

RedisSentinelGroup::RedisSentinelGroup(int replicas, int sentinels) {
  // A replica's first sync waits repl-diskless-sync-delay (5 s by default) for more replicas to
  // share it: not here, where every test would wait for it.
  RedisServerOptions primary_options;
  primary_options.extra_args = {"--repl-diskless-sync-delay", "0"};
  data_.push_back(std::make_unique<RedisServer>(primary_options));
  const std::string primary_port = std::to_string(data_[0]->port());
  for (int i = 0; i < replicas; ++i) {
    RedisServerOptions o;
    o.extra_args = {"--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", primary_port};
    data_.push_back(std::make_unique<RedisServer>(o));
  }
  const std::string quorum = std::to_string(sentinels / 2 + 1);
  for (int i = 0; i < sentinels; ++i) {
    RedisServerOptions o;
    o.sentinel = true;
    o.extra_args = {"--sentinel", "monitor", master_name, "127.0.0.1", primary_port, quorum,
                    "--sentinel", "down-after-milliseconds", master_name, "1000",
                    "--sentinel", "failover-timeout", master_name, "10000",
                    "--sentinel", "parallel-syncs", master_name, "2"};
    sentinels_.push_back(std::make_unique<RedisServer>(o));
  }
  // Replicas in sync (online: a WAIT counts them) and known to every sentinel, and the
  // sentinels known to each other: only then can they agree on a failover.
  const bool ready = eventually(
      [&] {
        RawConnection p(*data_[0]);
        const std::string repl = p.cmd({"INFO", "replication"});
        if (repl.find("connected_slaves:" + std::to_string(replicas)) == std::string::npos) return false;
        int online = 0;
        for (auto at = repl.find("state=online"); at != std::string::npos; at = repl.find("state=online", at + 1)) {
          ++online;
        }
        if (online != replicas) return false;
        for (auto& s : sentinels_) {
          RawConnection c(*s);
          auto info = c.cmd({"SENTINEL", "MASTER", master_name});
          auto field = [&](const std::string& name) {
            auto at = info.find(name + "\n");
            if (at == std::string::npos) return std::string();
            auto start = at + name.size() + 1;
            return info.substr(start, info.find('\n', start) - start);
          };
          if (field("num-slaves") != std::to_string(replicas)) return false;
          if (field("num-other-sentinels") != std::to_string(sentinels - 1)) return false;
        }
        return true;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(100));
  if (!ready) throw std::runtime_error("the sentinel group did not come up");
}

RedisSentinelGroup::~RedisSentinelGroup() = default;

std::string RedisSentinelGroup::url() const {
  std::string u = "redis-sentinel://";
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    u += (i ? "," : "") + sentinels_[i]->host() + ":" + std::to_string(sentinels_[i]->port());
  }
  return u + "/" + master_name;
}

std::size_t RedisSentinelGroup::primary() {
  for (auto& s : sentinels_) {
    if (!s->running()) continue;
    RawConnection c(*s);
    auto addr = c.cmd_array({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name});
    if (addr.size() != 2) continue;
    for (std::size_t i = 0; i < data_.size(); ++i) {
      if (std::to_string(data_[i]->port()) == addr[1]) return i;
    }
  }
  throw std::runtime_error("no sentinel names a primary");
}

std::size_t RedisSentinelGroup::kill_primary_and_wait_failover(std::chrono::milliseconds timeout) {
  const std::size_t old = primary();
  data_[old]->kill();
  std::size_t now = old;
  const bool ok = eventually(
      [&] {
        try {
          // Done means: every sentinel names the same new primary, it says it is one, and the
          // other surviving replicas replicate from it (the failover has ended, so the
          // sentinels will not start another one).
          now = primary();
          if (now == old) return false;
          for (auto& s : sentinels_) {
            RawConnection c(*s);
            auto addr = c.cmd_array({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name});
            if (addr.size() != 2 || addr[1] != std::to_string(data_[now]->port())) return false;
          }
          RawConnection c(data_[now]->host(), data_[now]->port(), std::chrono::seconds(1));
          if (c.cmd({"ROLE"}).rfind("master", 0) != 0) return false;
          const std::string replicas = std::to_string(data_.size() - 2);
          return c.cmd({"INFO", "replication"}).find("connected_slaves:" + replicas) != std::string::npos;
        } catch (const std::exception&) {
          return false;
        }
      },
      timeout, std::chrono::milliseconds(50));
  if (!ok) throw std::runtime_error("the sentinels did not fail over");
  return now;
}

std::size_t RedisSentinelGroup::wait_stable(std::chrono::milliseconds timeout) {
  std::size_t agreed = 0;
  auto since = SteadyClock::now();
  bool have = false;
  const bool ok = eventually(
      [&] {
        std::size_t now = 0;
        try {
          now = primary();
          for (auto& s : sentinels_) {
            RawConnection c(*s);
            auto addr = c.cmd_array({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name});
            if (addr.size() != 2 || addr[1] != std::to_string(data_[now]->port())) {
              have = false;
              return false;
            }
          }
        } catch (const std::exception&) {
          have = false;
          return false;
        }
        if (!have || now != agreed) {
          have = true;
          agreed = now;
          since = SteadyClock::now();
        }
        return ms_since(since) >= std::chrono::seconds(1);
      },
      timeout, std::chrono::milliseconds(50));
  if (!ok) throw std::runtime_error("the sentinels did not settle on a primary");
  return agreed;
}

}  // namespace dlock::test
