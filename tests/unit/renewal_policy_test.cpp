// Unit tests for the watchdog's decisions with an injected clock: dlock::detail::LeaseTiming
// (src/renewal/lease_timing.hpp) and dlock::detail::RenewalPolicy
// (src/renewal/renewal_policy.hpp). Every time is a BootClock::time_point built by the test.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "dlock/clock.hpp"
#include "dlock/options.hpp"
#include "renewal/lease_timing.hpp"
#include "renewal/renewal_policy.hpp"

namespace {

using dlock::BootClock;
using dlock::LeaseMode;
using dlock::LeaseOptions;
using dlock::detail::LeaseTiming;
using dlock::detail::RenewalAction;
using dlock::detail::RenewalPolicy;
using dlock::detail::RenewalState;
using dlock::detail::RenewalStep;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

using TP = BootClock::time_point;
const TP t0{seconds(1000)};
constexpr nanoseconds ns1{1};

LeaseTiming timing_for_ttl(milliseconds ttl) {
  LeaseOptions o;
  o.ttl = ttl;
  return LeaseTiming::from(o);
}

RenewalPolicy watchdog(milliseconds ttl = milliseconds(30000)) {
  return RenewalPolicy(timing_for_ttl(ttl), LeaseMode::watchdog);
}

// A lease whose acquire was sent at `sent`.
RenewalState acquired(const RenewalPolicy& p, TP sent) {
  RenewalState s;
  s.valid_until = p.timing().validity_from(sent);
  return s;
}

// ---- LeaseTiming ---------------------------------------------------------------------------

TEST(LeaseTiming, DefaultsFromLeaseOptions) {
  const LeaseTiming t = LeaseTiming::from(LeaseOptions{});
  EXPECT_EQ(t.ttl, milliseconds(30000));
  EXPECT_EQ(t.renew_interval, milliseconds(10000));
  EXPECT_EQ(t.at_risk_margin, milliseconds(10000));
  EXPECT_EQ(t.drift, milliseconds(302));
}

TEST(LeaseTiming, DefaultConstructedMatchesDefaultOptions) {
  const LeaseTiming a;
  const LeaseTiming b = LeaseTiming::from(LeaseOptions{});
  EXPECT_EQ(a.ttl, b.ttl);
  EXPECT_EQ(a.renew_interval, b.renew_interval);
  EXPECT_EQ(a.at_risk_margin, b.at_risk_margin);
  EXPECT_EQ(a.drift, b.drift);
}

TEST(LeaseTiming, DerivedDefaultsScaleWithTtl) {
  const LeaseTiming t = timing_for_ttl(milliseconds(9000));
  EXPECT_EQ(t.ttl, milliseconds(9000));
  EXPECT_EQ(t.renew_interval, milliseconds(3000));
  EXPECT_EQ(t.at_risk_margin, milliseconds(3000));
  EXPECT_EQ(t.drift, milliseconds(92));

  const LeaseTiming u = timing_for_ttl(milliseconds(1000));
  EXPECT_EQ(u.renew_interval, milliseconds(333));
  EXPECT_EQ(u.at_risk_margin, milliseconds(333));
  EXPECT_EQ(u.drift, milliseconds(12));
}

TEST(LeaseTiming, ExplicitOptionsAreKept) {
  LeaseOptions o;
  o.ttl = milliseconds(20000);
  o.renew_interval = milliseconds(4000);
  o.at_risk_margin = milliseconds(7000);
  o.drift_allowance = milliseconds(50);
  const LeaseTiming t = LeaseTiming::from(o);
  EXPECT_EQ(t.ttl, milliseconds(20000));
  EXPECT_EQ(t.renew_interval, milliseconds(4000));
  EXPECT_EQ(t.at_risk_margin, milliseconds(7000));
  EXPECT_EQ(t.drift, milliseconds(50));
}

TEST(LeaseTiming, RenewIntervalNeverBelowOneMillisecond) {
  const LeaseTiming t = timing_for_ttl(milliseconds(2));
  EXPECT_EQ(t.renew_interval, milliseconds(1));
}

TEST(LeaseTiming, ValidityCountsFromSendTimeMinusDrift) {
  const LeaseTiming t = LeaseTiming::from(LeaseOptions{});
  EXPECT_EQ(t.validity_from(t0), t0 + milliseconds(29698));
  EXPECT_EQ(t.validity_from(t0 + seconds(10)), t0 + milliseconds(39698));
}

TEST(LeaseTiming, RetryStepIsTtlOver30ClampedTo50msAnd1s) {
  // ttl 30 s: 1000 ms exactly (upper bound).
  EXPECT_EQ(timing_for_ttl(milliseconds(30000)).retry_at(t0, t0 + seconds(100)), t0 + milliseconds(1000));
  // ttl 60 s: 2000 ms, clamped to 1000.
  EXPECT_EQ(timing_for_ttl(milliseconds(60000)).retry_at(t0, t0 + seconds(100)), t0 + milliseconds(1000));
  // ttl 3 s: 100 ms.
  EXPECT_EQ(timing_for_ttl(milliseconds(3000)).retry_at(t0, t0 + seconds(100)), t0 + milliseconds(100));
  // ttl 1.5 s: 50 ms exactly (lower bound).
  EXPECT_EQ(timing_for_ttl(milliseconds(1500)).retry_at(t0, t0 + seconds(100)), t0 + milliseconds(50));
  // ttl 1 s: 33 ms, clamped to 50.
  EXPECT_EQ(timing_for_ttl(milliseconds(1000)).retry_at(t0, t0 + seconds(100)), t0 + milliseconds(50));
}

TEST(LeaseTiming, RetryNeverAfterValidityEnd) {
  const LeaseTiming t = LeaseTiming::from(LeaseOptions{});
  EXPECT_EQ(t.retry_at(t0, t0 + milliseconds(300)), t0 + milliseconds(300));
  EXPECT_EQ(t.retry_at(t0, t0 + milliseconds(1000)), t0 + milliseconds(1000));
  EXPECT_EQ(t.retry_at(t0, t0 + milliseconds(1001)), t0 + milliseconds(1000));
  EXPECT_EQ(t.retry_at(t0, t0), t0);
}

TEST(LeaseTiming, AtRiskWhenLessThanMarginLeft) {
  const LeaseTiming t = LeaseTiming::from(LeaseOptions{});
  const TP until = t0 + seconds(30);
  EXPECT_FALSE(t.at_risk(t0, until));
  EXPECT_FALSE(t.at_risk(until - seconds(10), until));  // exactly the margin left
  EXPECT_TRUE(t.at_risk(until - seconds(10) + ns1, until));
  EXPECT_TRUE(t.at_risk(until, until));
  EXPECT_TRUE(t.at_risk(until + seconds(1), until));
}

// ---- RenewalPolicy: single decisions ---------------------------------------------------------

TEST(RenewalPolicy, Accessors) {
  const RenewalPolicy p(timing_for_ttl(milliseconds(6000)), LeaseMode::fixed_ttl);
  EXPECT_EQ(p.mode(), LeaseMode::fixed_ttl);
  EXPECT_EQ(p.timing().ttl, milliseconds(6000));
  EXPECT_EQ(p.timing().renew_interval, milliseconds(2000));
}

TEST(RenewalPolicy, FirstDueWatchdogIsOneRenewIntervalAfterTheAcquireWasSent) {
  const RenewalPolicy p = watchdog();
  const RenewalState s = acquired(p, t0);
  EXPECT_EQ(s.valid_until, t0 + milliseconds(29698));
  EXPECT_FALSE(s.renew_in_flight);
  EXPECT_FALSE(s.at_risk_reported);
  // Registered 5 ms after the send: due at send + renew_interval, as after a renewal.
  EXPECT_EQ(p.first_due(s, t0 + milliseconds(5)), t0 + milliseconds(10000));
}

// An acquisition whose reply took long (WAIT for a replica, a loaded machine) reaches the
// scheduler late. Counting the first renewal from then once let a 1.2 s lease whose acquire took
// 880 ms expire before its first renewal (due at 880 + 400 ms, validity ended at 1,188 ms).
TEST(RenewalPolicy, FirstDueOfALateRegisteredLeaseIsNowAndBeforeItsEnd) {
  const RenewalPolicy p = watchdog(milliseconds(1200));  // renew 400 ms, drift 14 ms
  RenewalState s = acquired(p, t0);
  ASSERT_EQ(s.valid_until, t0 + milliseconds(1186));
  EXPECT_EQ(p.first_due(s, t0 + milliseconds(300)), t0 + milliseconds(400));
  EXPECT_EQ(p.first_due(s, t0 + milliseconds(400)), t0 + milliseconds(400));
  const TP late = t0 + milliseconds(880);
  const TP due = p.first_due(s, late);
  EXPECT_EQ(due, late);
  EXPECT_LT(due, s.valid_until);
  // ... and that due renews, with time left for the reply.
  const RenewalStep d = p.on_due(s, due);
  EXPECT_EQ(d.action, RenewalAction::renew);
  const RenewalStep r = p.on_renewed(s, due, due + milliseconds(20));
  EXPECT_EQ(s.valid_until, late + milliseconds(1186));
  EXPECT_EQ(r.next, late + milliseconds(400));
}

TEST(RenewalPolicy, FirstDueFixedTtlIsValidityEnd) {
  const RenewalPolicy p(LeaseTiming::from(LeaseOptions{}), LeaseMode::fixed_ttl);
  const RenewalState s = acquired(p, t0);
  EXPECT_EQ(p.first_due(s, t0 + milliseconds(5)), t0 + milliseconds(29698));
}

TEST(RenewalPolicy, DueIssuesRenewAndNextIsWhenAtRisk) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);
  const RenewalStep step = p.on_due(s, t0 + seconds(10));
  EXPECT_EQ(step.action, RenewalAction::renew);
  // 29 698 ms validity minus the 10 s at-risk margin: a hanging renewal is noticed in time.
  EXPECT_EQ(step.next, t0 + milliseconds(19699));
  EXPECT_FALSE(step.report_at_risk);
  EXPECT_TRUE(s.renew_in_flight);
  EXPECT_EQ(s.valid_until, t0 + milliseconds(29698));  // unchanged until the reply
}

