#include "child_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern char** environ;

namespace dlock::cli {

namespace {

std::vector<int>& inherited_fds() {
  static std::vector<int> fds;
  return fds;
}

std::vector<int> open_fds() {
  std::vector<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) {
    // No /proc (a chroot, a sandbox): ask each descriptor up to a bound instead. Without this
    // the command would start with stdin, stdout and stderr closed.
    rlimit files{};
    const int max_fd = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                           ? static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 16))
                           : 1024;
    for (int fd = 0; fd < max_fd; ++fd) {
      if (::fcntl(fd, F_GETFD) != -1) fds.push_back(fd);
    }
    return fds;
  }
  const int own = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != own) fds.push_back(fd);
  }
  ::closedir(d);
  std::sort(fds.begin(), fds.end());
  return fds;
}

bool executable_file(const std::string& path, int& err) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    err = errno;
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    err = EACCES;
    return false;
  }
  if (::access(path.c_str(), X_OK) != 0) {
    err = errno;
    return false;
  }
  return true;
}

// SIGTTOU is ignored around tcsetpgrp(): a process that changes the foreground group from
// outside it would otherwise be stopped. Async-signal-safe.
void set_foreground(int tty, pid_t pgrp) {
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGTTOU, &ignore, &old);
  ::tcsetpgrp(tty, pgrp);
  ::sigaction(SIGTTOU, &old, nullptr);
}

// Closes every descriptor but the `n` in `keep` (sorted, distinct). Async-signal-safe: it runs
// between fork() and exec(). `max_fd` bounds the loop of a kernel without close_range (< 5.9).
void close_all_but(const int* keep, std::size_t n, int max_fd) {
  int from = 0;
  bool ok = true;
  for (std::size_t i = 0; i <= n && ok; ++i) {
    const int to = i < n ? keep[i] - 1 : -1;  // -1: up to the end
    if (i < n && to < from) {
      from = keep[i] + 1;
      continue;
    }
    ok = ::close_range(static_cast<unsigned>(from), to < 0 ? ~0U : static_cast<unsigned>(to), 0) == 0;
    if (i < n) from = keep[i] + 1;
  }
  if (ok) return;
  std::size_t k = 0;
  for (int fd = 0; fd < max_fd; ++fd) {
    while (k < n && keep[k] < fd) ++k;
    if (k < n && keep[k] == fd) continue;
    ::close(fd);
  }
}

}  // namespace

void record_inherited_fds() { inherited_fds() = open_fds(); }

ProgramLookup find_program(const std::string& name) {
  ProgramLookup out;
  if (name.empty()) {
    out.exit_code = 127;
    out.error = "empty command name";
    return out;
  }
  int err = 0;
  if (name.find('/') != std::string::npos) {
    if (executable_file(name, err)) {
      out.path = name;
    } else {
      out.exit_code = err == ENOENT || err == ENOTDIR ? 127 : 126;
      out.error = "cannot execute '" + name + "': " + std::strerror(err);
    }
    return out;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::string denied;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (executable_file(candidate, err)) {
      out.path = candidate;
      return out;
    }
    if (err != ENOENT && err != ENOTDIR && denied.empty()) denied = candidate;
    start = end + 1;
  }
  if (!denied.empty()) {
    out.exit_code = 126;
    out.error = "cannot execute '" + denied + "': permission denied";
  } else {
    out.exit_code = 127;
    out.error = "command not found: '" + name + "'";
  }
  return out;
}

ChildCommand::~ChildCommand() {
  take_terminal_back();
  struct CloseTty {  // whatever happens below
    int fd;
    ~CloseTty() {
      if (fd > STDERR_FILENO) ::close(fd);
    }
  } close_tty{tty_fd_};
  // Normally the group is gone by now (poll() said so) or was killed (cmd_run). Should dlock
  // leave it any other way (an exception out of its supervision), the command must not run on
  // without the lock's watchdog: what the guard would do if dlock died, done here.
  if (group_alive()) {
    signal_group(SIGKILL);
    // And gone before the lock can be released behind us (a Lease destroyed next): a member in
    // the middle of a system call (uninterruptible I/O) ends it first. Bounded: an unkillable
    // process must not hang dlock for ever.
    for (int i = 0; i < 500 && group_alive(); ++i) {
      int st = 0;
      while (::waitpid(-1, &st, WNOHANG) > 0) {
      }
      if (!group_alive()) break;
      ::usleep(10000);
    }
  }
  disarm_guard();
}

