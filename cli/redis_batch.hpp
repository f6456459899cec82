// redis_batch.hpp — inspection helpers over Client::async_command: many commands pipelined in
// one round trip, SCAN over lock keys, and what a lock key holds.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/result.hpp"

namespace dlock::cli {

// Sends all `commands` at once and waits for every reply. Error replies come back as Errors
// (WRONGTYPE: errc::wrong_type...), in order.
std::vector<dlock::Result<dlock::Reply>> pipeline(dlock::Client& client,
                                                  const std::vector<std::vector<std::string>>& commands);

// What one lock key holds.
struct KeyInfo {
  std::string key;
  std::string type;                  // "none", "string", "hash"...
  std::optional<std::string> value;  // the string value (the owner token)
  long long pttl = -2;               // -1: no expiry; -2: gone
};

// TYPE, GET and PTTL of every key, pipelined. Fails on the first transport/auth error.
dlock::Result<std::vector<KeyInfo>> inspect_keys(dlock::Client& client, const std::vector<std::string>& keys);

// SCAN MATCH `match` COUNT 1000 over the whole keyspace (never KEYS), calling `batch` with
// each page's keys (duplicates that SCAN may return are removed). Stops at the first error.
dlock::Result<void> scan_keys(dlock::Client& client, const std::string& match,
                              const std::function<dlock::Result<void>(std::vector<std::string>)>& batch);

// The kind of lock a key of Redis type `type` is.
std::string lock_kind(const std::string& type);

}  // namespace dlock::cli
