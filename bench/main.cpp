// dlock-bench — dlock against the Redis floor and against peer libraries, in one run, with the
// targets of issue 6. See --help, scripts/bench (starts a throwaway server) and
// docs/BENCHMARKS.md (method and latest results).
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <exception>
#include <fstream>
#include <map>

#include "contended.hpp"
#include "floor.hpp"
#include "kinds.hpp"
#include "json.hpp"
#include "kinds_run.hpp"
#include "options.hpp"
#include "peers.hpp"
#include "raw_redis.hpp"
#include "report.hpp"
#include "targets.hpp"
#include "uncontended.hpp"
#include "watchdog.hpp"

namespace bench {
namespace {

void progress(const char* fmt, auto... args) {
  std::fprintf(stderr, fmt, args...);
  std::fflush(stderr);
}

std::string redis_version(RawRedis& admin) {
  const std::string info = admin.info("server");
  const std::string key = "redis_version:";
  const auto at = info.find(key);
  if (at == std::string::npos) return "unknown";
  const auto end = info.find_first_of("\r\n", at);
  return info.substr(at + key.size(), end - at - key.size());
}

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_samples(const std::string& path, const std::vector<double>& us) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  char buf[32];
  for (double v : us) {
    std::snprintf(buf, sizeof buf, "%.1f\n", v);
    out << buf;
  }
}

int run(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  const int multi = o.floor_connections;
  const bool floor = wants(o, "floor");
  const bool unc = wants(o, "uncontended");
  const bool con = wants(o, "contended");
  const bool wd = wants(o, "watchdog");
  const bool kinds = wants(o, "kinds") && !kinds_to_run(o).empty();
  // A scenario's targets compare it with the floor: measure what it needs. The round trip is
  // measured whenever any floor is, as it tells each round's floor mode (fast or slow).
  const bool need_pairs = floor || unc || kinds;
  const bool need_rtt = floor || con || kinds || need_pairs;

  RawRedis admin(o.redis_url);
  const std::string version = redis_version(admin);
  admin.delete_matching("bench:*");
  admin.delete_matching("dlock:{bench:*");
  progress("dlock-bench: redis %s at %s, %d repeats%s\n", version.c_str(), o.redis_url.c_str(), o.repeats,
           o.quick ? " (--quick)" : "");

  Report report;
  if (need_rtt || need_pairs) add_floor_rows(report, multi);
  report.set_floor_modes(floor_rtt_id, o.fast_floor_us);
  const std::vector<int> try_threads{1, 64};
  const std::vector<int> async_loops{8, 64};
  if (unc) {
    for (int t : o.uncontended_threads) add_uncontended_row(report, "", "dlock Mutex", t, "thread", multi);
    const bool one_thread = std::find(o.uncontended_threads.begin(), o.uncontended_threads.end(), 1) !=
                            o.uncontended_threads.end();
    if (one_thread) add_uncontended_vs_spin_row(report);
    report.add(Row{"uncontended.t1.cmds", "2 uncontended: client commands per pair, 1 thread", "dlock Mutex", "cmds", 2, {},
                   {}, {}, 0, {}, {}});
    for (int t : try_threads) {
      report.add(Row{"uncontended.try.t" + std::to_string(t),
                     "2 uncontended, one-try acquire (timeout 0), " + std::to_string(t) + " thread" + (t == 1 ? "" : "s"),
                     "dlock Mutex", "pairs/s", 0, {},
                     Target{Target::Kind::ratio_info, 0, floor_pairs_id(t == 1 ? 1 : multi), "(info)", 0}, {}, 0, {}, {}});
    }
    for (int n : async_loops) {
      report.add(Row{"uncontended.async.l" + std::to_string(n),
                     "2 uncontended, " + std::to_string(n) + " async loops on the Client's event loop",
                     "dlock Mutex", "pairs/s", 0, {},
                     Target{Target::Kind::ratio_info, 0, floor_pairs_id(multi), "(info)", 0}, {}, 0, {}, {}});
    }
  }
  if (con) {
    for (int p : o.contended_processes) add_contended_rows(report, "", "dlock Mutex", o.contended_workers, p, true);
  }
  if (kinds) add_kind_rows(report, o);
  if (wd) add_watchdog_rows(report, o.watchdog_locks);

  Json details = Json::object();
  std::map<int, std::vector<double>> handoff_samples;  // processes -> pooled samples (Mutex)
  std::map<std::string, std::vector<double>> kind_samples;  // "<kind>-p<P>" -> pooled samples
  unsigned long long errors = 0;

  // Rounds: every measurement once per round, so slow drift of the shared machine spreads over
  // all of them alike instead of biasing one against its baseline.
  for (int round = 1; round <= o.repeats; ++round) {
    progress("round %d/%d\n", round, o.repeats);
    if (need_rtt) {
      auto rt = floor_round_trip(o.redis_url, o.warmup, o.duration);
      report.record(floor_rtt_id, rt.p50_us);
      progress("  floor round trip        p50 %.1f us (%.0f/s): %s mode\n", rt.p50_us, rt.per_second,
               rt.p50_us < o.fast_floor_us ? "fast" : "slow");
      // A second at most: 10,000+ round trips, enough for a median.
      auto ho = handover_round_trip(std::min(o.warmup, 0.2), std::min(o.duration, 1.0));
      report.record(floor_handover_id, ho.p50_us);
      progress("  pipe round trip         p50 %.1f us (two processes, no Redis)\n", ho.p50_us);
    }
    if (need_pairs) {
      for (int c : {1, multi}) {
        auto fp = floor_pairs(o.redis_url, c, o.warmup, o.duration);
        report.record(floor_pairs_id(c), fp.pairs_per_second);
        errors += fp.errors;
        progress("  floor %d connection%s    %.0f pairs/s\n", c, c == 1 ? " " : "s", fp.pairs_per_second);
        if (c == 1 && fp.pairs_per_second > 0) {
          // The round's mode comes from PING alone; this is the same question asked of the
          // pair loop (two commands per pair), so that a round where the two disagree (the
          // machine disturbed one of them, not a mode) can be spotted in the details.
          Json f = Json::object();
          f.set("pair_round_trip_us", 1e6 / (2 * fp.pairs_per_second));
          details.set("floor.c1.r" + std::to_string(round), f);
          progress("                          (%.1f us per command)\n", 1e6 / (2 * fp.pairs_per_second));
        }
      }
      auto sp = spinning_floor_pairs(o.redis_url, o.warmup, o.duration);
      report.record(floor_spin_id, sp.pairs_per_second);
      errors += sp.errors;
      progress("  floor 1 conn, spinning  %.0f pairs/s\n", sp.pairs_per_second);
    }
    if (unc) {
      for (int t : o.uncontended_threads) {
        auto u = uncontended_pairs(o.redis_url, t, AcquireStyle::waiting, o.warmup, o.duration);
        report.record(uncontended_id("", t), u.pairs_per_second);
        errors += u.errors;
        if (t == 1) {
          report.record("uncontended.t1.cmds", u.commands_per_pair);
          report.record(uncontended_vs_spin_id, u.pairs_per_second);
        }
        details.set("uncontended.t" + std::to_string(t) + ".r" + std::to_string(round), counts_json(u.commands));
        progress("  dlock %2d thread%s        %.0f pairs/s, %.2f commands/pair\n", t, t == 1 ? " " : "s",
                 u.pairs_per_second, u.commands_per_pair);
      }
      for (int t : try_threads) {
        auto u = uncontended_pairs(o.redis_url, t, AcquireStyle::try_once, o.warmup, o.duration);
        report.record("uncontended.try.t" + std::to_string(t), u.pairs_per_second);
        errors += u.errors;
        progress("  dlock %2d thread%s, try   %.0f pairs/s, %.2f commands/pair\n", t, t == 1 ? " " : "s",
                 u.pairs_per_second, u.commands_per_pair);
      }
      for (int n : async_loops) {
        auto u = uncontended_async_pairs(o.redis_url, n, o.warmup, o.duration);
        report.record("uncontended.async.l" + std::to_string(n), u.pairs_per_second);
        errors += u.errors;
        progress("  dlock %2d async loops     %.0f pairs/s, %.2f commands/pair\n", n, u.pairs_per_second,
                 u.commands_per_pair);
      }
    }
    if (con) {
      for (int p : o.contended_processes) {
        ContendedConfig cfg{o.redis_url, o.contended_workers, p, o.hold_us, o.warmup, o.contended_duration,
                            LockKind::mutex, ""};
        auto c = contended_run(cfg);
        auto id = [&](const char* m) { return contended_id("", p, m); };
        report.record(id("rate"), c.acquisitions_per_second);
        report.record(id("util"), 100 * c.utilisation);
        report.record(id("p50"), c.handoff_p50_us);
        report.record(id("p99"), c.handoff_p99_us);
        report.record(id("max"), c.handoff_max_us);
        report.record(id("fair"), c.fairness);
        report.record(id("cmds"), c.commands_per_acquisition);
        report.record(id("xp50"), c.cross_process_p50_us);
        report.record(id("rel50"), c.release_p50_us);
        errors += c.errors;
        Json d = Json::object();
        d.set("acquisitions", c.acquisitions);
        d.set("handoffs", c.handoff_us.size());
        d.set("commands", counts_json(c.commands));
        d.set("per_worker", Json::array_of(c.per_worker));
        details.set("contended.p" + std::to_string(p) + ".r" + std::to_string(round), d);
        auto& pool = handoff_samples[p];
        pool.insert(pool.end(), c.handoff_us.begin(), c.handoff_us.end());
        progress("  contended %d processes   %.0f acq/s, util %.1f%%, handoff p50 %.0f p99 %.0f max %.0f us, "
                 "fairness %.2f, %.2f cmds/acq\n",
                 p, c.acquisitions_per_second, 100 * c.utilisation, c.handoff_p50_us, c.handoff_p99_us,
                 c.handoff_max_us, c.fairness, c.commands_per_acquisition);
      }
    }
    if (kinds) kinds_round(o, round, report, KindsRoundOutput{details, kind_samples, errors});
    if (wd) {
      auto w = watchdog_run(WatchdogConfig{o.redis_url, o.watchdog_locks, o.watchdog_seconds});
      report.record("watchdog.renewals", w.renewals_per_second);
      report.record("watchdog.cpu", w.cpu_percent_of_core);
      report.record("watchdog.mem", w.bytes_per_lock);
      report.record("watchdog.mem_mutex", w.mutex_bytes_per_lock);
      report.record("watchdog.acquire", w.acquire_seconds);
      errors += w.lost;
      progress("  watchdog %d locks        %.0f renewals/s (%.2f per lock in %.1f s), CPU %.2f%% of a core, "
               "%.0f B/lock, %llu lost\n",
               o.watchdog_locks, w.renewals_per_second, w.renewals_per_lock, w.window_seconds, w.cpu_percent_of_core,
               w.bytes_per_lock, w.lost);
    }
  }

  Json peers = Json::array();
  for (const auto& path : o.peer_results) {
    try {
      Json doc = merge_peer_results(report, path, multi);
      if (doc.has("skipped")) {
        progress("peer %s skipped: %s\n", doc.string_or("library", path).c_str(), doc.string_or("skipped", "").c_str());
      }
      peers.push(std::move(doc));
    } catch (const std::exception& e) {
      progress("dlock-bench: peer results %s not merged: %s\n", path.c_str(), e.what());
    }
  }
  report.evaluate();

  if (!o.samples_dir.empty()) {
    for (const auto& [p, us] : handoff_samples) {
      write_samples(o.samples_dir + "/handoff-dlock-p" + std::to_string(p) + ".txt", us);
    }
    for (const auto& [kp, us] : kind_samples) write_samples(o.samples_dir + "/handoff-dlock-" + kp + ".txt", us);
  }

  Json doc = Json::object();
  Json meta = Json::object();
  meta.set("program", "dlock-bench");
  meta.set("date", utc_now());
  meta.set("redis_version", version);
  meta.set("cores", static_cast<long>(::sysconf(_SC_NPROCESSORS_ONLN)));
  utsname u{};
  if (::uname(&u) == 0) meta.set("kernel", std::string(u.release));
  meta.set("quick", o.quick);
  meta.set("repeats", o.repeats);
  meta.set("warmup_s", o.warmup);
  meta.set("duration_s", o.duration);
  meta.set("contended_s", o.contended_duration);
  meta.set("watchdog_s", o.watchdog_seconds);
  meta.set("hold_us", o.hold_us);
  meta.set("redlock_nodes", split_urls(o.redlock_urls).size());
  meta.set("errors", errors);
  doc.set("meta", meta);
  doc.set("floor_modes", report.floor_modes_json());
  doc.set("rows", report.rows_json());
  doc.set("peers", peers);
  doc.set("details", details);
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out);
    out << doc.dump() << "\n";
    if (!out) throw std::runtime_error("cannot write " + o.json_out);
  }
  if (o.json) {
    std::printf("%s\n", doc.dump().c_str());
  } else {
    std::printf("\n");
    report.print_table(stdout);
    std::printf("\n%d of %d targets met%s; medians of %d repeats (min–max); ratios are medians of per-round "
                "ratios against the same round's floor; floor-relative verdicts: %s.\n",
                report.judged() - report.failed(), report.judged(), report.failed() == 0 ? "" : " (see FAIL rows)",
                o.repeats, report.floor_modes().judged_text().c_str());
    if (errors != 0) std::printf("%llu operations failed or leases were lost during the run (see stderr).\n", errors);
  }
  admin.delete_matching("bench:*");
  admin.delete_matching("dlock:{bench:*");
  // Exit status: 0 when the run completed; a missed target is a finding, not a crash.
  return errors == 0 ? 0 : 2;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  try {
    return bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock-bench: %s\n", e.what());
    return 1;
  }
}
