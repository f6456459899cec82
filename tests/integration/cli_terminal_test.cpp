// Integration tests of `dlock run` at a terminal: an interactive bash on a pseudo-terminal runs
// dlock as a user would, with job control (&, fg, bg, Ctrl-Z) and Ctrl-C, against a real
// redis-server. What each checks is what flock(1) does in the same place.
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "support/cli_binary.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::eventually;
using std::chrono::milliseconds;

// bash -i on a pseudo-terminal of its own (a new session, the terminal its controlling one), so
// it runs with job control, as at a real terminal.
class PtyShell {
 public:
  PtyShell(const std::string& dlock_dir, const std::string& redis_url) {
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ < 0) throw std::runtime_error(std::string("forkpty: ") + std::strerror(errno));
    if (pid_ == 0) {
      ::setenv("PATH", (dlock_dir + ":/usr/local/bin:/usr/bin:/bin").c_str(), 1);
      ::setenv("DLOCK_REDIS_URL", redis_url.c_str(), 1);
      ::unsetenv("DLOCK_PREFIX");
      ::unsetenv("DLOCK_OWNER");
      ::setenv("TERM", "dumb", 1);
      ::setenv("PS1", "$ ", 1);
      ::setenv("HISTFILE", "/dev/null", 1);
      ::execl("/bin/bash", "bash", "--norc", "--noprofile", "-i", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Job changes reported at once, not at the next prompt.
    send("set -b\n");
  }
  ~PtyShell() {
    // SIGHUP: bash passes it on to its jobs (dlock then stops its command) and exits.
    if (alive()) {
      ::kill(pid_, SIGHUP);
      ::kill(pid_, SIGCONT);
      for (int i = 0; i < 300 && alive(); ++i) std::this_thread::sleep_for(10ms);
      if (alive()) ::kill(pid_, SIGKILL);
    }
    if (!reaped_) ::waitpid(pid_, nullptr, 0);
    kill_session();
    ::close(master_);
  }
  PtyShell(const PtyShell&) = delete;
  PtyShell& operator=(const PtyShell&) = delete;

  void send(const std::string& keys) {
    const ssize_t n = ::write(master_, keys.data(), keys.size());
    if (n != static_cast<ssize_t>(keys.size())) throw std::runtime_error("write to the pty failed");
  }
  // Reads until `needle` appears in the output (after what earlier calls consumed up to `from`).
  bool wait_for(const std::string& needle, milliseconds timeout) {
    return eventually([&] { drain(); return output_.find(needle) != std::string::npos; }, timeout);
  }
  const std::string& output() {
    drain();
    return output_;
  }
  bool alive() {
    if (reaped_) return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) reaped_ = true;
    return !reaped_;
  }

 private:
  void drain() {
    char buf[4096];
    for (;;) {
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      const ssize_t n = ::read(master_, buf, sizeof buf);
      if (n <= 0) return;
      output_.append(buf, static_cast<std::size_t>(n));
    }
  }

  // Whatever is left in the shell's session (a job a failed test left stopped, dlock's guard):
  // nothing may outlive the test.
  void kill_session() const {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream f(entry.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const auto paren = stat.rfind(')');
      if (paren == std::string::npos) continue;
      char state = 0;
      int ppid = 0, pgrp = 0, session = 0;
      if (std::sscanf(stat.c_str() + paren + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) == 4 &&
          session == pid_) {
        ::kill(std::stoi(name), SIGKILL);
      }
    }
  }

  pid_t pid_ = -1;
  int master_ = -1;
  bool reaped_ = false;
  std::string output_;
};

class CliTerminalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string binary = dlock::test::cli_binary();
    if (binary.empty()) GTEST_SKIP() << "the dlock CLI is not built (no <build>/cli/dlock, no $DLOCK_CLI)";
    if (::access("/bin/bash", X_OK) != 0) GTEST_SKIP() << "no /bin/bash";
    char tmpl[] = "/tmp/dlock-cli-terminal-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    server.emplace();
    raw.emplace(*server);
    shell.emplace(std::filesystem::path(binary).parent_path().string(), server->url());
  }
  void TearDown() override {
    shell.reset();
    raw.reset();
    server.reset();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }
  bool held(const std::string& name) { return raw->cmd_int({"EXISTS", "dlock:{" + name + "}"}) == 1; }
  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  // The pid a command wrote into `file`, once it has; 0 if it never does.
  pid_t pid_in(const std::string& file) {
    pid_t pid = 0;
    eventually([&] {
      std::ifstream in(path(file));
      return static_cast<bool>(in >> pid);
    }, 10s);
    return pid;
  }
  static char state_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? '\0' : stat[paren + 2];
  }

  // A shell loop runs `dlock run NAME -- sleep 30` (the loop's stdin: `redirect`); Ctrl-C while
  // the command runs ends the loop, and the lock is released.
  void ctrl_c_stops_the_loop(const std::string& name, const std::string& redirect) {
    shell->send("for i in 1 2 3; do dlock run " + name + " -- sleep 30; echo \"iter $i rc=$?\"; done" + redirect + "\n");
    ASSERT_TRUE(eventually([&] { return held(name); }, 10s)) << shell->output();
    std::this_thread::sleep_for(300ms);  // sleep runs, in the terminal's foreground
    shell->send("\x03");
    shell->send("echo after-$((6 * 7))\n");
    ASSERT_TRUE(shell->wait_for("after-42", 10s)) << "the loop went on after Ctrl-C\n" << shell->output();
    EXPECT_EQ(shell->output().find("iter 2"), std::string::npos) << shell->output();
    EXPECT_FALSE(held(name)) << "the lock is still held after Ctrl-C";
  }

  std::string dir_;

  std::optional<RedisServer> server;
  std::optional<RawConnection> raw;
  std::optional<PtyShell> shell;
};

