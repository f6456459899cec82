#include "options.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace bench {

namespace {

const char* const usage_text = R"(usage: dlock-bench --redis URL [options]

Runs dlock's benchmark scenarios against the Redis server at URL (use a throwaway server:
scripts/bench starts one) and prints each measurement as median (min-max) over the repeats,
with the issue's target ratio and PASS/FAIL, all computed in this one run.

Scenarios (--scenario NAME, repeatable; default: all):
  floor        plain hiredis: SET NX PX + EVALSHA compare-and-delete on 1 blocking connection
               and on 8 connections from 8 threads; single-command round trip (PING); and, for
               information, a pipe round trip between two processes (no Redis: the cost of
               the hand-overs alone) and the 1-connection loop busy-polling a non-blocking socket
  uncontended  dlock acquire+release pairs/s, 1/8/64 threads sharing one Client, distinct keys;
               (info) 8 and 64 async loops (async_acquire/async_release) on its event loop
  contended    8 workers in >= 2 processes on one key, each holding 1 ms: acquisitions/s,
               utilisation, handoff latency p50/p99/max, fairness, commands per acquisition
  watchdog     10,000 locks held by one Client: renewals/s, client CPU, memory per lock
  kinds        scenario 5, every other lock kind on Mutex's footing: uncontended pairs/s (1 and
               8 threads) and the contended run (8 workers / 2 processes) for ReentrantMutex,
               FairLock, SharedMutex writer and reader (uncontended only), Semaphore (1 permit),
               MultiLock (3 names) and Redlock (3 nodes, --redlock; skipped without it)
A scenario's targets need the floor: running one scenario also measures what it compares to.

Ratios to the floor are taken round by round (each round's floor is measured back to back with
what is divided by it) and the median of the per-round ratios is judged. Each round's floor is
classified by its PING p50: fast below --fast-floor-us, slow otherwise; the floor-relative
targets are judged over the fast rounds when there are any, else over the slow ones (and the
table says "judged against slow-mode floor only").

Options:
  --redis URL               the server (redis://[user:pass@]host:port[/db] or unix://path)
  --quick                   short durations: a smoke run (the targets still apply, noisier)
  --scenario NAME           run only this scenario (repeatable)
  --repeats N               repeats of every measurement (default 3, at least 3)
  --json                    print JSON on stdout instead of the table
  --json-out FILE           also write the JSON to FILE
  --peer-results FILE       merge a peer driver's JSON (bench/peers/*) into the table (repeatable)
  --samples-dir DIR         write raw handoff latencies (us, one per line) for the chart
  --warmup S                seconds of warm-up before each timed window
  --duration S              seconds per floor/uncontended window (default 3, quick 1)
  --contended-seconds S     seconds per contended window (default 5, quick 2)
  --contended-processes L   comma list of process counts for the 8 workers (default 2,8)
  --contended-workers N     workers in the contended scenario (default 8)
  --hold-us N               how long each holder keeps the lock (default 1000)
  --threads L               caller threads of the uncontended scenario (default 1,8,64)
  --watchdog-seconds S      how long the locks are held (default 60, quick 10)
  --watchdog-locks N        locks held in the watchdog scenario (default 10000)
  --redlock URLS            comma list of 3 throwaway servers for Redlock (scripts/bench starts them)
  --fast-floor-us US        PING p50 below which a round's floor counts as fast (default 30)
  --kinds L                 comma list of scenario-5 kinds (reentrant, fair, shared-writer,
                            shared-reader, semaphore, multi3, redlock; default all)
  --busy-poll-us N          dlock ClientOptions::busy_poll for every Client (default 100)
  --callers-run-loop on|off dlock ClientOptions::callers_run_loop for every Client (default on)
)";

dlock::ClientOptions g_client_options;

[[noreturn]] void bad(const std::string& why) {
  std::fprintf(stderr, "dlock-bench: %s\n(see dlock-bench --help)\n", why.c_str());
  std::exit(64);
}

double to_seconds(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(d > 0)) bad(flag + " needs a positive number of seconds, not '" + v + "'");
  return d;
}

int to_int(const std::string& flag, const std::string& v, int min) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n < min || n > 1'000'000) {
    bad(flag + " needs an integer >= " + std::to_string(min) + ", not '" + v + "'");
  }
  return static_cast<int>(n);
}

