// redis_batch.hpp — walking the keyspace: SCAN over lock keys (never KEYS).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/result.hpp"

namespace dlock::cli {

// SCAN MATCH `match` COUNT 1000 over the whole keyspace (never KEYS), calling `batch` with
// each page's keys (duplicates that SCAN may return are removed). Stops at the first error.
// SCAN walks one node's keys: on a Cluster every primary is scanned in turn (a key migrating
// between two of them may show up twice, and is passed on once).
dlock::Result<void> scan_keys(dlock::Client& client, const std::string& match,
                              const std::function<dlock::Result<void>(std::vector<std::string>)>& batch);

}  // namespace dlock::cli