// Ctrl-C on a command run under dlock stops the shell loop around it, as with flock(1). The
// signal reaches only the command, which has the terminal; dlock exited 130 and the loop went on
// to its next iteration. Now dlock, once the lock is released, ends by the signal itself.
TEST_F(CliTerminalTest, CtrlCStopsTheLoopAroundTheCommand) { ctrl_c_stops_the_loop("loop", ""); }

// The same with dlock's stdin redirected (a script's `< /dev/null`, a pipe into it): the terminal
// is still dlock's controlling one, found through /dev/tty. Judged by stdin alone, the command
// did not get the terminal, Ctrl-C reached dlock's group, and dlock exited 130 without ending
// the loop (it had forwarded the signal itself).
TEST_F(CliTerminalTest, CtrlCStopsTheLoopAroundTheCommandWhoseStdinIsRedirected) {
  ctrl_c_stops_the_loop("loop-in", " < /dev/null");
}

// A command whose stdin is a pipe reads the terminal through /dev/tty (a password prompt): it
// has the terminal, so the read works. It stopped on SIGTTIN, unseen by dlock, which renewed the
// lock for ever.
TEST_F(CliTerminalTest, ACommandWithStdinFromAPipeCanReadTheTerminal) {
  shell->send("echo piped | dlock run tty-read -- sh -c 'read p; read t < /dev/tty; echo \"got-$p-$t\"'\n");
  ASSERT_TRUE(eventually([&] { return held("tty-read"); }, 10s)) << shell->output();
  std::this_thread::sleep_for(500ms);  // the command waits in its read of /dev/tty
  shell->send("typed\n");
  ASSERT_TRUE(shell->wait_for("got-piped-typed", 10s)) << "the command could not read the terminal\n"
                                                       << shell->output();
  EXPECT_TRUE(eventually([&] { return !held("tty-read"); }, 10s)) << "the lock was not released";
  shell->send("echo after-$((6 * 7))\n");
  EXPECT_TRUE(shell->wait_for("after-42", 10s)) << shell->output();
}

// A command started in the background stops when it reads the terminal (SIGTTIN), dlock with
// it, and `fg` brings both back: the command gets the terminal and reads it. It stayed stopped
// in its own group, which `fg` (continuing dlock's) never reached: the terminal hung and the
// lock was renewed for ever.
TEST_F(CliTerminalTest, ABackgroundCommandThatReadsTheTerminalRunsOnFg) {
  shell->send("dlock run bg-read -- sh -c 'read x; echo \"got-$x\"' &\n");
  ASSERT_TRUE(eventually([&] { return held("bg-read"); }, 10s)) << shell->output();
  ASSERT_TRUE(shell->wait_for("Stopped", 10s)) << "the job did not show as stopped\n" << shell->output();
  shell->send("fg\n");
  std::this_thread::sleep_for(500ms);  // fg continues dlock, which hands the command the terminal
  shell->send("abc\n");
  ASSERT_TRUE(shell->wait_for("got-abc", 10s)) << "the command did not get the terminal\n" << shell->output();
  ASSERT_TRUE(eventually([&] { return !held("bg-read"); }, 10s)) << "the lock was not released";
  shell->send("echo after-$((6 * 7))\n");
  EXPECT_TRUE(shell->wait_for("after-42", 10s)) << shell->output();
}

// Ctrl-Z, then `bg`: the command runs on in the background and the shell keeps the terminal.
// dlock, continued, handed the terminal to the command as after `fg`: the shell's next read
// failed and the shell exited.
TEST_F(CliTerminalTest, CtrlZThenBgLeavesTheShellTheTerminal) {
  shell->send("dlock run zbg -- sleep 3\n");
  ASSERT_TRUE(eventually([&] { return held("zbg"); }, 10s)) << shell->output();
  std::this_thread::sleep_for(300ms);
  shell->send("\x1a");  // Ctrl-Z
  ASSERT_TRUE(shell->wait_for("Stopped", 10s)) << shell->output();
  shell->send("bg\n");
  std::this_thread::sleep_for(500ms);
  shell->send("echo alive-$((6 * 7))\n");
  ASSERT_TRUE(shell->wait_for("alive-42", 10s)) << "the shell lost its terminal after bg\n" << shell->output();
  EXPECT_TRUE(shell->alive());
  shell->send("wait; echo done-$((2 * 3))\n");
  ASSERT_TRUE(shell->wait_for("done-6", 15s)) << shell->output();
  EXPECT_FALSE(held("zbg")) << "the lock was not released after the command ended in the background";
}