void ChildCommand::give_terminal_to(pid_t pgrp) const { set_foreground(tty_fd_, pgrp); }

bool ChildCommand::in_foreground() const { return tty_ && ::tcgetpgrp(tty_fd_) == ::getpgrp(); }

bool ChildCommand::command_has_terminal() const {
  return tty_ && pid_ > 0 && ::tcgetpgrp(tty_fd_) == pid_;
}

// The controlling terminal: stdin when it is that terminal, else /dev/tty, which opens it
// whatever the standard streams are (`echo y | dlock run ...`, `< /dev/null` at a terminal).
// Judged by stdin alone, a command run that way never got the terminal: one that opened
// /dev/tty (a password prompt, a pager) stopped on SIGTTIN unseen while dlock renewed the lock,
// and Ctrl-C went to dlock's group instead of the command's. -1 without a controlling terminal
// (a daemon, cron, ssh without -t: open() fails with ENXIO).
void ChildCommand::find_terminal() {
  if (tty_fd_ >= 0) return;
  if (::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) != -1) {
    tty_fd_ = STDIN_FILENO;
  } else {
    const int fd = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0 && ::tcgetpgrp(fd) != -1) {
      tty_fd_ = fd;
    } else if (fd >= 0) {
      ::close(fd);
    }
  }
  tty_ = tty_fd_ >= 0;
}

// Only from the command: taken while dlock is in the background (the command stopped after a
// `bg`, or ended), the terminal would be taken from the shell, which then exits on its next read.
void ChildCommand::take_terminal_back() const {
  if (command_has_terminal()) give_terminal_to(::getpgrp());
}

int ChildCommand::start(const std::string& path, const std::vector<std::string>& argv,
                        const std::vector<std::pair<std::string, std::string>>& env, std::string& error) {
  // Everything the child needs is prepared before fork(): between fork and exec only
  // async-signal-safe calls are allowed (another thread may hold the malloc lock).
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  // A script without a "#!" line fails execve() with ENOEXEC; it is then run by /bin/sh, as
  // execvp(3), env(1) and flock(1) run it: /bin/sh PATH ARGS...
  static char sh[] = "/bin/sh";
  std::vector<char*> sh_argv{sh, const_cast<char*>(path.c_str())};
  for (std::size_t i = 1; i < argv.size(); ++i) sh_argv.push_back(const_cast<char*>(argv[i].c_str()));
  sh_argv.push_back(nullptr);
  std::vector<std::string> envs;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
    if (!replaced) envs.push_back(entry);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> cenv;
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  // Before the command exists: see arm_guard().
  arm_guard();
  const int guard = guard_fd_;
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    disarm_guard();
    return 126;
  }
  // What the command keeps: the descriptors dlock inherited, and the pipe that reports a failed
  // exec (close-on-exec). The child closes everything else, between these, rather than a list
  // of dlock's own taken here: a socket the Client's thread opens after that list was taken (a
  // reconnect, the lock's revocation subscription) would reach the command.
  std::vector<int> keep = inherited_fds();
  keep.push_back(report[1]);
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  rlimit files{};
  const int max_fd = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                         ? static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20))
                         : 1024;
  // What the command leaves behind when its parent exits is reparented to dlock, not to init:
  // dlock reaps it and sees it in the group (poll()).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // Job control: stdin is dlock's controlling terminal. The command gets it when dlock is the
  // terminal's foreground job; in the background (`dlock run ... &`) it does not, and a read
  // from the terminal stops it (SIGTTIN) until `fg`.
  find_terminal();
  const bool take_terminal = in_foreground();
  const pid_t parent = ::getpid();
  const pid_t own_group = ::getpgrp();

  const pid_t pid = ::fork();
  if (pid < 0) {
    error = std::string("fork: ") + std::strerror(errno);
    ::close(report[0]);
    ::close(report[1]);
    disarm_guard();
    return 126;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // Still dlock's: a Ctrl-Z and `bg` since the check would have the command take the terminal
    // from the shell.
    if (take_terminal && ::tcgetpgrp(tty_fd_) == own_group) set_foreground(tty_fd_, ::getpid());
    // Dies with dlock: the command must never run without the lock's watchdog.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    // Tell the guard which group to kill, before anything of the command runs. Should dlock
    // die from here on, PR_SET_PDEATHSIG kills this process (nothing else of the group exists
    // yet) or the guard kills the group. Its end of the socket closes at exec (CLOEXEC).
    // MSG_NOSIGNAL: a guard that died must not kill the command with SIGPIPE.
    if (guard >= 0) {
      const pid_t self = ::getpid();
      ssize_t ignored = ::send(guard, &self, sizeof self, MSG_NOSIGNAL);
      (void)ignored;
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    close_all_but(keep.data(), keep.size(), max_fd);
    ::execve(path.c_str(), cargv.data(), cenv.data());
    int err = errno;
    if (err == ENOEXEC) {
      ::execve(sh, sh_argv.data(), cenv.data());
      err = errno;
    }
    ssize_t ignored = ::write(report[1], &err, sizeof err);
    (void)ignored;
    ::_exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
  }
  pid_ = pid;
  ::setpgid(pid, pid);  // also here, so signal_group() works before the child ran
  if (take_terminal && ::tcgetpgrp(tty_fd_) == own_group) give_terminal_to(pid);
  ::close(report[1]);
  int err = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    group_gone_ = true;  // it was the group's only process: its number is not ours any more
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 126;
    take_terminal_back();
    error = "cannot execute '" + path + "': " + std::strerror(err);
    disarm_guard();
    return err == ENOENT || err == ENOTDIR ? 127 : 126;
  }
  return 0;
}

