// The history checker of the fault suite (tests/support/history.hpp), on hand-built histories:
// each rule of issue #7 broken once (the checker must catch it), and lawful histories it must
// accept, including overlaps that a documented fault explains.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/history.hpp"

namespace {

using dlock::test::check;
using dlock::test::CheckBounds;
using dlock::test::CheckReport;
using dlock::test::Event;
using dlock::test::EventKind;
namespace fault = dlock::test::fault;

constexpr std::int64_t kMs = 1'000'000;

// Builds histories with times in milliseconds.
struct H {
  std::vector<Event> ev;

  H& acquire(std::int64_t t, const std::string& hold, std::uint64_t token,
             const std::string& proc = "w1", const std::string& lock = "m",
             std::uint64_t attempt = 0) {
    Event e;
    e.kind = EventKind::acquire, e.t = t * kMs, e.proc = proc, e.lock = lock, e.hold = hold;
    e.owner = "o-" + hold, e.token = token, e.attempt = attempt;
    ev.push_back(e);
    return *this;
  }
  H& release(std::int64_t t, const std::string& hold, const std::string& outcome = "ok") {
    Event e;
    e.kind = EventKind::release, e.t = t * kMs, e.hold = hold, e.outcome = outcome;
    ev.push_back(e);
    return *this;
  }
  H& loss(std::int64_t t, const std::string& hold, const std::string& why = "expired") {
    Event e;
    e.kind = EventKind::loss, e.t = t * kMs, e.hold = hold, e.outcome = why;
    ev.push_back(e);
    return *this;
  }
  H& write(std::int64_t t, std::uint64_t seq, std::uint64_t token, bool accepted,
           const std::string& lock = "m") {
    Event e;
    e.kind = EventKind::write, e.t = t * kMs, e.lock = lock, e.hold = "h", e.token = token;
    e.seq = seq, e.accepted = accepted;
    ev.push_back(e);
    return *this;
  }
  H& fault(std::int64_t t, std::int64_t end, std::string_view kind, const std::string& target) {
    Event e;
    e.kind = EventKind::fault, e.t = t * kMs, e.end = end * kMs, e.outcome = kind, e.proc = target;
    ev.push_back(e);
    return *this;
  }
  H& attempt(std::int64_t begin, std::int64_t end, std::int64_t wait_ms, const std::string& outcome,
             std::uint64_t id = 1) {
    Event b;
    b.kind = EventKind::attempt_begin, b.t = begin * kMs, b.proc = "w1", b.lock = "m";
    b.attempt = id, b.wait_ms = wait_ms;
    ev.push_back(b);
    if (end >= 0) {
      Event e;
      e.kind = EventKind::attempt_end, e.t = end * kMs, e.proc = "w1", e.attempt = id;
      e.outcome = outcome;
      ev.push_back(e);
    }
    return *this;
  }
  CheckReport run() const {
    CheckBounds b;
    b.renew_interval = std::chrono::milliseconds(500);
    b.round_trip = std::chrono::milliseconds(200);
    b.wait_slack = std::chrono::milliseconds(1000);
    b.settle = std::chrono::milliseconds(1000);
    std::vector<Event> sorted = ev;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Event& x, const Event& y) { return x.t < y.t; });
    return check(sorted, b);
  }
};

bool has_rule(const CheckReport& r, const std::string& rule) {
  for (const auto& v : r.violations) {
    if (v.rule == rule) return true;
  }
  return false;
}

// --------------------------------------------------------------------------- lawful histories