// Ctrl-Z, `bg`, `fg`, Ctrl-Z again: the second Ctrl-Z stops the command too. After `fg` the
// terminal went to dlock's group and stayed there (dlock had not been stopped, so nothing handed
// it to the command); the second Ctrl-Z then stopped dlock and its watchdog alone, and the
// command ran on while the lease ran out.
TEST_F(CliTerminalTest, CtrlZAfterBgAndFgStopsTheCommandToo) {
  shell->send("dlock run zz -- sh -c 'echo $$ > " + path("pid") + "; exec sleep 30'\n");
  const pid_t pid = pid_in("pid");
  ASSERT_GT(pid, 0) << shell->output();
  std::this_thread::sleep_for(300ms);
  shell->send("\x1a");
  ASSERT_TRUE(eventually([&] { return state_of(pid) == 'T'; }, 10s)) << shell->output();
  shell->send("bg\n");
  ASSERT_TRUE(eventually([&] { return state_of(pid) == 'S' || state_of(pid) == 'R'; }, 10s)) << shell->output();
  shell->send("fg\n");
  std::this_thread::sleep_for(500ms);
  shell->send("\x1a");
  EXPECT_TRUE(eventually([&] { return state_of(pid) == 'T'; }, 10s))
      << "the command runs on while dlock is stopped\n" << shell->output();
  shell->send("fg\n");
  std::this_thread::sleep_for(500ms);
  shell->send("\x03");
  shell->send("echo after-$((6 * 7))\n");
  EXPECT_TRUE(shell->wait_for("after-42", 10s)) << shell->output();
  EXPECT_TRUE(eventually([&] { return !held("zz"); }, 10s)) << "the lock was not released";
}

// Ctrl-Z stops the terminal's foreground group, the command's. A member of it that ignores
// SIGTSTP ran on while dlock, seeing the command's first process stopped, stopped itself and so
// its lease renewal: the lease ran out under a running command, free for a second holder. Now
// dlock stops only once that member is stopped too (SIGSTOP), or does not stop at all.
TEST_F(CliTerminalTest, CtrlZStopsAMemberThatIgnoresTstpBeforeDlockStops) {
  const std::string log = path("ticks");
  // Bounded (about 8 s): Ctrl-C does not reach a background member of a non-interactive shell.
  shell->send("dlock run zign --ttl 1s --grace 300ms -- sh -c '(trap \"\" TSTP; for i in $(seq 150); do date +%s%N >> " +
              log + "; sleep 0.05; done) & exec sleep 100'\n");
  ASSERT_TRUE(eventually([&] {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()).size() > 40;
  }, 10s)) << shell->output();
  std::this_thread::sleep_for(300ms);
  shell->send("\x1a");  // Ctrl-Z
  std::this_thread::sleep_for(2500ms);  // well past the TTL, had renewals stopped
  const auto size = [&] { return std::filesystem::file_size(log); };
  if (!held("zign")) {
    const auto before = size();
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(size(), before) << "the lease ran out while a process of the command ran on\n" << shell->output();
    ASSERT_TRUE(shell->wait_for("Stopped", 5s)) << shell->output();
    shell->send("fg; echo fg-rc=$?\n");  // continued past its lease: killed, not continued
    EXPECT_TRUE(shell->wait_for("fg-rc=70", 10s)) << shell->output();
  } else {
    shell->send("\x03");  // dlock kept its lease renewed: end the command
  }
  shell->send("echo after-$((6 * 7))\n");
  EXPECT_TRUE(shell->wait_for("after-42", 20s)) << shell->output();
  const auto ended = size();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(size(), ended) << "a process of the command outlived dlock";
}

// A SIGINT sent to dlock (not Ctrl-C) is forwarded to the command and ends only it: dlock does
// not pass it on to the script it runs in, as it does after a Ctrl-C (which the terminal would
// have sent to that script too).
TEST_F(CliTerminalTest, ASigintSentToDlockDoesNotEndTheScriptAroundIt) {
  shell->send("sh -c 'dlock run fwd-int -- sh -c \"echo \\$PPID > " + path("dlock") +
              "; exec sleep 30\"; echo \"after rc=$?\"'\n");
  const pid_t dlock_pid = pid_in("dlock");
  ASSERT_GT(dlock_pid, 0) << shell->output();
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(::kill(dlock_pid, SIGINT), 0);
  EXPECT_TRUE(shell->wait_for("after rc=130", 10s)) << "the script was ended too\n" << shell->output();
  EXPECT_TRUE(eventually([&] { return !held("fwd-int"); }, 10s));
}

}  // namespace