void ChildCommand::signal_group(int sig) const {
  // Never once the group is known gone: its number may belong to another group by now.
  if (pid_ > 0 && !group_gone_) ::kill(-pid_, sig);
}

namespace {

// Calls f(pid, state) for every process of group `pgid`, state being its /proc/<pid>/stat letter,
// until f returns false. Returns false when /proc cannot be read.
template <class F>
bool for_each_member(pid_t pgid, F f) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::FILE* file = std::fopen((std::string("/proc/") + e->d_name + "/stat").c_str(), "r");
    if (file == nullptr) continue;  // gone meanwhile
    char buf[512];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, file);
    std::fclose(file);
    buf[n] = '\0';
    const char* close = std::strrchr(buf, ')');
    char state = 0;
    int ppid = 0, group = 0;
    if (close != nullptr && std::sscanf(close + 1, " %c %d %d", &state, &ppid, &group) == 3 && group == pgid &&
        !f(static_cast<pid_t>(std::atoi(e->d_name)), state)) {
      break;
    }
  }
  ::closedir(d);
  return true;
}

bool stopped_state(char state) { return state == 'T' || state == 't'; }

// Whether a process of group `pgid` is stopped.
bool group_has_stopped_member(pid_t pgid) {
  bool stopped = false;
  for_each_member(pgid, [&](pid_t, char state) { return !(stopped = stopped_state(state)); });
  return stopped;
}

// Whether no process of group `pgid` can run: each is stopped, or a zombie. nullopt when /proc
// cannot tell; otherwise `running` is a member that still runs (0 when none does).
std::optional<bool> group_all_stopped(pid_t pgid, pid_t& running) {
  running = 0;
  const bool read = for_each_member(pgid, [&](pid_t pid, char state) {
    if (stopped_state(state) || state == 'Z' || state == 'X') return true;
    running = pid;
    return false;
  });
  if (!read) return std::nullopt;
  return running == 0;
}

}  // namespace

