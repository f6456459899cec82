#pragma once
// A Jepsen-style history of a lock workload, and the checker that judges it.
//
// Worker processes append events (attempts, acquisitions, releases, loss reports, writes to a
// fenced resource) to their own history file, one line per event, as they happen: a line is
// in the kernel as soon as append() returns, so a process that is paused or killed leaves a
// history that is complete up to that moment. The test driver adds the faults it injected.
// The merged history is then checked against the rules of issue #7 (see check()).
//
// Times are CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock), which every process on
// the machine shares, so events of different processes are comparable.
//
// Line format: space-separated key=value pairs, e.g.
//   t=123456 ev=acquire proc=w1 lock=m0 hold=w1.2.7 owner=ab..@h:1:2 token=42
// Values never contain spaces (lock names, owner tokens and errc names do not).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::test {

enum class EventKind {
  attempt_begin,  // a thread starts acquire(): lock, proc, attempt, wait_ms (the deadline)
  attempt_end,    // ...and gets its outcome: attempt, outcome ("acquired", "timeout", or an errc name)
  acquire,        // acquired: lock, proc, hold, owner, token, attempt (the attempt that got it)
  release,        // release() called (t is the call time): hold, outcome ("ok" or an errc name)
  loss,           // the holder was told the lock is lost: hold, outcome ("taken", "expired",
                  // or "release" when release() was the first to find it lost)
  write,          // a write to the fenced resource: lock, hold, token, seq (the resource's own
                  // order of writes), accepted
  fault,          // an injected fault from t to end: fault kind in `outcome`, target in proc
};

// The faults the suite injects. Two of them are documented to break mutual exclusion (see
// docs/RELIABILITY.md): a holder paused past its lease, and a restart that loses the keys.
namespace fault {
inline constexpr std::string_view proxy_delay = "proxy_delay";
inline constexpr std::string_view proxy_pause = "proxy_pause";
inline constexpr std::string_view proxy_drop = "proxy_drop";
inline constexpr std::string_view proxy_blackhole = "proxy_blackhole";
inline constexpr std::string_view server_restart_aof = "server_restart_aof";      // kill -9, AOF always
inline constexpr std::string_view server_restart_empty = "server_restart_empty";  // kill -9, no persistence
inline constexpr std::string_view server_pause = "server_pause";                  // SIGSTOP of redis
inline constexpr std::string_view client_pause = "client_pause";                  // SIGSTOP of a worker (proc)
inline constexpr std::string_view client_kill = "client_kill";                    // CLIENT KILL
inline constexpr std::string_view script_flush = "script_flush";                  // SCRIPT FLUSH
inline constexpr std::string_view oom = "oom";                                    // maxmemory, noeviction
}  // namespace fault

struct Event {
  EventKind kind = EventKind::fault;
  std::int64_t t = 0;    // ns, steady clock
  std::int64_t end = 0;  // ns; fault only
  std::string proc;      // worker process name, or the fault's target ("server", a worker)
  std::string lock;
  std::string hold;      // unique id of one acquisition
  std::string owner;     // owner token stored in Redis
  std::uint64_t token = 0;
  std::uint64_t seq = 0;      // write: position in the resource's order
  std::uint64_t attempt = 0;  // attempt_begin/end, acquire: id, unique per proc
  std::int64_t wait_ms = 0;   // attempt_begin: the waiter's deadline
  bool accepted = false;      // write
  std::string outcome;        // see EventKind
};

std::int64_t now_ns() noexcept;

std::string to_line(const Event& e);
// Throws std::invalid_argument on a malformed line.
Event parse_line(std::string_view line);

// Appends events to a file (O_APPEND, one write() per line), from any thread.
class HistoryWriter {
 public:
  explicit HistoryWriter(const std::string& path);  // throws std::runtime_error
  ~HistoryWriter();
  HistoryWriter(const HistoryWriter&) = delete;
  HistoryWriter& operator=(const HistoryWriter&) = delete;
  // One write() of the whole line: lines of concurrent threads never interleave. Write
  // errors are ignored (a test then fails on the missing events, not here).
  void append(const Event& e) noexcept;
 private:
  int fd_ = -1;
};

// Every event of every "*.history" file in `dir`, sorted by time. A torn last line (a process
// killed mid-write) is skipped.
std::vector<Event> read_histories(const std::string& dir);

// ------------------------------------------------------------------------------ the checker

struct CheckBounds {
  // The holders' watchdog renewal interval.
  std::chrono::milliseconds renew_interval{500};
  // Honesty: how long after its cause (the overlapping acquisition, or the end of the fault
  // that hid the loss) a holder may still believe it holds the lock: renew_interval plus this
  // (one round trip, with a reconnect when the fault broke the connection).
  std::chrono::milliseconds round_trip{1000};
  // Liveness: an attempt must end by its deadline plus this (one command timeout and the
  // scheduling noise of a loaded machine), plus the length of any pause of its own process.
  std::chrono::milliseconds wait_slack{3000};
  // Liveness: attempts that begin this long after the last fault ended must end in "acquired"
  // or "timeout", never an error.
  std::chrono::milliseconds settle{3000};
};

struct Violation {
  std::string rule;  // "mutual_exclusion", "fencing", "honesty", "liveness"
  std::string detail;
};

struct CheckReport {
  std::vector<Violation> violations;
  std::size_t holds = 0;
  std::size_t explained_overlaps = 0;  // overlaps caused by a documented fault
  std::size_t losses = 0;
  std::size_t writes_accepted = 0;
  std::size_t stale_writes_rejected = 0;
  std::size_t attempts = 0;
  std::size_t timeouts = 0;
  std::size_t errors = 0;  // attempts that ended in an error (allowed during faults)
  std::size_t faults = 0;

  bool ok() const noexcept { return violations.empty(); }
  std::string summary() const;  // counts, then every violation on its own line
};

// Checks the rules of issue #7 over a merged history:
//  mutual_exclusion  two holds of one lock (believed hold: from acquire until the release call
//                    or the loss report, whichever came first) overlap only when a documented
//                    fault explains it: a client_pause of the earlier holder's process that
//                    began during its hold and before the later acquisition, or a
//                    server_restart_empty whose kill came after the earlier holder's attempt
//                    began (the server may have granted the lock just before the kill and the
//                    reply been read just after it) and before the later acquisition, with
//                    the earlier acquisition seen before the restarted server was up.
//  fencing           in the resource's order, a write is accepted iff its token is >= the
//                    highest accepted before it (so no accepted write is lower than an earlier
//                    accepted one, and every stale write is rejected); and the tokens of
//                    successive non-overlapping holds of one lock strictly increase (a hold
//                    whose loss was written before its acquisition counts as granted at the loss).
//  honesty           the earlier holder of an explained overlap stops believing it holds the
//                    lock (it is told of the loss by on_lost or by release() returning
//                    lock_lost, or it releases with an unknown outcome such as a connection
//                    error) no later than max(later acquisition, end of the fault) +
//                    renew_interval + round_trip; and its release never reports success.
//  liveness          every attempt ends, by its deadline + wait_slack (+ own pauses); a
//                    "timeout" comes no earlier than the deadline (an early one is a lie); after
//                    the faults settle, attempts end in "acquired" or "timeout" only.
CheckReport check(const std::vector<Event>& history, const CheckBounds& bounds);

}  // namespace dlock::test
