// Small helpers the lock-kind tests share: the default key layout, common options, and a probe
// that counts loss reports.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "dlock/options.hpp"
#include "support/raw_connection.hpp"

namespace dlock::test {

// The key of lock `name` under the default prefix.
inline std::string key_of(const std::string& name) { return "dlock:{" + name + "}"; }

// How many times the server ran `command` (lower case; commands run by scripts included) since
// it started or the last CONFIG RESETSTAT, from INFO commandstats.
inline long long command_calls(RawConnection& raw, const std::string& command) {
  const std::string info = raw.cmd({"INFO", "commandstats"});
  const std::string tag = "cmdstat_" + command + ":calls=";
  const auto at = info.find(tag);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + tag.size()));
}

// Calls of EVALSHA and EVAL the server has executed so far.
inline long long script_calls(RawConnection& raw) { return command_calls(raw, "evalsha") + command_calls(raw, "eval"); }

// Subscribers of `channel` as the server counts them (PUBSUB NUMSUB); -1 on a malformed reply.
inline long long channel_subscribers(RawConnection& raw, const std::string& channel) {
  auto r = raw.cmd_array({"PUBSUB", "NUMSUB", channel});
  return r.size() == 2 ? std::stoll(r[1]) : -1;
}

// A watchdog lease with the given TTL (renewed every ttl/3).
inline dlock::LeaseOptions watchdog(std::chrono::milliseconds ttl) {
  dlock::LeaseOptions o;
  o.mode = dlock::LeaseMode::watchdog;
  o.ttl = ttl;
  return o;
}

// One attempt, no waiting.
inline dlock::WaitOptions no_wait() {
  dlock::WaitOptions w;
  w.timeout = std::chrono::milliseconds(0);
  return w;
}

// Counts on_lost calls and remembers the last reason.
struct LossProbe {
  std::atomic<int> calls{0};
  std::atomic<int> reason{-1};
  void attach(dlock::LeaseOptions& o) {
    o.events.on_lost = [this](dlock::LossReason r) {
      reason.store(static_cast<int>(r));
      calls.fetch_add(1);
    };
  }
};

}  // namespace dlock::test