TEST(RenewalPolicy, NoSecondRenewWhileOneIsInFlight) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);
  ASSERT_EQ(p.on_due(s, t0 + seconds(10)).action, RenewalAction::renew);

  const RenewalStep again = p.on_due(s, t0 + seconds(11));
  EXPECT_EQ(again.action, RenewalAction::none);
  EXPECT_EQ(again.next, t0 + milliseconds(19699));
  EXPECT_FALSE(again.report_at_risk);
  EXPECT_TRUE(s.renew_in_flight);

  // Still none later on (but before the end).
  EXPECT_EQ(p.on_due(s, t0 + milliseconds(29697)).action, RenewalAction::none);

  // Once the reply has come back, the next due issues a renew again.
  p.on_renewed(s, t0 + seconds(10), t0 + milliseconds(29697) + ns1);
  EXPECT_FALSE(s.renew_in_flight);
  EXPECT_EQ(p.on_due(s, t0 + seconds(20)).action, RenewalAction::renew);
}

TEST(RenewalPolicy, RenewedValidityCountsFromSendNotReply) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);
  ASSERT_EQ(p.on_due(s, t0 + seconds(10)).action, RenewalAction::renew);
  // Sent at +10 s, reply at +12 s.
  const RenewalStep step = p.on_renewed(s, t0 + seconds(10), t0 + seconds(12));
  EXPECT_EQ(step.action, RenewalAction::none);
  EXPECT_FALSE(step.report_at_risk);
  EXPECT_EQ(s.valid_until, t0 + milliseconds(39698));  // 10 s + 30 s - 302 ms, not 12 s + ...
  EXPECT_EQ(step.next, t0 + seconds(20));               // sent + renew_interval
  EXPECT_FALSE(s.renew_in_flight);
}

