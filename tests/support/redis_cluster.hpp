#pragma once
// A real Redis Cluster for integration tests: N primaries with R replicas each, every node a
// RedisServer child process (own temp dir, free loopback port), joined with
// `redis-cli --cluster create`. Tests kill primaries (a replica is promoted), and move slots
// between primaries (MIGRATING/IMPORTING + MIGRATE, the way redis-cli --cluster reshard does)
// to exercise ASK and MOVED. Torn down (every node SIGKILLed, dirs removed) by the destructor.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.hpp"

namespace dlock::test {

class RedisCluster {
 public:
  // Starts the nodes and creates the cluster; waits until every node reports cluster_state:ok
  // and the replicas are attached. Throws std::runtime_error if it does not come up.
  explicit RedisCluster(int primaries = 3, int replicas_per_primary = 1);
  ~RedisCluster();

  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // "redis-cluster://127.0.0.1:p1,127.0.0.1:p2,..." (every node as a seed).
  std::string url() const;
  // The same with only node `i` as the seed: discovery must find the rest.
  std::string url_with_seed(std::size_t i) const;
  std::size_t size() const { return nodes_.size(); }
  RedisServer& node(std::size_t i) { return *nodes_[i]; }

  // Index of the node that serves `slot` now (asked of a running node with CLUSTER SLOTS).
  std::size_t owner_of_slot(std::uint16_t slot);
  std::size_t owner_of_key(const std::string& key);
  std::vector<std::size_t> primaries();
  std::string node_id(std::size_t i);

  // Kills primary `i` (SIGKILL) and waits until one of its replicas serves its slots.
  // Returns the promoted replica's index.
  std::size_t kill_primary_and_wait_failover(std::size_t i,
                                             std::chrono::milliseconds timeout = std::chrono::seconds(20));

  // Slot migration in two halves, so a test can act in between (ASK):
  //   begin: target IMPORTING, source MIGRATING, then MIGRATE every key of the slot (or only
  //          `keys`, when given) to the target.
  //   finish: the remaining keys, then CLUSTER SETSLOT <slot> NODE <target> on every primary.
  void begin_migration(std::uint16_t slot, std::size_t from, std::size_t to, const std::vector<std::string>& keys = {});
  void finish_migration(std::uint16_t slot, std::size_t from, std::size_t to);

  // Waits until every running node says cluster_state:ok.
  void wait_ok(std::chrono::milliseconds timeout = std::chrono::seconds(20));

 private:
  void migrate_keys(std::uint16_t slot, std::size_t from, std::size_t to, const std::vector<std::string>& keys);
  std::size_t index_of_port(int port) const;

  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace dlock::test
