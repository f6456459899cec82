// signals.hpp — signals and wake-ups as file descriptors, so the main thread waits for all of
// them in one poll(): a signalfd for SIGINT/SIGTERM/SIGHUP/SIGCHLD and the stop signals, and a self-pipe that the
// library's event-loop callbacks (which must not block) write one byte into.
#pragma once

#include <signal.h>

#include <initializer_list>
#include <string>

namespace dlock::cli {

class SignalFd {
 public:
  // Blocks `signals` in the calling thread and opens a signalfd for them. Create it before the
  // Client: the Client's thread inherits the mask, so only this descriptor receives them.
  explicit SignalFd(std::initializer_list<int> signals);
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const { return fd_; }
  // One pending signal number, or 0 when none is pending.
  int take();

 private:
  int fd_ = -1;
  sigset_t mask_{};
};

class EventPipe {
 public:
  EventPipe();  // non-blocking, close-on-exec
  ~EventPipe();
  EventPipe(const EventPipe&) = delete;
  EventPipe& operator=(const EventPipe&) = delete;

  int fd() const { return read_fd_; }
  // Async-signal-safe and never blocks (a full pipe already means "wake up").
  void notify(char event) const noexcept;
  // Everything written since the last drain.
  std::string drain();

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

// Ends dlock by `sig` as the terminal would have: sent to dlock's own process group (its job, or
// the script it runs in) with the default action, so the shell sees the job die of it and stops
// a loop or script as after Ctrl-C on any other command. Without a core file (SIGQUIT). Returns
// only when dlock was started with `sig` ignored (the terminal would not have ended it then).
void end_as_the_terminal_would(int sig);

// Stops dlock as the default action of `sig` (SIGTSTP, SIGTTIN) would, for such a signal its
// signalfd took (Ctrl-Z while dlock has the terminal, a `kill -TSTP`): the shell sees the job
// stopped. Returns once dlock is continued.
void stop_as_by(int sig);

// poll() on up to two descriptors (-1: unused) for `timeout_ms` (-1: forever); EINTR is a
// timeout. Sets the readiness flags.
void wait_readable(int fd1, int fd2, int timeout_ms, bool& ready1, bool& ready2);

}  // namespace dlock::cli
