// One fault scenario: a real redis-server (optionally behind a FaultProxy), several worker
// processes (fault_worker.cpp) contending on a few locks and writing their histories, a fault
// schedule run by the test's thread, and the history checker over the merged result.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/fault_proxy.hpp"
#include "support/history.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/wait.hpp"

namespace dlock::test {

// DLOCK_TEST_TIME_SCALE (default 1; scripts/sanitize sets 2-3): upper bounds on waits and on
// the checker's honesty/liveness deadlines are multiplied by it, never lower bounds.

struct ScenarioOptions {
  std::string kind = "mutex";  // mutex | fair | rw | sem (see fault_worker.cpp)
  // Mixed workload: worker i uses kinds[i % size] (overrides `kind`) on locks named
  // "<kind>-<lock>", since one name cannot be two kinds at once.
  std::vector<std::string> kinds;
  int processes = 3;
  int threads = 2;
  std::vector<std::string> locks{"m0", "m1"};
  std::chrono::seconds duration{12};
  std::chrono::milliseconds ttl{1500};
  std::chrono::milliseconds hold{60};
  std::chrono::milliseconds wait{2000};
  std::chrono::milliseconds command_timeout{1000};
  bool through_proxy = false;  // workers connect through proxy() instead of directly
  RedisServerOptions server;
};

class Scenario {
 public:
  explicit Scenario(ScenarioOptions opts);
  ~Scenario();  // kills leftover workers, stops proxy and server, removes the temp dir

  RedisServer& server() { return *server_; }
  FaultProxy& proxy() { return *proxy_; }  // only with through_proxy
  RawConnection& raw();                      // a direct connection, reopened after restarts
  const ScenarioOptions& options() const { return opts_; }

  void start_workers();
  // Acquisitions recorded so far by all workers.
  std::size_t acquisitions() const;
  // Waits (with a deadline) until the workers have made `n` acquisitions in total.
  bool wait_for_acquisitions(std::size_t n, std::chrono::milliseconds timeout);
  // Runs inject(), sleeps `length`, runs heal(), and records the fault with its real times.
  void fault(std::string_view kind, const std::string& target, std::chrono::milliseconds length,
             const std::function<void()>& inject, const std::function<void()>& heal);
  // A one-shot fault (drop, CLIENT KILL, SCRIPT FLUSH): recorded with start == end.
  void instant_fault(std::string_view kind, const std::function<void()>& act);
  // Index of a worker process that holds a lock right now (by its history), if any.
  std::optional<int> current_holder();
  // SIGSTOP worker i for `length`, then SIGCONT; recorded as client_pause.
  void pause_worker(int i, std::chrono::milliseconds length);
  void sleep(std::chrono::milliseconds d);
  pid_t worker_pid(int i) const { return workers_.at(static_cast<std::size_t>(i))->pid(); }
  // The kind and lock names worker i uses.
  std::string worker_kind(int i) const;
  std::vector<std::string> worker_locks(int i) const;

  // Waits for every worker to exit (bounded; a hung worker is killed and the test fails).
  // Returns the exit codes.
  std::vector<int> join_workers();
  // The checker over every history file and the recorded faults. Also prints the summary.
  CheckReport check();
  // After the workers exited: every lock key is gone within one TTL (plus slack).
  bool locks_left_behind_expire();

 private:
  void record(const Event& e);

  ScenarioOptions opts_;
  std::string dir_;
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<RawConnection> raw_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::unique_ptr<HistoryWriter> faults_;
};

}  // namespace dlock::test
