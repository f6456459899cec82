#include "stats.hpp"

#include <algorithm>
#include <cmath>

namespace bench {

Spread spread(std::vector<double> values) {
  Spread s;
  s.n = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.min = values.front();
  s.max = values.back();
  const std::size_t mid = values.size() / 2;
  s.median = values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  return s;
}

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(q * static_cast<double>(sorted.size()));
  std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  if (i >= sorted.size()) i = sorted.size() - 1;
  return sorted[i];
}

LatencySummary summarize_latency(std::vector<double> samples_us) {
  LatencySummary s;
  s.n = samples_us.size();
  if (samples_us.empty()) return s;
  std::sort(samples_us.begin(), samples_us.end());
  s.p50 = quantile_sorted(samples_us, 0.50);
  s.p99 = quantile_sorted(samples_us, 0.99);
  s.max = samples_us.back();
  return s;
}

}  // namespace bench
