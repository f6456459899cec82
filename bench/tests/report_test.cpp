// How the report turns per-round values into verdicts (bench/report.hpp): per-round ratios,
// the floor's mode per round, and which rounds a floor-relative target is judged on. Pure
// arithmetic on hand-made rows, so every case, a mixed-mode run included, is reproducible
// without waiting for the VM to change modes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "report.hpp"

namespace bench {
namespace {

using K = Target::Kind;

Row row(const std::string& id, std::vector<double> runs, Target t = {}) {
  Row r;
  r.id = id;
  r.scenario = id;
  r.library = "test";
  r.unit = "x";
  r.runs = std::move(runs);
  r.target = std::move(t);
  return r;
}

// A report with a round trip (its PING p50s decide the modes) and a 1-connection floor.
Report with_floor(std::vector<double> ping_us, std::vector<double> floor_pairs) {
  Report rep;
  rep.add(row("rtt", std::move(ping_us)));
  rep.add(row("floor", std::move(floor_pairs)));
  rep.set_floor_modes("rtt", 30);
  return rep;
}

const Row& get(Report& rep, const std::string& id) { return *rep.find(id); }

TEST(BenchReport, RatioIsTheMedianOfPerRoundRatiosNotMedianOverMedian) {
  // Rounds (floor, dlock): (10000, 9000), (30000, 12000), (12000, 30000). Median over median
  // is 12000 / 12000 = 1.0 (PASS); the per-round ratios are 0.9, 0.4, 2.5, median 0.9 (FAIL).
  Report rep = with_floor({14, 15, 16}, {10000, 30000, 12000});
  rep.add(row("t1", {9000, 12000, 30000}, Target{K::ratio_at_least, 0.95, "floor", "", 0}));
  rep.evaluate();
  const Row& r = get(rep, "t1");
  EXPECT_NEAR(r.ratio, 0.9, 1e-9);
  EXPECT_NEAR(r.ratio_min, 0.4, 1e-9);
  EXPECT_NEAR(r.ratio_max, 2.5, 1e-9);
  EXPECT_EQ(r.result, "FAIL");
  ASSERT_EQ(r.round_ratios.size(), 3u);
  EXPECT_NEAR(r.round_ratios[1], 0.4, 1e-9);
  EXPECT_EQ(r.judged_against, "fast floor, 3 of 3 rounds");
}

TEST(BenchReport, MixedModesAreJudgedOnTheFastRoundsOnly) {
  // Round 2 ran on the slow floor (PING 58 us, 8000 pairs/s): dlock at 15000 is 1.9x that,
  // but only 0.55x and 0.6x the fast rounds' floors. The verdict must come from those.
  Report rep = with_floor({15, 58, 14}, {27000, 8000, 25000});
  rep.add(row("t1", {15000, 15000, 15000}, Target{K::ratio_at_least, 0.95, "floor", "", 0}));
  rep.evaluate();
  const Row& r = get(rep, "t1");
  EXPECT_EQ(rep.floor_modes().fast_rounds, 2);
  EXPECT_EQ(rep.floor_modes().slow_rounds, 1);
  EXPECT_NEAR(r.ratio, (15000.0 / 27000 + 15000.0 / 25000) / 2, 1e-9);  // median of two
  EXPECT_NEAR(r.ratio_max, 0.6, 1e-9);
  EXPECT_EQ(r.result, "FAIL");
  EXPECT_EQ(r.judged_against, "fast floor, 2 of 3 rounds");
  // The slow round's ratio is still reported, just not judged.
  EXPECT_NEAR(r.round_ratios[1], 15000.0 / 8000, 1e-9);
}

TEST(BenchReport, NoFastRoundMeansJudgedAgainstTheSlowFloorOnlyAndSaysSo) {
  Report rep = with_floor({58, 61, 40}, {8000, 7500, 9000});
  rep.add(row("t1", {15000, 16000, 17000}, Target{K::ratio_at_least, 0.95, "floor", "", 0}));
  rep.add(row("p50", {127, 130, 120}, Target{K::ratio_at_most, 3, "rtt", "", 0}));
  rep.evaluate();
  EXPECT_EQ(rep.floor_modes().fast_rounds, 0);
  EXPECT_EQ(get(rep, "t1").result, "PASS");
  EXPECT_EQ(get(rep, "t1").judged_against, "judged against slow-mode floor only");
  // Handoff p50 against the same round's round trip: 127/58, 130/61, 120/40 -> median 2.19.
  EXPECT_NEAR(get(rep, "p50").ratio, 127.0 / 58, 1e-9);
  EXPECT_EQ(get(rep, "p50").result, "PASS");
  const Json modes = rep.floor_modes_json();
  EXPECT_EQ(modes.number_or("fast", -1), 0);
  EXPECT_EQ(modes.number_or("slow", -1), 3);
  EXPECT_EQ(modes.string_or("judged_against", ""), "judged against slow-mode floor only");
}

TEST(BenchReport, ThresholdSplitsTheModes) {
  // 29.9 us is fast, 30 us is not (fast: strictly below the threshold).
  Report rep = with_floor({29.9, 30, 45}, {20000, 10000, 9000});
  rep.evaluate();
  ASSERT_EQ(rep.floor_modes().fast.size(), 3u);
  EXPECT_TRUE(rep.floor_modes().fast[0]);
  EXPECT_FALSE(rep.floor_modes().fast[1]);
  EXPECT_FALSE(rep.floor_modes().fast[2]);
}

TEST(BenchReport, UnpairedRowsUseTheJudgedRoundsFloorMedian) {
  // A peer's runs were not measured in the rounds: divide by the median of the fast rounds'
  // floor (27000 and 25000 -> 26000), not by any one round's.
  Report rep = with_floor({15, 58, 14}, {27000, 8000, 25000});
  Row& peer = rep.add(row("peer", {13000, 12000, 14000}, Target{K::ratio_at_least, 0.95, "floor", "", 0}));
  peer.paired = false;
  rep.evaluate();
  const Row& r = get(rep, "peer");
  EXPECT_NEAR(r.ratio, 13000.0 / 26000, 1e-9);
  EXPECT_NEAR(r.ratio_min, 12000.0 / 26000, 1e-9);
  EXPECT_NEAR(r.ratio_max, 14000.0 / 26000, 1e-9);
  EXPECT_TRUE(r.round_ratios.empty());
  EXPECT_EQ(r.result, "FAIL");
  EXPECT_EQ(r.judged_against, "unpaired: median of fast floor, 2 of 3 rounds");
}

TEST(BenchReport, AbsoluteTargetsIgnoreTheModes) {
  Report rep = with_floor({15, 58, 14}, {27000, 8000, 25000});
  rep.add(row("p99", {900, 2000, 950}, Target{K::at_most, 1000, "", "", 0}));
  rep.evaluate();
  EXPECT_EQ(get(rep, "p99").result, "PASS");  // median of all three rounds: 950
  EXPECT_TRUE(get(rep, "p99").judged_against.empty());
}

TEST(BenchReport, WithoutModesEveryRoundIsJudged) {
  Report rep;
  rep.add(row("floor", {10000, 20000, 30000}));
  rep.add(row("t1", {10000, 10000, 10000}, Target{K::ratio_at_least, 0.95, "floor", "", 0}));
  rep.evaluate();
  EXPECT_FALSE(rep.floor_modes().known());
  EXPECT_NEAR(get(rep, "t1").ratio, 0.5, 1e-9);
  EXPECT_EQ(get(rep, "t1").judged_against, "floor mode unknown");
}

TEST(BenchReport, TableShowsTheModesRowAndTheJudgedFloor) {
  Report rep = with_floor({15, 58, 14}, {27000, 8000, 25000});
  rep.add(row("t1", {15000, 15000, 15000}, Target{K::ratio_at_least, 0.95, "floor", "", 0}));
  rep.evaluate();
  char* buf = nullptr;
  std::size_t len = 0;
  std::FILE* f = ::open_memstream(&buf, &len);
  ASSERT_NE(f, nullptr);
  rep.print_table(f);
  std::fclose(f);
  const std::string table(buf, len);
  std::free(buf);
  EXPECT_NE(table.find("1 floor: mode per round (fast: PING p50 < 30 us)"), std::string::npos) << table;
  EXPECT_NE(table.find("2 fast, 1 slow"), std::string::npos) << table;
  EXPECT_NE(table.find("fast slow fast"), std::string::npos) << table;
  EXPECT_NE(table.find("fast floor, 2 of 3 rounds"), std::string::npos) << table;
}

}  // namespace
}  // namespace bench
