#pragma once
// A real Sentinel deployment for integration tests: one primary, R replicas and S sentinels
// (quorum S/2+1), every process a RedisServer child on a free loopback port. Sentinels are tuned
// to notice a dead primary within half a second, so a failover takes a few seconds.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.hpp"

namespace dlock::test {

class RedisSentinelGroup {
 public:
  static constexpr const char* master_name = "dlockmaster";

  RedisSentinelGroup(int replicas = 2, int sentinels = 3);
  ~RedisSentinelGroup();
  RedisSentinelGroup(const RedisSentinelGroup&) = delete;
  RedisSentinelGroup& operator=(const RedisSentinelGroup&) = delete;

  // "redis-sentinel://127.0.0.1:s1,127.0.0.1:s2,.../dlockmaster"
  std::string url() const;
  RedisServer& data_node(std::size_t i) { return *data_[i]; }
  RedisServer& sentinel(std::size_t i) { return *sentinels_[i]; }
  std::size_t data_nodes() const { return data_.size(); }

  // The data node the sentinels currently name as primary.
  std::size_t primary();
  // SIGKILLs the current primary and waits until the sentinels name another one and it answers
  // ROLE with "master". Returns the new primary's index.
  std::size_t kill_primary_and_wait_failover(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Waits until every sentinel has named the same primary for a second (a failover can be
  // followed by another one when a sentinel missed the first) and returns it.
  std::size_t wait_stable(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  std::vector<std::unique_ptr<RedisServer>> data_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace dlock::test
