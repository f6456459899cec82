#include "commandstats.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "raw_redis.hpp"

#ifndef DLOCK_BENCH_SCRIPT_COMMANDS
#error "bench/CMakeLists.txt defines DLOCK_BENCH_SCRIPT_COMMANDS from src/scripts/*.lua"
#endif

namespace bench {

CommandCounts parse_commandstats(const std::string& info_text) {
  CommandCounts out;
  std::istringstream in(info_text);
  std::string line;
  const std::string prefix = "cmdstat_";
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    const auto colon = line.find(':');
    const auto calls = line.find("calls=", colon);
    if (colon == std::string::npos || calls == std::string::npos) continue;
    out[line.substr(prefix.size(), colon - prefix.size())] = std::stoull(line.substr(calls + 6));
  }
  return out;
}

CommandCounts read_commandstats(RawRedis& redis) { return parse_commandstats(redis.info("commandstats")); }

CommandCounts delta(const CommandCounts& before, const CommandCounts& after) {
  CommandCounts d;
  for (const auto& [name, n] : after) {
    auto it = before.find(name);
    const std::uint64_t was = it == before.end() ? 0 : it->second;
    if (n > was) d[name] = n - was;
  }
  return d;
}

Json counts_json(const CommandCounts& c) {
  Json j = Json::object();
  for (const auto& [name, n] : c) j.set(name, n);
  return j;
}

StatsReader::StatsReader(const std::vector<std::string>& urls) {
  for (const auto& u : urls) servers_.push_back(std::make_unique<RawRedis>(u));
}

StatsReader::~StatsReader() = default;

CommandCounts StatsReader::read() {
  CommandCounts sum;
  for (auto& s : servers_) {
    for (const auto& [name, n] : read_commandstats(*s)) sum[name] += n;
  }
  return sum;
}

std::string top_level_name(const std::string& name) {
  std::string top = name.substr(0, name.find('|'));
  std::transform(top.begin(), top.end(), top.begin(), [](unsigned char c) { return std::tolower(c); });
  return top;
}

std::uint64_t client_issued(const CommandCounts& d, const std::set<std::string>& script_commands) {
  std::uint64_t n = 0;
  for (const auto& [name, calls] : d) {
    const std::string top = top_level_name(name);
    if (top == "info" || script_commands.count(top) != 0) continue;
    n += calls;
  }
  return n;
}

const std::set<std::string>& dlock_script_commands() {
  static const std::set<std::string> names = [] {
    std::set<std::string> s;
    std::stringstream ss(DLOCK_BENCH_SCRIPT_COMMANDS);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (!item.empty()) s.insert(top_level_name(item));
    }
    return s;
  }();
  return names;
}

}  // namespace bench
