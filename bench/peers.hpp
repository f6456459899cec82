// bench/peers.hpp — merging the peer drivers' results (bench/peers/*: redis-py's Lock,
// node-redlock) into dlock-bench's table, judged by the same targets against this run's floor.
//
// A driver prints one JSON document (see bench/peers/README.md for its fields); dlock-bench
// computes the medians, the commands per acquisition (from the driver's raw commandstats
// deltas and the commands its library's scripts call) and the verdicts itself, so every
// library's numbers go through the same code.
#pragma once

#include <string>

#include "json.hpp"
#include "report.hpp"

namespace bench {

// Reads one driver's output and adds its rows. Returns the document (for the JSON output);
// throws std::runtime_error when the file is unreadable or malformed.
Json merge_peer_results(Report& report, const std::string& path, int multi_connections);

}  // namespace bench
