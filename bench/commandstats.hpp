// bench/commandstats.hpp — client-issued Redis commands, from INFO commandstats deltas.
//
// Redis 7 counts a command run by a script (redis.call) under its own name as well as the
// EVALSHA that ran the script. So "commands the client issued" = all calls in the window minus
// the calls of the command names the library's scripts use, minus the bench's own INFO. That
// is exact as long as the library never issues one of its script's commands at top level
// itself — true of dlock (it only sends EVALSHA/EVAL, SUBSCRIBE/UNSUBSCRIBE, and CLIENT/CONFIG
// at connect) and of the peers (redis-py's Lock sends SET itself, but its scripts never call
// SET). The names a library's scripts use are read from the scripts themselves: dlock's from
// src/scripts/*.lua at build time, the peers' from their installed library by their drivers.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "json.hpp"

namespace bench {

class RawRedis;

// calls per command, as INFO names it ("evalsha", "client|setname", ...).
using CommandCounts = std::map<std::string, std::uint64_t>;

CommandCounts read_commandstats(RawRedis& redis);
CommandCounts parse_commandstats(const std::string& info_text);
CommandCounts delta(const CommandCounts& before, const CommandCounts& after);

// The commandstats of several servers (Redlock's nodes) summed; connections opened up front so
// that opening them is not counted inside a window.
class StatsReader {
 public:
  explicit StatsReader(const std::vector<std::string>& urls);
  ~StatsReader();
  CommandCounts read();

 private:
  std::vector<std::unique_ptr<RawRedis>> servers_;
};

// The top-level command name: "client|setname" -> "client"; lower case.
std::string top_level_name(const std::string& name);

// Calls in `d` that a client issued: every command except those in `script_commands` (lower
// case top-level names used by the library's scripts) and INFO (the bench's own).
std::uint64_t client_issued(const CommandCounts& d, const std::set<std::string>& script_commands);

// {"evalsha": n, ...}: the counts as JSON (results.json's details).
Json counts_json(const CommandCounts& c);

// The command names dlock's scripts call, extracted from src/scripts/*.lua at build time.
const std::set<std::string>& dlock_script_commands();

}  // namespace bench
