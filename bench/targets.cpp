#include "targets.hpp"

namespace bench {

using K = Target::Kind;

void add_floor_rows(Report& r, int multi) {
  r.add(Row{floor_rtt_id, "1 floor: single-command round trip (PING), p50", "hiredis", "us", 1, {}, {}, {}, 0, {}, {}});
  r.add(Row{floor_handover_id, "1 floor: pipe round trip between two processes (no Redis), p50", "kernel pipes", "us", 1,
            {}, {}, {}, 0, {}, {}});
  r.add(Row{floor_pairs_id(1), "1 floor: SET NX PX + EVALSHA del, 1 connection", "hiredis", "pairs/s", 0, {}, {}, {}, 0, {}, {}});
  r.add(Row{floor_pairs_id(multi), "1 floor: SET NX PX + EVALSHA del, " + std::to_string(multi) + " connections/threads",
            "hiredis", "pairs/s", 0, {}, {}, {}, 0, {}, {}});
  // Its ratio to the blocking floor is what waking up costs the blocking client per pair.
  r.add(Row{floor_spin_id, "1 floor: SET NX PX + EVALSHA del, 1 connection, busy-polling client (spinning floor)",
            "hiredis, non-blocking fd", "pairs/s", 0, {},
            Target{K::ratio_info, 0, floor_pairs_id(1), "(info, vs blocking floor)", 0}, {}, 0, {}, {}});
}

void add_uncontended_vs_spin_row(Report& r) {
  r.add(Row{uncontended_vs_spin_id, "2 uncontended: acquire+release, 1 thread, vs the spinning floor", "dlock Mutex",
            "pairs/s", 0, {}, Target{K::ratio_info, 0, floor_spin_id, "(info, vs spinning floor)", 0}, {}, 0, {}, {}});
}

std::string uncontended_id(const std::string& prefix, int callers) {
  return prefix + "uncontended.t" + std::to_string(callers);
}

void add_uncontended_row(Report& r, const std::string& prefix, const std::string& library, int callers,
                         const std::string& word, int multi) {
  Row row;
  row.id = uncontended_id(prefix, callers);
  row.scenario = "2 uncontended: acquire+release, " + std::to_string(callers) + " " + word + (callers == 1 ? "" : "s");
  row.library = library;
  row.unit = "pairs/s";
  const std::string m = std::to_string(multi);
  if (callers == 1) {
    row.target = Target{K::ratio_at_least, 0.95, floor_pairs_id(1), "≥ 0.95× floor (1 conn)", 0};
  } else if (callers == multi) {
    row.target = Target{K::ratio_at_least, 1.0, floor_pairs_id(multi), "≥ 1.0× floor (" + m + " conns)", 0};
  } else if (callers > multi) {
    row.target = Target{K::ratio_at_least, 1.0, floor_pairs_id(multi), "≥ 1.0× floor (" + m + " conns), aim 1.5×", 1.5};
  } else {
    row.target = Target{K::ratio_info, 0, floor_pairs_id(1), "(vs floor, 1 conn)", 0};
  }
  r.add(std::move(row));
}

std::string contended_id(const std::string& prefix, int processes, const std::string& metric) {
  return prefix + "contended.p" + std::to_string(processes) + "." + metric;
}

void add_contended_rows(Report& r, const std::string& prefix, const std::string& library, int workers, int processes,
                        bool with_internals, bool fair_fairness) {
  const std::string what = "3 contended (" + std::to_string(workers) + " workers / " + std::to_string(processes) +
                           " processes): ";
  auto id = [&](const std::string& m) { return contended_id(prefix, processes, m); };
  r.add(Row{id("rate"), what + "acquisitions", library, "acq/s", 0, {}, {}, {}, 0, {}, {}});
  r.add(Row{id("util"), what + "utilisation", library, "%", 1, {}, Target{K::at_least, 90, "", "≥ 90%", 0}, {}, 0, {}, {}});
  r.add(Row{id("p50"), what + "handoff p50", library, "us", 0, {},
            Target{K::ratio_at_most, 3, floor_rtt_id, "≤ 3× round trip", 0}, {}, 0, {}, {}});
  r.add(Row{id("p99"), what + "handoff p99", library, "us", 0, {}, Target{K::at_most, 1000, "", "≤ 1000 us", 0}, {}, 0,
            {}, {}});
  r.add(Row{id("max"), what + "handoff max", library, "us", 0, {}, {}, {}, 0, {}, {}});
  const Target fairness = fair_fairness ? Target{K::at_least, 0.9, "", "≥ 0.9 (FairLock)", 0}
                                        : Target{K::at_least, 0.5, "", "≥ 0.5 (Mutex)", 0};
  r.add(Row{id("fair"), what + "fairness min/max", library, "ratio", 2, {}, fairness, {}, 0, {}, {}});
  r.add(Row{id("cmds"), what + "client commands per acquisition", library, "cmds", 2, {},
            Target{K::at_most, 4, "", "≤ 4", 0}, {}, 0, {}, {}});
  if (with_internals) {
    r.add(Row{id("xp50"), what + "handoff p50, across processes only", library, "us", 0, {},
              Target{K::ratio_info, 0, floor_rtt_id, "(vs round trip)", 0}, {}, 0, {}, {}});
    r.add(Row{id("rel50"), what + "release() call p50", library, "us", 0, {},
              Target{K::ratio_info, 0, floor_rtt_id, "(vs round trip)", 0}, {}, 0, {}, {}});
  }
}

std::string kind_prefix(const std::string& slug) { return "kind." + slug + "."; }

void add_watchdog_rows(Report& r, int locks) {
  const std::string what = "4 watchdog (" + std::to_string(locks) + " locks held): ";
  r.add(Row{"watchdog.renewals", what + "renewals", "dlock", "renew/s", 0, {}, {}, {}, 0, {}, {}});
  r.add(Row{"watchdog.cpu", what + "client CPU", "dlock", "% core", 2, {}, Target{K::at_most, 2, "", "≤ 2% of a core", 0},
            {}, 0, {}, {}});
  r.add(Row{"watchdog.mem", what + "client memory per lock", "dlock", "B/lock", 0, {},
            Target{K::at_most, 1024, "", "≤ 1 KiB", 0}, {}, 0, {}, {}});
  r.add(Row{"watchdog.mem_mutex", what + "of which the Mutex objects", "dlock", "B/lock", 0, {}, {}, {}, 0, {}, {}});
  r.add(Row{"watchdog.acquire", what + "time to take them all", "dlock", "s", 2, {}, {}, {}, 0, {}, {}});
}

}  // namespace bench
