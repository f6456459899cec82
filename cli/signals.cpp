#include "signals.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace dlock::cli {

SignalFd::SignalFd(std::initializer_list<int> signals) {
  sigemptyset(&mask_);
  for (int s : signals) sigaddset(&mask_, s);
  if (pthread_sigmask(SIG_BLOCK, &mask_, nullptr) != 0) {
    throw std::system_error(errno, std::generic_category(), "pthread_sigmask");
  }
  fd_ = ::signalfd(-1, &mask_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "signalfd");
}

SignalFd::~SignalFd() {
  if (fd_ >= 0) ::close(fd_);
}

int SignalFd::take() {
  signalfd_siginfo info{};
  for (;;) {
    const ssize_t n = ::read(fd_, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

void end_as_the_terminal_would(int sig) {
  struct sigaction old {};
  if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) return;
  std::fflush(stdout);
  std::fflush(stderr);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::kill(0, sig);
  // SIGINT is blocked for the signalfd: it is pending now, and ends dlock when unblocked.
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
}

void stop_as_by(int sig) {
  struct sigaction dfl {}, old {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, &old);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::raise(sig);  // pending for this thread until unblocked: then the whole process stops
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  pthread_sigmask(SIG_BLOCK, &one, nullptr);
  ::sigaction(sig, &old, nullptr);
}

EventPipe::EventPipe() {
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  read_fd_ = p[0];
  write_fd_ = p[1];
}

EventPipe::~EventPipe() {
  ::close(read_fd_);
  ::close(write_fd_);
}

void EventPipe::notify(char event) const noexcept {
  const int saved = errno;
  ssize_t ignored = ::write(write_fd_, &event, 1);
  (void)ignored;
  errno = saved;
}

std::string EventPipe::drain() {
  std::string out;
  char buf[64];
  for (;;) {
    const ssize_t n = ::read(read_fd_, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return out;
  }
}

void wait_readable(int fd1, int fd2, int timeout_ms, bool& ready1, bool& ready2) {
  pollfd fds[2] = {{fd1, POLLIN, 0}, {fd2, POLLIN, 0}};
  ready1 = ready2 = false;
  const int n = ::poll(fds, 2, timeout_ms);
  if (n <= 0) return;
  ready1 = fd1 >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  ready2 = fd2 >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

}  // namespace dlock::cli