// A renewal sent before an extension ran before it on the server: its reply raises no
// validity (a shorter extend() cut the key after that renewal set it). The next one does.
TEST(RenewalPolicy, ARenewalSentBeforeAnExtensionRaisesNothing) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);
  ASSERT_EQ(p.on_due(s, t0 + seconds(10)).action, RenewalAction::renew);
  // extend(2 s) sent at +10.001 s, after the renewal (at +10 s) and before its reply: tighten().
  s.valid_until = t0 + milliseconds(11979);
  s.reply_before_extension = true;
  p.on_renewed(s, t0 + seconds(10), t0 + milliseconds(10002));
  EXPECT_EQ(s.valid_until, t0 + milliseconds(11979)) << "raised past the extension's end";
  EXPECT_FALSE(s.reply_before_extension);
  ASSERT_EQ(p.on_due(s, t0 + seconds(11)).action, RenewalAction::renew);
  p.on_renewed(s, t0 + seconds(11), t0 + milliseconds(11002));
  EXPECT_EQ(s.valid_until, t0 + milliseconds(40698));
}

TEST(RenewalPolicy, VeryLateReplySchedulesNextNoEarlierThanNow) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);
  ASSERT_EQ(p.on_due(s, t0 + seconds(10)).action, RenewalAction::renew);
  // The reply took 15 s: sent + interval (t0+20 s) is already past.
  const RenewalStep step = p.on_renewed(s, t0 + seconds(10), t0 + seconds(25));
  EXPECT_EQ(s.valid_until, t0 + milliseconds(39698));
  EXPECT_EQ(step.next, t0 + seconds(25));
}