bool ChildCommand::stop_whole_group(std::string& why) {
  if (pid_ <= 0 || group_gone_) return true;  // nothing of it runs
  pid_t running = 0;
  // A group-wide signal is atomic towards fork() (the kernel restarts a fork that races it), so
  // once every member seen is stopped no new one can appear behind the scan's back.
  const auto wait_stopped = [&](std::chrono::milliseconds bound) {
    const auto until = std::chrono::steady_clock::now() + bound;
    for (;;) {
      const std::optional<bool> all = group_all_stopped(pid_, running);
      if (!all || *all || std::chrono::steady_clock::now() >= until) return all;
      ::usleep(2000);
    }
  };
  // First the stop that was asked for (SIGTSTP, SIGTTIN) a moment to work: a program that
  // handles it (an editor restoring the terminal) stops itself afterwards, in its own way.
  std::optional<bool> all = wait_stopped(std::chrono::milliseconds(100));
  if (all && !*all) {
    // A member ignores or handles the signal without stopping (`trap '' TSTP`, a daemon): it
    // would run on while dlock, stopped, renews nothing. SIGSTOP cannot be ignored. Bounded:
    // dlock is not stopped while it waits, but its supervision is, so keep it short.
    signal_group(SIGSTOP);
    all = wait_stopped(std::chrono::milliseconds(400));
  }
  if (all && *all) return true;
  why = !all ? std::string("/proc cannot be read, so dlock cannot confirm that every process of the command's group "
                           "stopped")
             : "process " + std::to_string(running) + " of the command's group did not stop (dlock may not be " +
                   "allowed to signal it, or it is in uninterruptible I/O)";
  return false;
}

void ChildCommand::undo_stop() {
  if (in_foreground()) give_terminal_to(pid_);
  signal_group(SIGCONT);
}

bool ChildCommand::stop_with_dlock(const std::function<void()>& stop_dlock) {
  std::string why;
  if (!stop_whole_group(why)) {
    // dlock must not stop: its watchdog would stop renewing while that process runs on, and the
    // lock could go to another holder. Nothing stays stopped instead of part of the command.
    undo_stop();
    if (note_) note_("the command was not stopped: " + why + "; it was continued, and dlock keeps its lock renewed");
    return false;
  }
  stop_dlock();
  resume_after_stop();
  return true;
}

std::optional<int> ChildCommand::poll() {
  if (pid_ <= 0) return status_;
  for (;;) {
    int st = 0;
    // Any child: the command, and what it left behind when its parent exited (dlock is their
    // subreaper, so they become dlock's children; reaped here, they leave no zombies).
    const pid_t r = ::waitpid(-1, &st, WNOHANG | (tty_ && !status_ ? WUNTRACED : 0));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {  // ECHILD: no child left at all
      if (!status_) status_ = 126;  // cannot happen while the command runs; treat it as gone
      break;
    }
    if (r == 0) break;
    if (r != pid_) continue;  // a descendant of the command, or the guard
    if (WIFSTOPPED(st)) {
      // Ctrl-Z, or a read from the terminal in the background (SIGTTIN): take the terminal back
      // if the command had it, and stop as a job the shell can see. Continued by `fg`, dlock
      // hands the terminal to the command again and continues it; by `bg`, it only continues
      // it (a read from the terminal stops it again, and dlock with it).
      // Only once nothing of the command's group runs any more (stop_with_dlock).
      take_terminal_back();
      stop_with_dlock([] { ::kill(::getpid(), SIGSTOP); });
      continue;
    }
    if (WIFEXITED(st)) {
      status_ = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
      term_signal_ = WTERMSIG(st);
      status_ = 128 + term_signal_;
      ended_with_terminal_ = command_has_terminal();
    } else {
      continue;
    }
    take_terminal_back();
  }
  if (!status_) return std::nullopt;
  // The command is over when its whole process group is: what it started in the background
  // (`cmd &`) runs under the lock as the command itself did, as with flock(1), whose lock
  // lives as long as any process holding its descriptor.
  if (group_alive()) {
    if (!leftovers_) {
      leftovers_ = true;
      // Ctrl-Z now reaches dlock's own group (the terminal is back with it): stopping dlock
      // would stop its watchdog while the leftovers run on. It is ignored from here on.
      ::signal(SIGTSTP, SIG_IGN);
    }
    // The group is orphaned in all but name (its leader is gone and it never gets the terminal
    // back), but dlock, their subreaper, is in the same session, so the kernel does not treat
    // it so. Do what it does for orphaned groups: a stopped member (SIGTTIN on a read from the
    // terminal) would otherwise hold the lock for ever, deaf to forwarded signals.
    if (group_has_stopped_member(pid_)) {
      signal_group(SIGHUP);
      signal_group(SIGCONT);
    }
    return std::nullopt;
  }
  group_gone_ = true;
  disarm_guard();  // nothing left to kill, and the number may be reused
  return status_;
}