TEST(HistoryChecker, AcceptsSuccessiveHoldsWithRisingTokensAndFencedWrites) {
  H h;
  h.attempt(0, 10, 1000, "acquired", 1).acquire(10, "a", 5, "w1").write(20, 1, 5, true).release(30, "a");
  h.attempt(5, 31, 1000, "acquired", 2).acquire(31, "b", 6, "w2").write(40, 2, 6, true).write(41, 3, 6, true);
  h.release(50, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(r.holds, 2u);
  EXPECT_EQ(r.writes_accepted, 3u);
  EXPECT_EQ(r.attempts, 2u);
}

TEST(HistoryChecker, AcceptsOverlapOfAPausedHolderThatReportsItsLoss) {
  // w1 holds a, is SIGSTOPped 100..2100 past its lease; w2 takes over at 1700; w1 resumes,
  // its stale write is rejected and it is told of the loss 50 ms after the pause ended.
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 2100, fault::client_pause, "w1");
  h.acquire(1700, "b", 6, "w2").write(1710, 1, 6, true);
  h.write(2110, 2, 5, false).loss(2150, "a", "expired").release(2160, "a", "lock_lost");
  h.release(2500, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(r.explained_overlaps, 1u);
  EXPECT_EQ(r.stale_writes_rejected, 1u);
}

TEST(HistoryChecker, AcceptsOverlapAfterARestartWithoutPersistence) {
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 300, fault::server_restart_empty, "server");
  h.acquire(350, "b", 1700000000000000, "w2").loss(600, "a", "taken").release(700, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(r.explained_overlaps, 1u);
}

TEST(HistoryChecker, AcceptsOverlapAfterARestartThatKilledTheServerAsItGranted) {
  // The server granted w1's attempt (begun at 90) just before the kill at 100; w1 read the
  // reply at 110, after the kill. The restart lost the key all the same.
  H h;
  h.attempt(90, 110, 1000, "acquired", 7).acquire(110, "a", 5, "w1", "m", 7);
  h.fault(100, 300, fault::server_restart_empty, "server");
  h.acquire(350, "b", 1700000000000000, "w2").loss(600, "a", "taken").release(700, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(r.explained_overlaps, 1u);
}

TEST(HistoryChecker, CatchesAnOverlapOfHoldsBothGrantedAfterARestart) {
  // w1's attempt began before the kill but was granted long after the restart, by the new
  // server, which then granted w2 too: the restart explains nothing.
  H h;
  h.attempt(50, 2000, 5000, "acquired", 7).acquire(2000, "a", 5, "w1", "m", 7);
  h.fault(100, 300, fault::server_restart_empty, "server");
  h.acquire(2100, "b", 6, "w2").loss(2400, "a", "taken").release(2500, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "mutual_exclusion")) << r.summary();
}

TEST(HistoryChecker, CatchesAnOverlapOfHoldsGrantedJustAfterARestart) {
  // w1 began waiting before the kill and was granted just after the restart (by the new server,
  // as far as anyone can tell), then w2 too: a double grant the restart does not explain.
  H h;
  h.attempt(50, 320, 5000, "acquired", 7).acquire(320, "a", 5, "w1", "m", 7);
  h.fault(100, 300, fault::server_restart_empty, "server");
  h.acquire(350, "b", 6, "w2").loss(600, "a", "taken").release(700, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "mutual_exclusion")) << r.summary();
}

TEST(HistoryChecker, AcceptsALossToldByReleaseInsteadOfTheCallback) {
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 300, fault::server_restart_empty, "server");
  h.acquire(350, "b", 1700000000000000, "w2").release(400, "a", "lock_lost").loss(401, "a", "release");
  h.release(700, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(r.losses, 1u);
}

TEST(HistoryChecker, AcceptsAHolderThatReleasedWithAnUnknownOutcomeInTime) {
  // w1's release ran into the restart: "connection" (outcome unknown) is honest.
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 300, fault::server_restart_empty, "server");
  h.acquire(350, "b", 1700000000000000, "w2").release(400, "a", "connection").release(700, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
}

TEST(HistoryChecker, AcceptsAttemptErrorsDuringFaultsAndTimeoutsAfterThem) {
  H h;
  h.fault(0, 500, fault::proxy_blackhole, "server");
  h.attempt(100, 600, 1000, "connection", 1).attempt(3000, 4000, 1000, "timeout", 2);
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(r.errors, 1u);
  EXPECT_EQ(r.timeouts, 1u);
}

TEST(HistoryChecker, RoundTripsEventsThroughLines) {
  H h;
  h.acquire(1, "w1.0.1", 42, "w1", "m0", 3).write(2, 7, 42, true, "m0").fault(3, 4, fault::oom, "server");
  h.attempt(5, 6, 250, "acquired", 9);
  for (const Event& e : h.ev) {
    Event back = dlock::test::parse_line(dlock::test::to_line(e));
    EXPECT_EQ(dlock::test::to_line(back), dlock::test::to_line(e));
    EXPECT_EQ(back.kind, e.kind);
    EXPECT_EQ(back.t, e.t);
    EXPECT_EQ(back.token, e.token);
    EXPECT_EQ(back.attempt, e.attempt);
  }
  EXPECT_THROW(dlock::test::parse_line("t=1 ev=acquire tok"), std::invalid_argument);
  EXPECT_THROW(dlock::test::parse_line("ev=acquire"), std::invalid_argument);
  EXPECT_THROW(dlock::test::parse_line("t=1 ev=party"), std::invalid_argument);
}

// --------------------------------------------------------------------------- each rule broken

TEST(HistoryChecker, CatchesAnUnexplainedOverlap) {
  H h;
  h.acquire(0, "a", 5, "w1").acquire(50, "b", 6, "w2").release(100, "a").release(150, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "mutual_exclusion")) << r.summary();
}

TEST(HistoryChecker, CatchesAnOverlapWhosePauseHitAnotherProcess) {
  // The pause was of w3, not of the earlier holder: it explains nothing.
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 2100, fault::client_pause, "w3");
  h.acquire(1700, "b", 6, "w2").loss(2150, "a").release(2500, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "mutual_exclusion")) << r.summary();
}