// A reply that arrives once the validity has ended (the process was paused; the loss timer
// had not run yet) is a loss: it used to extend the validity from its send time, so a lease
// that had counted down to zero came back to life.
TEST(RenewalPolicy, ReplyAfterValidityEndedIsALoss) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);
  ASSERT_EQ(p.on_due(s, t0 + seconds(10)).action, RenewalAction::renew);
  const TP until = s.valid_until;
  const RenewalStep late = p.on_renewed(s, t0 + seconds(10), until);
  EXPECT_EQ(late.action, RenewalAction::lose);
  EXPECT_EQ(s.valid_until, until) << "a late reply extended the validity";
  EXPECT_FALSE(s.renew_in_flight);

  RenewalState in_time = acquired(p, t0);
  ASSERT_EQ(p.on_due(in_time, t0 + seconds(10)).action, RenewalAction::renew);
  EXPECT_EQ(p.on_renewed(in_time, t0 + seconds(10), until - ns1).action, RenewalAction::none);
  EXPECT_EQ(in_time.valid_until, t0 + milliseconds(39698));
}

TEST(RenewalPolicy, LateReplyForOlderSendNeverShortensValidity) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);
  s.valid_until = t0 + seconds(50);  // a newer renewal/extend already counted further
  s.renew_in_flight = true;
  const RenewalStep step = p.on_renewed(s, t0 + seconds(10), t0 + seconds(11));
  EXPECT_EQ(s.valid_until, t0 + seconds(50));  // t0+39.698 s would be shorter: kept
  EXPECT_EQ(step.next, t0 + seconds(20));
  EXPECT_FALSE(s.renew_in_flight);

  // A newer send does extend it.
  p.on_renewed(s, t0 + seconds(30), t0 + seconds(31));
  EXPECT_EQ(s.valid_until, t0 + milliseconds(59698));
}

