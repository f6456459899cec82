// Fault scenarios (issue #7): several worker processes x threads contend on a few locks for a
// bounded time against a real redis-server while the test injects faults on a schedule; the
// merged history is then judged by the checker (support/history.hpp): mutual exclusion except
// where a documented fault explains an overlap, fencing, honesty of loss reports, liveness.
//
// Faults that the documentation says can break exclusion: a holder paused past its lease
// (client_pause) and a restart without persistence (server_restart_empty). Every other fault
// here must leave a history with no overlap at all.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "fault/scenario.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::CheckReport;
using dlock::test::Scenario;
using dlock::test::ScenarioOptions;
namespace fault = dlock::test::fault;

// Runs the workload to its end and checks the history and what is left in Redis.
CheckReport finish(Scenario& s) {
  auto codes = s.join_workers();
  for (std::size_t i = 0; i < codes.size(); ++i) {
    EXPECT_EQ(codes[i], 0) << "worker w" << i << " exited abnormally (-1: hung, killed)";
  }
  CheckReport r = s.check();
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_TRUE(s.locks_left_behind_expire()) << "a lock key outlived its owners";
  return r;
}

ScenarioOptions base(std::string kind = "mutex") {
  ScenarioOptions o;
  o.kind = std::move(kind);
  o.duration = 12s;
  return o;
}

TEST(FaultScenario, NetworkDelayPauseDropAndBlackhole) {
  ScenarioOptions o = base();
  o.through_proxy = true;
  Scenario s(o);
  s.start_workers();
  ASSERT_TRUE(s.wait_for_acquisitions(5, 5s));
  auto& p = s.proxy();
  s.fault(fault::proxy_delay, "server", 1500ms, [&] { p.delay(150ms); }, [&] { p.pass(); });
  s.sleep(700ms);
  // Longer than the TTL: holders' renewals stall, their validity runs out, they are told.
  s.fault(fault::proxy_pause, "server", 2000ms, [&] { p.pause(); }, [&] { p.pass(); });
  s.sleep(700ms);
  s.instant_fault(fault::proxy_drop, [&] { p.drop(); });
  s.sleep(700ms);
  s.fault(fault::proxy_blackhole, "server", 2000ms, [&] { p.blackhole(); }, [&] { p.pass(); });
  CheckReport r = finish(s);
  EXPECT_EQ(r.explained_overlaps, 0u);
  EXPECT_GT(r.writes_accepted, 0u);
}

TEST(FaultScenario, ServerKilledAndRestartedWithAppendfsyncAlways) {
  ScenarioOptions o = base("sem");
  o.server.appendonly = true;
  Scenario s(o);
  s.start_workers();
  ASSERT_TRUE(s.wait_for_acquisitions(5, 5s));
  for (int i = 0; i < 2; ++i) {
    s.fault(fault::server_restart_aof, "server", 0ms, [&] { s.server().kill(); },
            [&] { s.server().start(); });
    s.sleep(3000ms);
  }
  CheckReport r = finish(s);
  // Acknowledged writes survive: no overlap is excused by this fault.
  EXPECT_EQ(r.explained_overlaps, 0u);
}

TEST(FaultScenario, ServerKilledAndRestartedWithoutPersistence) {
  ScenarioOptions o = base();
  Scenario s(o);
  s.start_workers();
  ASSERT_TRUE(s.wait_for_acquisitions(5, 5s));
  for (int i = 0; i < 2; ++i) {
    s.fault(fault::server_restart_empty, "server", 0ms, [&] { s.server().kill(); },
            [&] { s.server().restart_empty(); });
    s.sleep(3000ms);
  }
  finish(s);  // overlaps allowed only across the restarts, and then told to the old holder
}

TEST(FaultScenario, ServerPausedLongerThanTheTtl) {
  ScenarioOptions o = base("rw");
  Scenario s(o);
  s.start_workers();
  ASSERT_TRUE(s.wait_for_acquisitions(5, 5s));
  s.fault(fault::server_pause, "server", 2500ms, [&] { s.server().pause(); },
          [&] { s.server().resume(); });
  s.sleep(2000ms);
  s.fault(fault::server_pause, "server", 2500ms, [&] { s.server().pause(); },
          [&] { s.server().resume(); });
  CheckReport r = finish(s);
  // Holders' leases run out on their own clock before the server could hand the lock on.
  EXPECT_EQ(r.explained_overlaps, 0u);
}

TEST(FaultScenario, HolderProcessPausedLongerThanItsTtl) {
  ScenarioOptions o = base();
  o.hold = 150ms;  // holders hold long enough to be caught holding
  Scenario s(o);
  s.start_workers();
  ASSERT_TRUE(s.wait_for_acquisitions(5, 5s));
  for (int i = 0; i < 2; ++i) {
    std::optional<int> holder;
    ASSERT_TRUE(dlock::test::eventually([&] { return (holder = s.current_holder()).has_value(); },
                                        dlock::test::scaled(3s), 10ms));
    s.pause_worker(*holder, 3000ms);
    s.sleep(1500ms);
  }
  CheckReport r = finish(s);
  // Each paused holder's lease ran out during its pause (its clock counts through SIGSTOP),
  // so it was told of a loss; the overlaps it caused are explained and fenced.
  EXPECT_GE(r.losses, 1u) << r.summary();
}

TEST(FaultScenario, ClientKillAndScriptFlush) {
  ScenarioOptions o = base("fair");
  Scenario s(o);
  s.start_workers();
  ASSERT_TRUE(s.wait_for_acquisitions(5, 5s));
  for (int i = 0; i < 3; ++i) {
    s.instant_fault(fault::client_kill, [&] { s.raw().cmd({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}); });
    s.sleep(1500ms);
    s.instant_fault(fault::script_flush, [&] { s.raw().cmd({"SCRIPT", "FLUSH"}); });
    s.sleep(1500ms);
  }
  // Acquisitions keep working after the scripts were flushed (EVAL fallback).
  const std::size_t before = s.acquisitions();
  EXPECT_TRUE(s.wait_for_acquisitions(before + 3, 5s));
  CheckReport r = finish(s);
  EXPECT_EQ(r.explained_overlaps, 0u);
}

}  // namespace