std::vector<int> to_list(const std::string& flag, const std::string& v, int min) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(to_int(flag, item, min));
  if (out.empty()) bad(flag + " needs a comma-separated list");
  return out;
}

}  // namespace

const dlock::ClientOptions& client_options() { return g_client_options; }

const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> names{"floor", "uncontended", "contended", "watchdog", "kinds"};
  return names;
}

bool wants(const Options& o, const std::string& scenario) {
  return o.scenarios.empty() || std::find(o.scenarios.begin(), o.scenarios.end(), scenario) != o.scenarios.end();
}

bool wants_kind(const Options& o, const std::string& slug) {
  return o.kinds.empty() || std::find(o.kinds.begin(), o.kinds.end(), slug) != o.kinds.end();
}

Options parse_options(int argc, char** argv) {
  g_client_options = dlock::ClientOptions{};  // only what this command line says differs
  Options o;
  std::optional<double> warmup, duration, contended, watchdog;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) bad(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(usage_text, stdout);
      std::exit(0);
    } else if (a == "--redis") {
      o.redis_url = value();
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--scenario") {
      const std::string s = value();
      const auto& names = scenario_names();
      if (std::find(names.begin(), names.end(), s) == names.end()) {
        bad("unknown scenario '" + s + "' (floor, uncontended, contended, watchdog, kinds)");
      }
      o.scenarios.push_back(s);
    } else if (a == "--repeats") {
      o.repeats = to_int(a, value(), 3);
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--json-out") {
      o.json_out = value();
    } else if (a == "--peer-results") {
      o.peer_results.push_back(value());
    } else if (a == "--samples-dir") {
      o.samples_dir = value();
    } else if (a == "--warmup") {
      warmup = to_seconds(a, value());
    } else if (a == "--duration") {
      duration = to_seconds(a, value());
    } else if (a == "--contended-seconds") {
      contended = to_seconds(a, value());
    } else if (a == "--watchdog-seconds") {
      watchdog = to_seconds(a, value());
    } else if (a == "--contended-processes") {
      o.contended_processes = to_list(a, value(), 2);
    } else if (a == "--contended-workers") {
      o.contended_workers = to_int(a, value(), 2);
    } else if (a == "--hold-us") {
      o.hold_us = to_int(a, value(), 0);
    } else if (a == "--threads") {
      o.uncontended_threads = to_list(a, value(), 1);
    } else if (a == "--redlock") {
      o.redlock_urls = value();
    } else if (a == "--kinds") {
      std::stringstream ss(value());
      std::string k;
      while (std::getline(ss, k, ',')) o.kinds.push_back(k);
    } else if (a == "--fast-floor-us") {
      const std::string v = value();
      char* end = nullptr;
      o.fast_floor_us = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(o.fast_floor_us > 0)) bad(a + " needs a positive number of us, not '" + v + "'");
    } else if (a == "--watchdog-locks") {
      o.watchdog_locks = to_int(a, value(), 1);
    } else if (a == "--busy-poll-us") {
      o.busy_poll_us = to_int(a, value(), 0);
      if (*o.busy_poll_us > 10000) bad(a + " must be at most 10000 (ClientOptions::busy_poll is at most 10 ms)");
    } else if (a == "--callers-run-loop") {
      const std::string v = value();
      if (v != "on" && v != "off") bad(a + " needs on or off, not '" + v + "'");
      o.callers_run_loop = v == "on";
    } else {
      bad("unknown argument '" + a + "'");
    }
  }
  if (o.redis_url.empty()) bad("--redis URL is required");
  if (o.busy_poll_us) g_client_options.busy_poll = std::chrono::microseconds(*o.busy_poll_us);
  if (o.callers_run_loop) g_client_options.callers_run_loop = *o.callers_run_loop;
  for (int p : o.contended_processes) {
    if (p > o.contended_workers) bad("--contended-processes: more processes than workers");
  }
  o.warmup = warmup.value_or(o.quick ? 0.2 : 0.5);
  o.duration = duration.value_or(o.quick ? 1.0 : 3.0);
  o.contended_duration = contended.value_or(o.quick ? 2.0 : 5.0);
  o.watchdog_seconds = watchdog.value_or(o.quick ? 10.0 : 60.0);
  return o;
}

}  // namespace bench
