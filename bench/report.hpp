// bench/report.hpp — the rows of the result table, their targets from the issue, and the
// table / JSON renderings.
//
// Every row holds one value per repeat and is shown as median (min-max). Absolute targets
// compare that median directly. Ratio targets compare a row with a baseline (the floor, or the
// round trip) measured in the same run, and here the floor's two modes matter: on this 2-vCPU
// VM the blocking hiredis floor runs either fast (PING round trip ~15 us) or slow (~40-60 us,
// each request wakes a halted vCPU), switching minutes apart, so a median/median ratio would
// flip its verdict with the mode. Instead:
//   - each round is classified by its PING p50 (the floor.rtt row): fast below a threshold
//     (set_floor_modes), slow otherwise;
//   - a row measured in the rounds (`paired`) is divided by its baseline round by round (the
//     same round's floor, measured back to back with it), and the ratio judged is the median
//     of those per-round ratios, with their min-max;
//   - only fast rounds are judged when there are any (the demanding case: a fast floor is the
//     harder one to keep up with); with none, the slow rounds are, and the row says so;
//   - a row not measured in the rounds (a peer's, run before them) is divided by the median of
//     the judged rounds' baseline values.
// Peer rows are judged against the same targets, so the table shows how each library fares.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "json.hpp"
#include "stats.hpp"

namespace bench {

struct Target {
  enum class Kind {
    none,
    ratio_info,      // ratio to the baseline shown, no verdict
    ratio_at_least,  // median / baseline >= value
    ratio_at_most,   // median / baseline <= value
    at_least,        // median >= value
    at_most,         // median <= value
  };
  Kind kind = Kind::none;
  double value = 0;
  std::string baseline;  // id of the baseline row (ratio kinds)
  std::string text;      // as the issue states it, e.g. ">= 0.95x floor (1 conn)"
  double aim = 0;        // a stretch ratio the issue aims for (0: none)
};

struct Row {
  std::string id;        // stable key, e.g. "uncontended.t8" or "peer.redis-py.uncontended.t8"
  std::string scenario;  // what is measured, for people
  std::string library;
  std::string unit;      // "pairs/s", "us", "%", "ratio", "cmds", "B", ...
  int decimals = 0;
  std::vector<double> runs;
  Target target;

  // Filled by Report::evaluate().
  Spread spread;
  double ratio = 0;      // ratio kinds: the ratio judged (see the top of this file)
  std::string result;    // "PASS", "FAIL", or "" (no target / missing data)
  std::string note;

  // runs[i] was measured in round i + 1, back to back with that round's baselines. False for
  // the peers' rows: their drivers repeat on their own, before the rounds.
  bool paired = true;
  // Filled by Report::evaluate() for ratio kinds.
  double ratio_min = 0;               // min-max of the per-round ratios judged (paired rows), or
  double ratio_max = 0;               //   of min and max over the judged baseline (unpaired)
  std::vector<double> round_ratios{}; // every round's ratio, judged or not (paired rows)
  std::string judged_against{};       // which floor the ratio was judged against, for people
};

// The floor's mode in each round, from the PING p50 of the round-trip row.
struct FloorModes {
  double threshold_us = 0;     // fast: PING p50 below this
  std::vector<double> ping_p50_us;
  std::vector<bool> fast;      // per round
  int fast_rounds = 0;
  int slow_rounds = 0;
  bool known() const noexcept { return !fast.empty(); }
  // The rounds a floor-relative verdict is judged on: the fast ones if any, else all.
  bool judged(std::size_t round_index) const noexcept {
    return !known() || fast_rounds == 0 || (round_index < fast.size() && fast[round_index]);
  }
  // "fast floor, 2 of 3 rounds" / "judged against slow-mode floor only" / "floor mode unknown".
  std::string judged_text() const;
};

class Report {
 public:
  Row& add(Row row);
  Row* find(const std::string& id);
  // Appends `value` to the row `id` (which must exist).
  void record(const std::string& id, double value);
  const std::vector<Row>& rows() const noexcept { return rows_; }
  // Classify rounds by the PING p50 values of row `rtt_id` (one per round): fast below
  // `threshold_us`. Without this (or without that row's values) every round is judged alike.
  void set_floor_modes(const std::string& rtt_id, double threshold_us);
  const FloorModes& floor_modes() const noexcept { return modes_; }
  // {"threshold_us", "rounds": [{"round", "ping_p50_us", "mode"}], "fast", "slow", "judged_against"}
  Json floor_modes_json() const;

  // Classifies the rounds, judges every row, then orders them for display: rows measuring the
  // same thing (dlock's and each peer's, e.g. "contended.p2.p50") next to each other, in the
  // order dlock's appear.
  void evaluate();
  // A GitHub-flavoured Markdown table: readable in a terminal and pasted as-is into
  // docs/BENCHMARKS.md. The floor's per-round modes appear as a row under the round trip's.
  void print_table(std::FILE* out) const;
  Json rows_json() const;
  // Number of rows with a verdict, and how many of them failed.
  int judged() const;
  int failed() const;

 private:
  std::vector<Row> rows_;
  std::string modes_row_;  // the round-trip row the modes come from ("" = not classified)
  FloorModes modes_;
};

std::string format_value(double v, int decimals);

}  // namespace bench
