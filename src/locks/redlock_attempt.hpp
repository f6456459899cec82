// One Redlock try: acquire on every node in parallel, pick the token, write it back, and
// either hand out a LeaseRecord or release the owner token everywhere (on each node once its
// acquire was answered: redlock_answers.hpp; a node whose outcome is unknown gets the release
// again once it is back, Resend::while_unknown).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dlock/options.hpp"
#include "dlock/result.hpp"
#include "locks/redlock_fanout.hpp"
#include "renewal/lease_record.hpp"

namespace dlock::detail {

struct RedlockSpec {
  RedlockNodes nodes;
  std::shared_ptr<const QuorumFanout> fanout;
  std::string name;
  std::string key;  // P{N}
  LeaseOptions lease;
  std::shared_ptr<std::atomic<std::uint64_t>> max_token;
};

struct RedlockTry {
  enum class Kind { acquired, busy, failed };
  Kind kind = Kind::failed;
  std::shared_ptr<LeaseRecord> lease;      // acquired: already scheduled for renewal
  std::optional<milliseconds> holder_ttl;  // busy: the smallest remaining TTL of other holders
  bool split = false;                      // busy: this try took some nodes (a split vote)
  Error error;                             // failed
};

// Any thread. `report` runs once, on some Client's loop thread.
void redlock_try(const std::shared_ptr<const RedlockSpec>& spec, std::function<void(RedlockTry)> report);

class AcquireAnswers;

// The hold scripts of a Redlock lease with token `token` (renew and release run on every node).
// `answers`: the try's, kept by the hold and told where its release took effect
// (redlock_answers.hpp).
std::shared_ptr<const HoldScripts> redlock_hold(const RedlockSpec& spec, std::uint64_t token,
                                                std::shared_ptr<AcquireAnswers> answers = nullptr);

}  // namespace dlock::detail