TEST(RenewalPolicy, LossExactlyAtValidityEnd) {
  const RenewalPolicy p = watchdog();
  const TP until = t0 + milliseconds(29698);
  {
    RenewalState s = acquired(p, t0);
    const RenewalStep step = p.on_due(s, until - ns1);
    EXPECT_EQ(step.action, RenewalAction::renew);
  }
  {
    RenewalState s = acquired(p, t0);
    const RenewalStep step = p.on_due(s, until);
    EXPECT_EQ(step.action, RenewalAction::lose);
    EXPECT_FALSE(step.next.has_value());
    EXPECT_FALSE(step.report_at_risk);
    EXPECT_FALSE(s.renew_in_flight);
  }
  {
    RenewalState s = acquired(p, t0);
    EXPECT_EQ(p.on_due(s, until + seconds(5)).action, RenewalAction::lose);
  }
  {  // A renewal in flight does not save an expired lease.
    RenewalState s = acquired(p, t0);
    ASSERT_EQ(p.on_due(s, t0 + seconds(10)).action, RenewalAction::renew);
    EXPECT_EQ(p.on_due(s, until).action, RenewalAction::lose);
  }
}

TEST(RenewalPolicy, FailedRenewRetriesAtBoundedStep) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);
  ASSERT_EQ(p.on_due(s, t0 + seconds(10)).action, RenewalAction::renew);
  const RenewalStep step = p.on_renew_failed(s, t0 + milliseconds(10040));
  EXPECT_EQ(step.action, RenewalAction::none);
  EXPECT_EQ(step.next, t0 + milliseconds(11040));
  EXPECT_FALSE(step.report_at_risk);  // 19.658 s left
  EXPECT_FALSE(s.renew_in_flight);
  EXPECT_EQ(s.valid_until, t0 + milliseconds(29698));

  const RenewalPolicy small = watchdog(milliseconds(1000));  // step 50 ms
  RenewalState s2 = acquired(small, t0);
  ASSERT_EQ(small.on_due(s2, t0 + milliseconds(333)).action, RenewalAction::renew);
  EXPECT_EQ(small.on_renew_failed(s2, t0 + milliseconds(340)).next, t0 + milliseconds(390));
}

TEST(RenewalPolicy, FailedRenewNeverRetriesAfterValidityEnd) {
  const RenewalPolicy p = watchdog();
  const TP until = t0 + milliseconds(29698);
  RenewalState s = acquired(p, t0);
  s.renew_in_flight = true;
  RenewalStep step = p.on_renew_failed(s, until - milliseconds(300));
  EXPECT_EQ(step.action, RenewalAction::none);
  EXPECT_EQ(step.next, until);

  s.renew_in_flight = true;
  step = p.on_renew_failed(s, until - ns1);
  EXPECT_EQ(step.action, RenewalAction::none);
  EXPECT_EQ(step.next, until);

  s.renew_in_flight = true;
  step = p.on_renew_failed(s, until);
  EXPECT_EQ(step.action, RenewalAction::lose);
  EXPECT_FALSE(step.next.has_value());
  EXPECT_FALSE(s.renew_in_flight);
}

TEST(RenewalPolicy, AtRiskBoundaryOnDue) {
  const RenewalPolicy p = watchdog();
  const TP until = t0 + milliseconds(29698);
  {
    RenewalState s = acquired(p, t0);
    EXPECT_FALSE(p.on_due(s, until - seconds(10)).report_at_risk);  // exactly 10 s left
    EXPECT_FALSE(s.at_risk_reported);
  }
  {
    RenewalState s = acquired(p, t0);
    const RenewalStep step = p.on_due(s, until - seconds(10) + ns1);
    EXPECT_TRUE(step.report_at_risk);
    EXPECT_EQ(step.action, RenewalAction::renew);  // still tries to renew
    EXPECT_TRUE(s.at_risk_reported);
  }
}