TEST(HistoryChecker, CatchesAnOverlapDuringAFaultThatIsNotDocumentedToCauseOne) {
  // A restart WITH appendfsync always keeps the key: an overlap across it is a bug.
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 300, fault::server_restart_aof, "server");
  h.acquire(350, "b", 6, "w2").loss(600, "a", "taken").release(700, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "mutual_exclusion")) << r.summary();
}

TEST(HistoryChecker, CatchesAStaleWriteThatWasAccepted) {
  H h;
  h.write(10, 1, 6, true).write(20, 2, 5, true);
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "fencing")) << r.summary();
}

TEST(HistoryChecker, CatchesACurrentWriteThatWasRejected) {
  H h;
  h.write(10, 1, 6, true).write(20, 2, 6, false);
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "fencing")) << r.summary();
}

TEST(HistoryChecker, JudgesWritesInTheResourcesOrderNotByTime) {
  // Times say 6 then 5, the resource's sequence says 5 then 6: both accepted is lawful.
  H h;
  h.write(10, 2, 6, true).write(20, 1, 5, true);
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
}

TEST(HistoryChecker, CatchesATokenThatDidNotRiseForTheNextHolder) {
  H h;
  h.acquire(0, "a", 7, "w1").release(10, "a").acquire(20, "b", 7, "w2").release(30, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "fencing")) << r.summary();
}

// A pause of w1 just as acquire() returned "a": its loss (loop thread) was written before its
// acquisition (worker thread). Lawful: "a" was granted before it was lost, and before "b".
TEST(HistoryChecker, AcceptsALossWrittenBeforeItsHoldsAcquisition) {
  H h;
  h.acquire(0, "z", 4, "w2").release(40, "z");
  h.fault(100, 2100, fault::client_pause, "w1").loss(2110, "a").acquire(2120, "a", 5, "w1");
  h.acquire(2200, "b", 6, "w2").release(2300, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
}

// The same inverted hold still has to carry a higher token than a hold that ended before it.
TEST(HistoryChecker, CatchesALowTokenOnAHoldWhoseLossWasWrittenFirst) {
  H h;
  h.acquire(0, "z", 7, "w2").release(40, "z");
  h.fault(100, 2100, fault::client_pause, "w1").loss(2110, "a").acquire(2120, "a", 5, "w1");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "fencing")) << r.summary();
}

TEST(HistoryChecker, CatchesAPausedHolderThatIsNeverToldOfItsLoss) {
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 2100, fault::client_pause, "w1");
  h.acquire(1700, "b", 6, "w2").release(2300, "a", "ok").release(2500, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "honesty")) << r.summary();
}

TEST(HistoryChecker, CatchesALossReportThatCameTooLate) {
  // Bound: max(1700, 2100) + 500 + 200 = 2800; told at 3500.
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 2100, fault::client_pause, "w1");
  h.acquire(1700, "b", 6, "w2").loss(3500, "a").release(3600, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "honesty")) << r.summary();
  EXPECT_FALSE(has_rule(r, "mutual_exclusion")) << r.summary();
}

TEST(HistoryChecker, CatchesAHolderThatBelievedTooLongWithoutBeingTold) {
  H h;
  h.acquire(0, "a", 5, "w1").fault(100, 300, fault::server_restart_empty, "server");
  h.acquire(350, "b", 1700000000000000, "w2").release(1500, "a", "connection").release(1700, "b");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "honesty")) << r.summary();
}

TEST(HistoryChecker, CatchesAnAttemptThatHung) {
  H h;
  h.attempt(0, -1, 1000, "");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "liveness")) << r.summary();
}

TEST(HistoryChecker, CatchesAnAttemptThatOverranItsDeadline) {
  H h;
  h.attempt(0, 2500, 1000, "timeout");  // allowed: 1000 + 1000 slack
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "liveness")) << r.summary();
}

TEST(HistoryChecker, CatchesATimeoutReportedBeforeTheDeadline) {
  H h;
  h.attempt(0, 3, 1000, "timeout");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "liveness")) << r.summary();
}

TEST(HistoryChecker, AllowsAnAttemptToOverrunByItsOwnProcessPause) {
  H h;
  h.fault(100, 2100, fault::client_pause, "w1").attempt(0, 2500, 1000, "timeout");
  CheckReport r = h.run();
  EXPECT_TRUE(r.ok()) << r.summary();
}

TEST(HistoryChecker, CatchesAnErrorAfterTheFaultsSettled) {
  H h;
  h.fault(0, 500, fault::proxy_drop, "server").attempt(2000, 2100, 1000, "connection");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "liveness")) << r.summary();
}

TEST(HistoryChecker, CatchesAHoldThatNeverEnded) {
  H h;
  h.acquire(0, "a", 5, "w1");
  CheckReport r = h.run();
  EXPECT_TRUE(has_rule(r, "liveness")) << r.summary();
}

}  // namespace
