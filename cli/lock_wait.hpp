// lock_wait.hpp — waiting for a lock of any kind (lock_target.hpp) the way the CLI does:
// interruptible by SIGINT, SIGTERM and SIGHUP (the wait is cancelled through a std::stop_token
// and no lock is left behind), with a status line on a terminal (or with -v) saying who holds
// the lock and for how long (read with dlock::inspect, so it works for every kind).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "context.hpp"
#include "dlock/lease.hpp"
#include "lock_target.hpp"
#include "signals.hpp"

namespace dlock::cli {

struct WaitOutcome {
  std::optional<dlock::Lease> lease;  // acquired
  dlock::Error error;                 // not acquired (busy, timeout, connection...)
  int signal = 0;                     // interrupted by this signal (see held_after_signal)
  // Interrupted: the server did not answer the settling round trips in time, so a try that was
  // still in flight may have taken the lock, and its release was not confirmed.
  bool unsettled = false;
  std::chrono::milliseconds waited{0};
};

// What an interrupted wait leaves: "nothing is held", or why that is not certain.
std::string held_after_signal(const WaitOutcome& w);

// Acquires `target`, waiting up to `wait` (nullopt: forever; zero: one attempt). `signals` must
// carry SIGINT, SIGTERM and SIGHUP; other signals read from it are ignored.
WaitOutcome wait_for_lock(Context& ctx, LockTarget& target, std::optional<std::chrono::milliseconds> wait,
                          SignalFd& signals);

// The options shared by run and acquire: --wait DUR / --no-wait ("--wait 0" == --no-wait).
// nullopt: wait forever.
std::optional<std::chrono::milliseconds> wait_option(const ParsedArgs& a);

}  // namespace dlock::cli
