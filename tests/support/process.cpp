#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlock::test {

namespace detail {

void close_fds_from(int first) noexcept {
  if (::close_range(static_cast<unsigned>(first), ~0U, 0) == 0) return;
  // Kernels before 5.9 lack close_range: close one by one up to the limit.
  rlimit lim{};
  int max_fd = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < 1048576) {
    max_fd = static_cast<int>(lim.rlim_cur);
  }
  for (int fd = first; fd < max_fd; ++fd) ::close(fd);
}

void reset_signals() noexcept {
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
}

void die_with_parent(pid_t parent) noexcept {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(126);
}

std::string find_in_path(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return name;
}

int exit_code_from_status(int status) noexcept {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace detail

// ---------------------------------------------------------------- ChildProcess

ChildProcess::ChildProcess(std::function<int()> fn) {
  // Flush before forking: otherwise unflushed stdio buffers are copied into
  // the child and printed twice.
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid_ == 0) {
    detail::die_with_parent(parent);
    int code = 255;
    try {
      code = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ChildProcess: uncaught exception: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "ChildProcess: uncaught non-std exception\n");
    }
    std::fflush(nullptr);  // _Exit does not flush; keep what fn printed
    std::_Exit(code);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    try_reap(true);
  }
}

bool ChildProcess::try_reap(bool block) {
  if (status_) return true;
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    status_ = detail::exit_code_from_status(st);
    return true;
  }
  if (r < 0) {  // ECHILD: someone else reaped it; nothing more to learn
    status_ = -1;
    return true;
  }
  return false;
}

int ChildProcess::wait() {
  try_reap(true);
  return *status_;
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds d) {
  // Polling keeps this simple and free of SIGCHLD handlers, which would be
  // process-wide state shared with the code under test.
  const auto deadline = std::chrono::steady_clock::now() + d;
  while (!try_reap(false)) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status_;
}

void ChildProcess::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

pid_t ChildProcess::pid() const { return pid_; }

// ----------------------------------------------------------------- run_command

namespace {

struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

void make_pipe(Fd& r, Fd& w) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  r.fd = p[0];
  w.fd = p[1];
}

// The environment for the child, built before fork(): the child may not
// allocate (another thread could hold the malloc lock at fork time).
std::vector<std::string> build_env(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [k, v] : extra) overridden = overridden || k == name;
    if (!overridden) out.push_back(std::move(entry));
  }
  for (const auto& [k, v] : extra) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env,
                          std::chrono::milliseconds timeout) {
  if (argv.empty()) throw std::invalid_argument("run_command: empty argv");

  const std::string program = detail::find_in_path(argv[0]);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const std::vector<std::string> envs = build_env(env);
  std::vector<char*> cenv;
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const std::string exec_failed = "run_command: cannot execute " + program + "\n";

  Fd out_r, out_w, err_r, err_w;
  make_pipe(out_r, out_w);
  make_pipe(err_r, err_w);

  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    detail::die_with_parent(parent);
    detail::reset_signals();
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_w.fd, STDOUT_FILENO);
    ::dup2(err_w.fd, STDERR_FILENO);
    detail::close_fds_from(3);
    ::execve(program.c_str(), cargv.data(), cenv.data());
    ssize_t ignored = ::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    (void)ignored;
    ::_exit(127);
  }
  out_w.reset();
  err_w.reset();

  CommandResult result{-1, {}, {}};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  std::array<char, 4096> buf{};
  // Read both pipes until EOF; reading only one could deadlock when the
  // program fills the other pipe's buffer.
  while (out_r.fd >= 0 || err_r.fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};  // fd -1 is ignored by poll
    int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    Fd* pipes[2] = {&out_r, &err_r};
    std::string* sinks[2] = {&result.out, &result.err};
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf.data(), buf.size());
      if (got > 0) {
        sinks[i]->append(buf.data(), static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        pipes[i]->reset();
      }
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = detail::exit_code_from_status(st);
  if (timed_out) {
    throw std::runtime_error("run_command: " + argv[0] + " timed out after " + std::to_string(timeout.count()) +
                             " ms\n--- stdout ---\n" + result.out + "\n--- stderr ---\n" + result.err);
  }
  return result;
}

}  // namespace dlock::test
