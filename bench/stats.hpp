// bench/stats.hpp — the statistics of the report: median with min-max over repeats, and
// percentiles of latency samples.
#pragma once

#include <cstdint>
#include <vector>

namespace bench {

// Median, minimum and maximum of the values of the repeats of one measurement.
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
  std::size_t n = 0;
};

Spread spread(std::vector<double> values);

// The q-quantile (0 <= q <= 1) of `sorted` (ascending), nearest-rank: the smallest sample such
// that at least q of all samples are <= it. 0 for no samples.
double quantile_sorted(const std::vector<double>& sorted, double q);

// Latency summary of one run, in microseconds.
struct LatencySummary {
  double p50 = 0;
  double p99 = 0;
  double max = 0;
  std::size_t n = 0;
};

LatencySummary summarize_latency(std::vector<double> samples_us);

}  // namespace bench
