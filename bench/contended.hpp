// bench/contended.hpp — scenario 3 (Mutex) and 5 (every other kind but the reader, kinds.hpp):
// W workers spread over P >= 2 OS processes contend for one lock, each holding it for `hold_us`
// and then asking again at once.
//
// Each process is forked first and only then creates its own dlock::Client (a Client's thread
// does not survive fork()). The workers share one block of memory (mmap MAP_SHARED, made before
// the fork) holding, for the lock, who released it last and when (CLOCK_MONOTONIC, written just
// before release() is issued), and per worker its counters and latency samples.
//
//   handoff latency  release issued by one worker -> acquire() returning in another worker
//                    (same-worker reacquisitions are not handoffs and are not sampled)
//   utilisation      sum over acquisitions of (release issued - acquire returned) / window:
//                    the time the application held the lock, as its threads saw it
//   fairness         min / max acquisitions per worker
//   commands/acq     client-issued commands in the window (INFO commandstats deltas, see
//                    commandstats.hpp) / acquisitions in the window
#pragma once

#include <string>
#include <vector>

#include "commandstats.hpp"
#include "kinds.hpp"

namespace bench {

struct ContendedConfig {
  std::string url;
  int workers = 8;
  int processes = 2;
  int hold_us = 1000;
  double warmup = 0.5;
  double duration = 5;
  LockKind kind = LockKind::mutex;
  std::string redlock_urls;  // LockKind::redlock only
};

struct ContendedResult {
  double acquisitions_per_second = 0;
  double utilisation = 0;       // 0..1
  double handoff_p50_us = 0;
  double handoff_p99_us = 0;
  double handoff_max_us = 0;
  double cross_process_p50_us = 0;  // handoffs between workers of different processes only
  double release_p50_us = 0;        // how long release() blocks the releasing worker
  double fairness = 0;          // min/max acquisitions per worker
  double commands_per_acquisition = 0;
  unsigned long long acquisitions = 0;
  unsigned long long errors = 0;
  CommandCounts commands;
  std::vector<double> per_worker;  // acquisitions of each worker (workers 0, P, 2P... share process 0)
  std::vector<double> handoff_us;  // every sample of the window
};

// Throws std::runtime_error when a worker process cannot start or fails.
ContendedResult contended_run(const ContendedConfig& cfg);

}  // namespace bench