TEST(RenewalPolicy, AtRiskReportedOnceUntilARenewalSucceeds) {
  const RenewalPolicy p = watchdog();
  RenewalState s = acquired(p, t0);  // valid until t0+29.698 s
  // Reported on a failure with 9.698 s left.
  ASSERT_EQ(p.on_due(s, t0 + seconds(19)).action, RenewalAction::renew);
  EXPECT_FALSE(s.at_risk_reported);
  EXPECT_TRUE(p.on_renew_failed(s, t0 + seconds(20)).report_at_risk);
  // Not again: neither on due nor on failure.
  EXPECT_FALSE(p.on_due(s, t0 + seconds(21)).report_at_risk);
  EXPECT_FALSE(p.on_renew_failed(s, t0 + seconds(22)).report_at_risk);
  EXPECT_FALSE(p.on_due(s, t0 + seconds(29)).report_at_risk);
  // A success: sent at +29 s, valid until +58.698 s.
  EXPECT_FALSE(p.on_renewed(s, t0 + seconds(29), t0 + seconds(29) + milliseconds(5)).report_at_risk);
  EXPECT_FALSE(s.at_risk_reported);
  EXPECT_EQ(s.valid_until, t0 + milliseconds(58698));
  // Failing again: reported again, once.
  EXPECT_FALSE(p.on_due(s, t0 + seconds(48)).report_at_risk);  // 10.698 s left
  EXPECT_FALSE(p.on_renew_failed(s, t0 + seconds(48)).report_at_risk);
  EXPECT_TRUE(p.on_due(s, t0 + seconds(49)).report_at_risk);  // 9.698 s left
  EXPECT_FALSE(p.on_renew_failed(s, t0 + seconds(49)).report_at_risk);
  EXPECT_FALSE(p.on_due(s, t0 + seconds(50)).report_at_risk);
}

TEST(RenewalPolicy, FixedTtlNeverRenewsNeverAtRiskAndIsLostAtValidityEnd) {
  const RenewalPolicy p(LeaseTiming::from(LeaseOptions{}), LeaseMode::fixed_ttl);
  const TP until = t0 + milliseconds(29698);
  RenewalState s = acquired(p, t0);
  for (TP now : {t0, t0 + seconds(10), t0 + seconds(25), until - ns1}) {
    const RenewalStep step = p.on_due(s, now);
    EXPECT_EQ(step.action, RenewalAction::none);
    EXPECT_EQ(step.next, until);
    EXPECT_FALSE(step.report_at_risk);
    EXPECT_FALSE(s.renew_in_flight);
    EXPECT_FALSE(s.at_risk_reported);
  }
  const RenewalStep end = p.on_due(s, until);
  EXPECT_EQ(end.action, RenewalAction::lose);
  EXPECT_FALSE(end.next.has_value());
}

// ---- RenewalPolicy: whole sequences ----------------------------------------------------------

struct SequenceResult {
  int renews = 0;
  std::vector<TP> at_risk;
  std::optional<TP> lost;
};

// Drives a lease through failing renewals starting at `due`: each renew fails `latency` after
// it was sent, and the next due is what the policy says. Stops at the loss.
SequenceResult fail_until_lost(const RenewalPolicy& p, RenewalState& s, TP due, milliseconds latency) {
  SequenceResult r;
  TP now = due;
  for (int guard = 0; guard < 10000; ++guard) {
    const RenewalStep d = p.on_due(s, now);
    if (d.report_at_risk) r.at_risk.push_back(now);
    if (d.action == RenewalAction::lose) {
      r.lost = now;
      return r;
    }
    EXPECT_EQ(d.action, RenewalAction::renew);
    EXPECT_TRUE(d.next.has_value());
    if (!d.next) return r;
    // The look-again time while the renewal is in flight: when it would turn at risk, or, once
    // reported, the end of validity.
    {
      const TP risk_at = s.valid_until - p.timing().at_risk_margin + milliseconds(1);
      EXPECT_EQ(*d.next, s.at_risk_reported || risk_at <= now ? s.valid_until : risk_at);
    }
    ++r.renews;
    const TP failed_at = now + latency;
    const RenewalStep f = p.on_renew_failed(s, failed_at);
    if (f.report_at_risk) r.at_risk.push_back(failed_at);
    if (f.action == RenewalAction::lose) {
      r.lost = failed_at;
      return r;
    }
    EXPECT_TRUE(f.next.has_value());
    if (!f.next) return r;
    EXPECT_GT(*f.next, failed_at);
    EXPECT_LE(*f.next, s.valid_until);
    now = *f.next;
  }
  ADD_FAILURE() << "no loss after 10000 steps";
  return r;
}