void ChildCommand::resume_after_stop() {
  if (may_continue_ && !may_continue_()) {
    // The lease ran out while everything was stopped: the command must not run another
    // instruction (another holder may have the lock by now). SIGKILL ends stopped processes.
    killed_on_resume_ = true;
    signal_group(SIGKILL);
    return;
  }
  if (in_foreground()) give_terminal_to(pid_);
  signal_group(SIGCONT);
}

void ChildCommand::continued() const {
  if (running() && !killed_on_resume_ && in_foreground() && !command_has_terminal()) give_terminal_to(pid_);
}

bool ChildCommand::group_alive() const {
  if (pid_ <= 0 || group_gone_) return false;
  // EPERM: a member dlock may not signal (a setuid program) is still a member.
  return ::kill(-pid_, 0) == 0 || errno == EPERM;
}

bool ChildCommand::group_outlives_leader() const { return status_.has_value() && group_alive(); }

void ChildCommand::arm_guard() {
  // A socket pair, not a pipe: send(MSG_NOSIGNAL) to a guard that died is an error, where a
  // write to a pipe would kill the writer (dlock, or the command before exec) with SIGPIPE.
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;  // no guard: PR_SET_PDEATHSIG still covers the command itself
  rlimit files{};
  const int max_fd = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                         ? static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20))
                         : 1024;
  const pid_t g = ::fork();
  if (g < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (g == 0) {
    // Its own group: a kill of dlock's whole job (kill -9 %1, timeout -s KILL) must not take
    // the guard with it.
    ::setpgid(0, 0);
    // The guard: only async-signal-safe calls. It keeps nothing of dlock's open (sockets,
    // the terminal, pipes a caller waits on; also what another thread opened a moment ago),
    // learns the command's group (the command's pid, sent by the command before exec), waits
    // for dlock to go, and, unless dlock said it was done, kills what is left of that group.
    // Its signal mask is dlock's (the terminal's SIGINT/SIGHUP stay blocked), so only SIGKILL
    // ends it early.
    const int keep = fds[0];
    const bool closed = (keep == 0 || ::close_range(0, keep - 1, 0) == 0) && ::close_range(keep + 1, ~0U, 0) == 0;
    for (int fd = 0; !closed && fd < max_fd; ++fd) {  // a kernel without close_range (before 5.9)
      if (fd != keep) ::close(fd);
    }
    pid_t group = 0;
    std::size_t got = 0;
    while (got < sizeof group) {  // a stream: in principle the pid may come in pieces
      const ssize_t n = ::read(keep, reinterpret_cast<char*>(&group) + got, sizeof group - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    // Anything else: no command was started (dlock said done, or died before the fork).
    if (got != sizeof group || group <= 1) ::_exit(0);
    char done = 0;
    ssize_t n;
    do {
      n = ::read(keep, &done, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) ::kill(-group, SIGKILL);
    ::_exit(0);
  }
  // Also here: once setpgid() has returned, a kill of dlock's group cannot reach the guard,
  // and the command is only started after this.
  ::setpgid(g, g);
  ::close(fds[0]);
  guard_fd_ = fds[1];
}

void ChildCommand::disarm_guard() {
  if (guard_fd_ < 0) return;
  const char done = 'q';
  ssize_t ignored = ::send(guard_fd_, &done, 1, MSG_NOSIGNAL);  // a dead guard must not kill dlock
  (void)ignored;
  ::close(guard_fd_);
  guard_fd_ = -1;
}

}  // namespace dlock::cli
