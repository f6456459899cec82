// bench/report.hpp — the rows of the result table, their targets from the issue, and the
// table / JSON renderings.
//
// Every row holds one value per repeat and is shown as median (min-max). A row with a target
// is judged on its median: ratio targets divide it by the median of a baseline row measured in
// the same run (the floor, or the round trip); absolute targets compare it directly. Peer rows
// are judged against the same targets, so the table shows how each library fares.
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
  double ratio = 0;      // median / baseline median (ratio kinds)
  std::string result;    // "PASS", "FAIL", or "" (no target / missing data)
  std::string note;
};

class Report {
 public:
  Row& add(Row row);
  Row* find(const std::string& id);
  // Appends `value` to the row `id` (which must exist).
  void record(const std::string& id, double value);
  const std::vector<Row>& rows() const noexcept { return rows_; }

  // Judges every row, then orders them for display: rows measuring the same thing (dlock's
  // and each peer's, e.g. "contended.p2.p50") next to each other, in the order dlock's appear.
  void evaluate();
  // A GitHub-flavoured Markdown table: readable in a terminal and pasted as-is into
  // docs/BENCHMARKS.md.
  void print_table(std::FILE* out) const;
  Json rows_json() const;
  // Number of rows with a verdict, and how many of them failed.
  int judged() const;
  int failed() const;

 private:
  std::vector<Row> rows_;
};

std::string format_value(double v, int decimals);

}  // namespace bench
