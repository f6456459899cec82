// RenewalPolicy: the watchdog's decisions for one lease, as pure functions of the time. The
// RenewalScheduler only carries them out (sends renewals, reports losses), so the decisions are
// unit-tested with an injected time and no server.
//
//   event              state                          decision
//   registered         watchdog (acquire sent)        first due at sent + renew_interval, or
//                                                     now if that has passed
//   registered         fixed TTL                      first look at valid_until
//   due                now >= valid_until             lose (expired)
//   due                fixed TTL                      wait until valid_until
//   due                watchdog, no renewal in flight renew; next check when at risk, then at
//                                                     valid_until
//   renewed (reply 1)  now < valid_until              valid_until = sent + ttl - drift;
//                                                     next due at sent + renew_interval
//   renewed (reply 1)  now >= valid_until             lose (expired): a late reply revives
//                                                     nothing
//   renew failed       now < valid_until              retry soon (never after valid_until)
//   renew failed       now >= valid_until             lose (expired)
// "At risk" is reported once, when less than at_risk_margin is left without a renewal, and may
// be reported again only after a renewal succeeded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "renewal/lease_timing.hpp"

namespace dlock::detail {

struct RenewalState {
  BootClock::time_point valid_until;
  bool renew_in_flight = false;
  bool at_risk_reported = false;
  // The renewal in flight was sent before a Lease::extend() that may have run after it on the
  // server (RenewalScheduler::tighten): its reply raises no validity. (A flag in the padding, not
  // the extension's end: the watchdog keeps one of these per held lease.)
  bool reply_before_extension = false;
  // Lease::extend() calls between their tightening and their settling (loop thread): one
  // refused before it ran restores the validity only when it is the only one (another may yet
  // set a shorter TTL). In the padding too.
  std::uint8_t extensions_in_flight = 0;
};

enum class RenewalAction { none, renew, lose };

struct RenewalStep {
  RenewalAction action = RenewalAction::none;
  std::optional<BootClock::time_point> next;  // when to look at this lease again
  bool report_at_risk = false;
};

class RenewalPolicy {
 public:
  using time_point = BootClock::time_point;

  RenewalPolicy(LeaseTiming timing, LeaseMode mode) : timing_(timing), mode_(mode) {}

  const LeaseTiming& timing() const noexcept { return timing_; }
  LeaseMode mode() const noexcept { return mode_; }

  // The options a lease runs on after extend(ttl): the new TTL, with the renewal interval and
  // at-risk margin it implies, and the drift allowance derived from it unless the caller chose
  // one (a 100 ms extension of a 30 s lease would otherwise keep 302 ms and be lost at once).
  // Any thread: it reads only the mode and the drift option, which retime() never writes.
  LeaseOptions extended_to(milliseconds ttl) const {
    LeaseOptions o;
    o.ttl = ttl;
    o.mode = mode_;
    o.drift_allowance = timing_.drift_option;
    return o;
  }
  // Loop thread: the lease now runs on `ttl` (extend()). Field by field, leaving the mode and
  // the drift option alone, so that a caller thread may read those meanwhile (extended_to).
  void retime(milliseconds ttl) {
    const LeaseTiming t = LeaseTiming::from(extended_to(ttl));
    timing_.ttl = t.ttl;
    timing_.renew_interval = t.renew_interval;
    timing_.at_risk_margin = t.at_risk_margin;
    timing_.drift = t.drift;
  }

  // `now` is when the lease reaches the scheduler, which may be long after its acquire was sent
  // (a WAIT for replicas, a slow reply): the first renewal is due one renew_interval after the
  // *send*, as after a renewal, and at once if that has passed. Counting from `now` instead let a
  // lease whose acquisition took longer than ttl - renew_interval expire before its first renewal.
  time_point first_due(const RenewalState& s, time_point now) const {
    if (mode_ != LeaseMode::watchdog) return s.valid_until;
    const time_point sent = s.valid_until - (timing_.ttl - timing_.drift);
    return std::max(sent + timing_.renew_interval, now);
  }

  RenewalStep on_due(RenewalState& s, time_point now) const {
    RenewalStep step;
    if (now >= s.valid_until) {
      step.action = RenewalAction::lose;
      return step;
    }
    if (mode_ == LeaseMode::fixed_ttl) {
      step.next = s.valid_until;
      return step;
    }
    step.report_at_risk = check_at_risk(s, now);
    if (!s.renew_in_flight) {
      s.renew_in_flight = true;
      step.action = RenewalAction::renew;
    }
    // Until the renewal answers, what can happen next is the lease turning "at risk" (a renewal
    // hanging for long must still be reported in time), then the end of validity.
    // (At risk means strictly less than the margin left, hence the extra millisecond.)
    const time_point risk_at = s.valid_until - timing_.at_risk_margin + milliseconds(1);
    step.next = s.at_risk_reported || risk_at <= now ? s.valid_until : risk_at;
    return step;
  }

  RenewalStep on_renewed(RenewalState& s, time_point sent, time_point now) const {
    s.renew_in_flight = false;
    // The reply came after the validity had ended (the process was paused, the loop was late,
    // or the reply was): the holder was told nothing and its lease counted down to zero, which
    // is a loss; a renewal must not bring a lease back from that. (Its loss timer may simply
    // not have run yet.)
    if (now >= s.valid_until) {
      RenewalStep step;
      step.action = RenewalAction::lose;
      return step;
    }
    const time_point until = timing_.validity_from(sent);
    if (s.reply_before_extension) s.reply_before_extension = false;  // the extension decides
    else if (until > s.valid_until) s.valid_until = until;
    s.at_risk_reported = false;
    RenewalStep step;
    step.next = std::max(sent + timing_.renew_interval, now);
    return step;
  }

  RenewalStep on_renew_failed(RenewalState& s, time_point now) const {
    s.renew_in_flight = false;
    s.reply_before_extension = false;
    RenewalStep step;
    if (now >= s.valid_until) {
      step.action = RenewalAction::lose;
      return step;
    }
    step.report_at_risk = check_at_risk(s, now);
    step.next = timing_.retry_at(now, s.valid_until);
    return step;
  }

 private:
  bool check_at_risk(RenewalState& s, time_point now) const {
    if (s.at_risk_reported || !timing_.at_risk(now, s.valid_until)) return false;
    s.at_risk_reported = true;
    return true;
  }

  LeaseTiming timing_;
  LeaseMode mode_;
};

}  // namespace dlock::detail