TEST(RenewalPolicySequence, TenSuccessfulCyclesThenFailuresUntilLoss) {
  const RenewalPolicy p = watchdog();
  // Acquire sent at t0, its reply at t0+5 ms.
  RenewalState s = acquired(p, t0);
  TP due = p.first_due(s, t0 + milliseconds(5));
  ASSERT_EQ(due, t0 + milliseconds(10000));

  for (int i = 1; i <= 10; ++i) {
    const TP expected_due = t0 + seconds(10) * i;
    ASSERT_EQ(due, expected_due) << "cycle " << i;
    const RenewalStep d = p.on_due(s, due);
    ASSERT_EQ(d.action, RenewalAction::renew) << "cycle " << i;
    EXPECT_FALSE(d.report_at_risk) << "cycle " << i;
    EXPECT_EQ(d.next, s.valid_until - milliseconds(10000) + milliseconds(1));
    // Reply 20 ms after the send.
    const RenewalStep r = p.on_renewed(s, due, due + milliseconds(20));
    EXPECT_EQ(s.valid_until, expected_due + milliseconds(29698)) << "cycle " << i;
    ASSERT_TRUE(r.next.has_value());
    EXPECT_EQ(*r.next, expected_due + seconds(10)) << "cycle " << i;
    EXPECT_FALSE(r.report_at_risk);
    EXPECT_FALSE(s.renew_in_flight);
    due = *r.next;
  }
  EXPECT_EQ(due, t0 + milliseconds(110000));
  EXPECT_EQ(s.valid_until, t0 + milliseconds(129698));

  // From here every renewal fails 50 ms after it was sent; retries every 1.05 s.
  const SequenceResult f = fail_until_lost(p, s, due, milliseconds(50));
  // Renews at 110.0 + 1.05 j s for j = 0..18; the retry after 128.95 s is clamped to the end.
  EXPECT_EQ(f.renews, 19);
  // First moment with less than 10 s left: the due at 120.5 s (9.198 s left).
  ASSERT_EQ(f.at_risk.size(), 1u);
  EXPECT_EQ(f.at_risk[0], t0 + milliseconds(120500));
  ASSERT_TRUE(f.lost.has_value());
  EXPECT_EQ(*f.lost, t0 + milliseconds(129698));
  EXPECT_EQ(*f.lost, s.valid_until);
}

