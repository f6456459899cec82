// bench/targets.hpp — the table's rows for each scenario, with the targets of issue 6
// ("Targets (medians, same run, this machine)"). One place, so dlock and the peers are held to
// exactly the same definitions.
#pragma once

#include <string>

#include "report.hpp"

namespace bench {

// Row ids of the baselines.
inline const std::string floor_rtt_id = "floor.rtt";
// Two processes passing a byte over pipes (no Redis): informational, tells a round's mode.
inline const std::string floor_handover_id = "floor.handover";
inline const std::string floor_pairs_id(int connections) { return "floor.pairs.c" + std::to_string(connections); }
// The spinning floor (1 connection, busy-polled socket): informational, no target uses it.
inline const std::string floor_spin_id = "floor.spin.c1";

// The floor rows, the spinning floor's among them. The targets stay on the blocking
// floor; the spinning one is there for the comparison a busy-polling client deserves.
void add_floor_rows(Report& r, int multi_connections);
// dlock Mutex, 1 thread, divided by the spinning floor (same values as uncontended_id("", 1)).
inline const std::string uncontended_vs_spin_id = "uncontended.t1.vs_spin";
void add_uncontended_vs_spin_row(Report& r);

// `prefix` is "" for dlock and "peer.<slug>." for a peer; `callers` names what runs in
// parallel ("thread" for dlock and redis-py, "concurrent caller" for Node).
std::string uncontended_id(const std::string& prefix, int callers);
void add_uncontended_row(Report& r, const std::string& prefix, const std::string& library, int callers,
                         const std::string& callers_word, int multi_connections);

std::string contended_id(const std::string& prefix, int processes, const std::string& metric);
// `fair_fairness`: hold fairness to FairLock's target (>= 0.9) instead of Mutex's (>= 0.5).
void add_contended_rows(Report& r, const std::string& prefix, const std::string& library, int workers, int processes,
                        bool with_internals, bool fair_fairness = false);

// Scenario 5: a kind's rows carry Mutex's ids behind the prefix "kind.<slug>." (so the table
// shows them next to Mutex's, under Mutex's targets) and its label as the library.
std::string kind_prefix(const std::string& slug);

void add_watchdog_rows(Report& r, int locks);

}  // namespace bench
