// bench/options.hpp — dlock-bench's command line.
#pragma once

#include <dlock/options.hpp>

#include <optional>
#include <string>
#include <vector>

namespace bench {

struct Options {
  std::string redis_url;              // --redis URL (required)
  bool quick = false;                 // --quick: short durations, for a smoke run
  std::vector<std::string> scenarios; // --scenario NAME (repeatable); empty: all
  bool json = false;                  // --json: JSON on stdout instead of the table
  std::string json_out;               // --json-out FILE: JSON to FILE as well as the table
  std::vector<std::string> peer_results;  // --peer-results FILE (repeatable): peer driver output
  std::string samples_dir;            // --samples-dir DIR: raw handoff samples for the chart
  int repeats = 3;                    // --repeats N (>= 3)
  // --fast-floor-us US: a round whose PING p50 is below this ran on the fast floor. Measured on
  // this VM: fast mode 14-15 us, slow mode 39-62 us; 30 us sits in the gap between them.
  double fast_floor_us = 30;

  // Durations, seconds. Defaults depend on --quick (see parse_options).
  double warmup = 0;                  // --warmup S: before each timed window
  double duration = 0;                // --duration S: floor and uncontended windows
  double contended_duration = 0;      // --contended-seconds S
  double watchdog_seconds = 0;        // --watchdog-seconds S: how long the 10,000 locks are held

  // Scenario shapes.
  std::vector<int> uncontended_threads{1, 8, 64};   // --threads LIST
  int floor_connections = 8;                        // the multi-connection floor
  int contended_workers = 8;                        // --contended-workers N
  std::vector<int> contended_processes{2, 8};       // --contended-processes LIST (each >= 2)
  int hold_us = 1000;                               // --hold-us N: time each holder keeps the lock
  int watchdog_locks = 10000;                       // --watchdog-locks N

  // The dlock Clients' options (every scenario): defaults unless these switches say otherwise,
  // for A/B runs of the library's own knobs in the same footing as the table.
  std::optional<long> busy_poll_us;                 // --busy-poll-us N: ClientOptions::busy_poll
  std::optional<bool> callers_run_loop;             // --callers-run-loop on|off

  // Scenario 5 (kinds).
  std::string redlock_urls;                         // --redlock URL,URL,URL: Redlock's nodes
  std::vector<std::string> kinds;                   // --kinds LIST (slugs); empty: all
  std::vector<int> kind_threads{1, 8};              // uncontended callers per kind
  int kind_processes = 2;                           // the contended layout per kind (the target's)
};

// Parses argv; on --help prints usage and exits 0, on a bad argument prints why and exits 64.
// Also sets client_options() from the switches above.
Options parse_options(int argc, char** argv);

// The ClientOptions every dlock Client of this run is made with (set by parse_options, before
// any scenario runs or forks).
const dlock::ClientOptions& client_options();

// The scenario names, in the order they run.
const std::vector<std::string>& scenario_names();

bool wants(const Options& o, const std::string& scenario);
// Scenario 5 runs this kind (by its slug, kinds.hpp).
bool wants_kind(const Options& o, const std::string& slug);

}  // namespace bench