TEST(RenewalPolicySequence, FailureStreakRecoversThenFailsAgain) {
  const RenewalPolicy p = watchdog(milliseconds(3000));  // renew 1 s, margin 1 s, drift 32 ms, step 100 ms
  RenewalState s = acquired(p, t0);
  ASSERT_EQ(s.valid_until, t0 + milliseconds(2968));
  TP now = p.first_due(s, t0);
  ASSERT_EQ(now, t0 + milliseconds(1000));

  // Immediate failures (latency 0) from +1.000 s: retries at +1.1, +1.2, ... s.
  int renews = 0;
  std::vector<TP> at_risk;
  while (now < t0 + milliseconds(2500)) {
    const RenewalStep d = p.on_due(s, now);
    ASSERT_EQ(d.action, RenewalAction::renew);
    if (d.report_at_risk) at_risk.push_back(now);
    ++renews;
    const RenewalStep f = p.on_renew_failed(s, now);
    if (f.report_at_risk) at_risk.push_back(now);
    ASSERT_EQ(f.action, RenewalAction::none);
    ASSERT_TRUE(f.next.has_value());
    EXPECT_EQ(*f.next, now + milliseconds(100));
    now = *f.next;
  }
  EXPECT_EQ(renews, 15);  // +1.0 .. +2.4 s
  // At risk once less than 1 s is left (valid until +2.968 s): the due at +2.0 s.
  ASSERT_EQ(at_risk.size(), 1u);
  EXPECT_EQ(at_risk[0], t0 + milliseconds(2000));

  // The renewal sent at +2.5 s succeeds 10 ms later.
  ASSERT_EQ(p.on_due(s, now).action, RenewalAction::renew);
  const RenewalStep ok = p.on_renewed(s, now, now + milliseconds(10));
  EXPECT_EQ(s.valid_until, t0 + milliseconds(5468));
  EXPECT_EQ(ok.next, t0 + milliseconds(3500));
  EXPECT_FALSE(s.at_risk_reported);

  // Failing from +3.5 s on, 10 ms per failure: retries every 110 ms until +5.468 s.
  const SequenceResult f = fail_until_lost(p, s, *ok.next, milliseconds(10));
  // Renews at 3.5 + 0.11 j for j = 0..17 (5.37 s); its failure at 5.38 s retries at the end.
  EXPECT_EQ(f.renews, 18);
  ASSERT_EQ(f.at_risk.size(), 1u);
  // Less than 1 s left after +4.468 s: first event after it is the due at +4.49 s.
  EXPECT_EQ(f.at_risk[0], t0 + milliseconds(4490));
  ASSERT_TRUE(f.lost.has_value());
  EXPECT_EQ(*f.lost, t0 + milliseconds(5468));
}

TEST(RenewalPolicySequence, FixedTtlLeaseLostAtEndWithoutRenewals) {
  LeaseOptions o;
  o.mode = LeaseMode::fixed_ttl;
  o.ttl = milliseconds(5000);
  const RenewalPolicy p(LeaseTiming::from(o), o.mode);
  RenewalState s = acquired(p, t0);  // 5000 - 52 ms
  TP due = p.first_due(s, t0 + milliseconds(3));
  EXPECT_EQ(due, t0 + milliseconds(4948));
  int looks = 0;
  // A scheduler that wakes early (e.g. spurious timer) still gets no renew.
  for (TP now : {t0 + seconds(1), t0 + seconds(4)}) {
    const RenewalStep step = p.on_due(s, now);
    EXPECT_EQ(step.action, RenewalAction::none);
    EXPECT_EQ(step.next, due);
    ++looks;
  }
  const RenewalStep end = p.on_due(s, due);
  EXPECT_EQ(end.action, RenewalAction::lose);
  EXPECT_EQ(looks, 2);
}

}  // namespace

// Regression: a renewal that hangs (no reply, no error) longer than the validity left minus the
// at-risk margin must still be reported at risk before the lease ends, then lost at its end.
TEST(RenewalPolicySequence, HangingRenewalIsReportedAtRiskThenLost) {
  LeaseOptions o;
  o.ttl = seconds(3);
  const RenewalPolicy p(LeaseTiming::from(o), LeaseMode::watchdog);
  RenewalState s = acquired(p, t0);  // valid until t0 + 3000 - 32 ms
  const RenewalStep first = p.on_due(s, t0 + seconds(1));
  ASSERT_EQ(first.action, RenewalAction::renew);
  ASSERT_TRUE(first.next.has_value());
  EXPECT_EQ(*first.next, t0 + milliseconds(1969));  // first moment with < 1000 ms left of 2968
  const RenewalStep risk = p.on_due(s, *first.next);
  EXPECT_EQ(risk.action, RenewalAction::none);  // the renewal is still in flight
  EXPECT_TRUE(risk.report_at_risk);
  ASSERT_TRUE(risk.next.has_value());
  EXPECT_EQ(*risk.next, t0 + milliseconds(2968));
  EXPECT_EQ(p.on_due(s, *risk.next).action, RenewalAction::lose);
}
