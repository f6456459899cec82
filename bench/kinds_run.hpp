// bench/kinds_run.hpp — scenario 5: the rows and one round of measurements for every lock kind
// other than Mutex (kinds.hpp), with exactly the code, windows and targets of scenarios 2 and 3.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "json.hpp"
#include "options.hpp"
#include "report.hpp"

namespace bench {

// The kinds this run measures: --kinds, minus Redlock when no --redlock nodes were given.
std::vector<std::string> kinds_to_run(const Options& o);

void add_kind_rows(Report& r, const Options& o);

struct KindsRoundOutput {
  Json& details;                                        // per-repeat command counts, per-worker counts
  std::map<std::string, std::vector<double>>& samples;  // "<slug>-p<P>" -> handoff samples (us)
  unsigned long long& errors;
};

void kinds_round(const Options& o, int round, Report& r, KindsRoundOutput out);

}  // namespace bench
