// The Cluster form of a lock script: release notifications on sharded pub/sub.
//
// On Redis Cluster a plain PUBLISH is broadcast over the cluster bus to every node; SPUBLISH is
// delivered by the one shard that owns the channel's slot (the lock's hash tag), where dlock's
// waiters SSUBSCRIBE. The lock scripts are written for standalone Redis and turned into their
// Cluster form here, once per script:
//   redis.pcall('PUBLISH', ...)   becomes   redis.pcall('SPUBLISH', ...)
//   local cluster = false         becomes   local cluster = true
// A script that must reach classic subscribers on Cluster too (Redisson compatibility: Java
// clients SUBSCRIBE to the lock channel) writes that call with double quotes,
// redis.pcall("PUBLISH", ...), which is left alone, and guards it with `cluster`.
#pragma once

#include <string>

namespace dlock::detail {

inline std::string to_sharded_pubsub(std::string source) {
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (std::size_t at = 0; (at = source.find(from, at)) != std::string::npos; at += to.size()) {
      source.replace(at, from.size(), to);
    }
  };
  replace_all("redis.pcall('PUBLISH',", "redis.pcall('SPUBLISH',");
  replace_all("redis.call('PUBLISH',", "redis.call('SPUBLISH',");
  replace_all("local cluster = false", "local cluster = true");
  return source;
}

}  // namespace dlock::detail
