// LeaseTiming: when a lease is valid, when to renew it, when it is at risk. Pure arithmetic on
// an injected time, so it is unit-tested without a server.
//
// Validity is counted from the moment the acquire (or renewal) was *sent*, not when its reply
// came back: the server may have set the TTL at any moment in between, so the send time is the
// earliest, safe, assumption. A drift allowance is subtracted for clock-rate differences.
#pragma once

#include <algorithm>
#include <chrono>

#include "dlock/clock.hpp"
#include "dlock/options.hpp"

namespace dlock::detail {

struct LeaseTiming {
  using time_point = BootClock::time_point;

  milliseconds ttl{30000};
  milliseconds renew_interval{10000};
  milliseconds at_risk_margin{10000};
  milliseconds drift{302};
  // LeaseOptions::drift_allowance as given (zero: the default, ttl / 100 + 2 ms): extend()
  // derives the new TTL's allowance from it, not from the old TTL's.
  milliseconds drift_option{0};

  // Fills the defaults documented in LeaseOptions.
  static LeaseTiming from(const LeaseOptions& o) {
    LeaseTiming t;
    t.ttl = o.ttl;
    t.drift_option = o.drift_allowance;
    t.renew_interval = o.renew_interval.count() > 0 ? o.renew_interval : o.ttl / 3;
    t.at_risk_margin = o.at_risk_margin.count() > 0 ? o.at_risk_margin : o.ttl / 3;
    t.drift = o.drift_allowance.count() > 0 ? o.drift_allowance : o.ttl / 100 + milliseconds(2);
    if (t.renew_interval.count() < 1) t.renew_interval = milliseconds(1);
    return t;
  }

  // Valid until: sent + ttl - drift.
  time_point validity_from(time_point sent) const { return sent + ttl - drift; }

  // When to retry a failed renewal: soon, but not in a tight loop, and never after the end.
  time_point retry_at(time_point now, time_point valid_until) const {
    const auto step = std::clamp<milliseconds>(ttl / 30, milliseconds(50), milliseconds(1000));
    return std::min<time_point>(now + step, valid_until);
  }

  bool at_risk(time_point now, time_point valid_until) const { return valid_until - now < at_risk_margin; }
};

}  // namespace dlock::detail
