#pragma once
// Helpers for tests that need more than one OS process: a forked child running
// a lambda (a second "machine" competing for a lock) and running a program
// (the dlock CLI) with its output captured.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock::test {

// Runs `fn` in a forked child process, which ends with std::_Exit(fn()): no
// gtest output, no atexit handlers, no static destructors run in the child. If
// fn throws, the child prints what() to stderr and exits with 255.
//
// The test process is multi-threaded (gtest, dlock's I/O threads), and fork()
// copies only the calling thread. So, inside fn:
//  * create your OWN dlock Client (and any other object owning threads or
//    sockets) after the fork; never use one made before the fork: its I/O
//    thread does not exist in the child and its sockets are shared with the
//    parent;
//  * do not use EXPECT_*/ASSERT_*: failures would be recorded in the child's
//    copy of gtest and lost. Report the outcome through the exit code.
//
// The child gets PR_SET_PDEATHSIG(SIGKILL), so it dies if the forking THREAD
// of the parent dies (a crashed test never leaks children). Consequence:
// create ChildProcess from a thread that outlives it (normally the test body).
class ChildProcess {
 public:
  explicit ChildProcess(std::function<int()> fn);  // throws std::runtime_error if fork fails
  ~ChildProcess();  // SIGKILL + reap if still running

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Exit code, or 128+signal if it was killed by a signal. Blocks. Can be
  // called again: returns the same value.
  int wait();
  // Like wait(), but gives up after `d` and returns nullopt (child left running).
  std::optional<int> wait_for(std::chrono::milliseconds d);
  void signal(int sig);  // no-op once the child has been reaped
  pid_t pid() const;

 private:
  bool try_reap(bool block);  // true once reaped; stores status_

  pid_t pid_ = -1;
  std::optional<int> status_;  // set once reaped
};

struct CommandResult {
  int exit_code;  // exit code, or 128+signal; 127 if the program could not be executed
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up in PATH like execvp; no shell) with the current
// environment plus `env` (entries with an existing name override it), stdin
// from /dev/null, capturing stdout and stderr. If it has not finished within
// `timeout` it is SIGKILLed and std::runtime_error is thrown, with whatever
// output it produced in the message.
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env = {},
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));

namespace detail {
// For use between fork() and exec() only (async-signal-safe):
// closes every descriptor >= first, so the exec'd program does not hold the
// test's sockets open (hiredis and others do not set O_CLOEXEC); if it did, a
// connection the test "closes" would stay open on the server side.
void close_fds_from(int first) noexcept;
// Unblocks all signals and restores SIGPIPE's default action: a blocked mask
// or an ignored SIGPIPE would otherwise survive exec().
void reset_signals() noexcept;
// PR_SET_PDEATHSIG(SIGKILL), then exits at once if the parent already died
// before the call (the signal would never come). `parent` is getpid() from
// before the fork.
void die_with_parent(pid_t parent) noexcept;
// Looks `name` up in PATH the way execvp does; returns it unchanged if it
// contains a '/' or is not found (exec then fails and reports it).
std::string find_in_path(const std::string& name);
// Maps a waitpid() status to an exit code, or 128+signal.
int exit_code_from_status(int status) noexcept;
}  // namespace detail

}  // namespace dlock::test
