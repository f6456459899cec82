// Validation of lock names, key prefixes and lease options, shared by every lock kind.
//
// A lock's keys are prefix + "{" + name + "}" + suffix: the name is the hash tag, so all of a
// lock's keys share one Cluster slot. That only holds when neither the name nor the prefix has
// braces of its own.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include "dlock/clock.hpp"
#include "dlock/options.hpp"
#include "dlock/result.hpp"

namespace dlock::detail {

inline constexpr std::size_t max_name_length = 512;

inline Result<void> validate_lock_name(std::string_view name) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  if (name.size() > max_name_length) {
    return Error(errc::invalid_argument,
                 "lock name is " + std::to_string(name.size()) + " bytes; at most 512 are allowed");
  }
  for (unsigned char c : name) {
    if (c == '{' || c == '}') {
      return Error(errc::invalid_argument, "lock name '" + std::string(name) + "' contains a brace");
    }
    if (c < 0x20 || c == 0x7f) {
      return Error(errc::invalid_argument, "lock name contains a control character");
    }
  }
  return {};
}

inline Result<void> validate_prefix(std::string_view prefix) {
  if (prefix.find_first_of("{}") != std::string_view::npos) {
    return Error(errc::invalid_argument, "key prefix '" + std::string(prefix) + "' contains a brace");
  }
  for (unsigned char c : prefix) {
    if (c < 0x20 || c == 0x7f || c == ' ') return Error(errc::invalid_argument, "key prefix contains a space or control character");
  }
  return {};
}

// invalid_argument ("<what> is N ms; at most M ms (100 years) is allowed") for a duration
// beyond max_duration, whose clock arithmetic would overflow.
inline Result<void> validate_bounded(const char* what, milliseconds d) {
  if (d <= max_duration) return {};
  return Error(errc::invalid_argument, std::string(what) + " is " + std::to_string(d.count()) + " ms; at most " +
                                           std::to_string(max_duration.count()) + " ms (100 years) is allowed");
}

// A wait as the lock kinds use it: a timeout beyond max_duration waits without end (clock
// arithmetic on milliseconds::max() would overflow), a recheck interval of zero or less is the
// default one (never a polling loop), one beyond max_duration is max_duration.
inline WaitOptions normalize_wait(WaitOptions w) {
  if (w.timeout && *w.timeout > max_duration) w.timeout = max_duration;
  if (w.recheck_interval.count() <= 0) w.recheck_interval = WaitOptions{}.recheck_interval;
  w.recheck_interval = std::min(w.recheck_interval, max_duration);
  return w;
}

// Lock kinds whose acquisitions cannot wait for replicas (FairLock: a waiter is usually handed
// the lock inside its predecessor's release; ReentrantMutex; Redlock: independent masters) refuse
// replication acknowledgement instead of not waiting: a Client set to acknowledge every
// acquisition would otherwise hand out locks it never acknowledged, without a word.
inline Result<void> refuse_replication_ack(std::string_view kind, const LeaseOptions& lease,
                                           const ClientOptions& client) {
  const ReplicationAck& ack = lease.replication_ack ? *lease.replication_ack : client.replication_ack;
  if (ack.replicas == 0) return {};
  return Error(errc::invalid_argument,
               std::string(kind) + " cannot wait for replicas to acknowledge its acquisitions, but " +
                   (lease.replication_ack ? "LeaseOptions" : "ClientOptions") + "::replication_ack.replicas is " +
                   std::to_string(ack.replicas) +
                   (lease.replication_ack ? std::string()
                                          : " (set this lock's LeaseOptions::replication_ack to ReplicationAck{} "
                                            "to take it without acknowledgement)") +
                   "; Mutex, SharedMutex, Semaphore and MultiLock can wait");
}

// Lease options every lock kind accepts.
inline Result<void> validate_lease(const LeaseOptions& o) {
  if (o.ttl.count() <= 0) return Error(errc::invalid_argument, "lease TTL must be positive");
  if (auto ok = validate_bounded("lease TTL", o.ttl); !ok) return ok;
  if (o.renew_interval.count() < 0 || (o.renew_interval.count() > 0 && o.renew_interval >= o.ttl)) {
    return Error(errc::invalid_argument, "renew interval must be shorter than the lease TTL");
  }
  if (o.drift_allowance.count() < 0 || o.drift_allowance >= o.ttl) {
    return Error(errc::invalid_argument, "drift allowance must be shorter than the lease TTL");
  }
  if (o.at_risk_margin.count() < 0 || o.at_risk_margin >= o.ttl) {
    return Error(errc::invalid_argument, "at-risk margin must be shorter than the lease TTL");
  }
  // The same checks on the values in effect (zero picks a default, LeaseTiming::from): a lease
  // whose validity (TTL minus drift allowance) is gone before it is returned, or whose renewal
  // comes after its validity ended, would be lost every time, whatever the server does.
  const milliseconds drift = o.drift_allowance.count() > 0 ? o.drift_allowance : o.ttl / 100 + milliseconds(2);
  if (drift >= o.ttl) {
    return Error(errc::invalid_argument, "a lease TTL of " + std::to_string(o.ttl.count()) +
                                             " ms leaves no validity after the drift allowance (" +
                                             std::to_string(drift.count()) + " ms): use a longer TTL");
  }
  const milliseconds renew = o.renew_interval.count() > 0 ? o.renew_interval : o.ttl / 3;
  if (o.mode == LeaseMode::watchdog && renew >= o.ttl - drift) {
    return Error(errc::invalid_argument, "renew interval (" + std::to_string(renew.count()) +
                                             " ms) must be shorter than the lease's validity: TTL " +
                                             std::to_string(o.ttl.count()) + " ms minus drift allowance " +
                                             std::to_string(drift.count()) + " ms");
  }
  // As for ClientOptions::replication_ack: Redis reads WAIT's timeout 0 as "block forever".
  if (o.replication_ack && o.replication_ack->replicas > 0 && o.replication_ack->timeout.count() <= 0) {
    return Error(errc::invalid_argument, "replication_ack.timeout must be positive, not " +
                                             std::to_string(o.replication_ack->timeout.count()) +
                                             " ms (WAIT 0 blocks forever)");
  }
  if (o.replication_ack) {
    if (auto ok = validate_bounded("replication_ack.timeout", o.replication_ack->timeout); !ok) return ok;
  }
  return {};
}

}  // namespace dlock::detail
