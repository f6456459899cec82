// node_fanout.hpp — one command on several nodes at once: every Redlock master (--redlock), or
// every primary of a deployment (a Cluster's primaries, for the per-node SCAN and INFO).
#pragma once

#include <string>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/client.hpp"
#include "dlock/result.hpp"

namespace dlock::cli {

// Sends `args` through each Client at the same moment and waits for every reply (each bounded by
// its Client's command timeout, so a dead master costs one timeout, not one per node).
// results[i] belongs to clients[i].
std::vector<dlock::Result<dlock::Reply>> command_on_all(const std::vector<dlock::Client*>& clients,
                                                        const std::vector<std::string>& args);

// dlock::inspect(name) on each Client at the same moment (async_inspect), waiting for every
// answer: as command_on_all, a silent master costs one command timeout, not one per master.
// results[i] belongs to clients[i].
std::vector<dlock::Result<dlock::LockInfo>> inspect_on_all(const std::vector<dlock::Client*>& clients,
                                                           const std::string& name);

// The nodes that hold data (Client::primaries()) once the deployment answered: a PING first, so a
// Cluster's slot map (or a Sentinel's primary) is known, not just the URL's seeds.
dlock::Result<std::vector<dlock::ServerAddress>> data_nodes(dlock::Client& client);

}  // namespace dlock::cli
