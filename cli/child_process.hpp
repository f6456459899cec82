// child_process.hpp — the command `dlock run` protects: found in PATH before the lock is taken,
// started in its own process group, signalled as a group, and reaped; it is over when its whole
// group is (what it starts in the background runs under the lock too). It never outlives dlock:
// its first process has PR_SET_PDEATHSIG(SIGKILL), and a guard process kills the rest of the
// group if dlock dies (kill -9). A process that leaves the group (setsid, setpgid) is no longer
// the command's.
//
// When dlock runs in the foreground of a terminal, the command's group becomes the terminal's
// foreground group (so it can read the terminal and Ctrl-C/Ctrl-Z reach it directly). When the
// command is stopped (Ctrl-Z; or, in the background, a read from the terminal: SIGTTIN), dlock
// stops itself too so the shell sees the job stopped, but only once every process of the
// command's group is stopped (stop_with_dlock); on `fg` it hands the command the terminal
// and continues it, on `bg` it continues it in the background.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock::cli {

// Records the descriptors open at start-up (inherited from the caller). The command inherits
// those, and none that dlock opened itself (sockets, signalfd). Call first thing in main().
void record_inherited_fds();

struct ProgramLookup {
  std::string path;    // what to execve()
  int exit_code = 0;   // 0 found; 126 not executable; 127 not found
  std::string error;
};

// Looks `name` up as execvp(3) would (a name with '/' is used as is).
ProgramLookup find_program(const std::string& name);

class ChildCommand {
 public:
  ChildCommand() = default;
  // Gives the terminal back if it was handed over; kills what is left of the command's group
  // (only an early exit of dlock, an exception, leaves one: it must not run on unguarded).
  ~ChildCommand();
  ChildCommand(const ChildCommand&) = delete;
  ChildCommand& operator=(const ChildCommand&) = delete;

  // Forks and execs `path` with `argv`, the environment plus `env` (replacing equal names).
  // Returns 0 when the command runs; 126/127 when exec failed (then `error` says why).
  int start(const std::string& path, const std::vector<std::string>& argv,
            const std::vector<std::pair<std::string, std::string>>& env, std::string& error);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !status_; }
  // kill(-pgid, sig); harmless when the group is gone.
  void signal_group(int sig) const;
  // Reaps the command if it ended (never blocks). Its status once ended: the exit code, or
  // 128+N when it died of signal N.
  std::optional<int> poll();
  // The signal that ended it, 0 when it exited.
  int term_signal() const { return term_signal_; }
  // Asked when dlock is continued after a stop of the command (Ctrl-Z, then `fg`), before the
  // command is: false, and the command's group is killed instead (SIGKILL), never continued.
  // dlock was stopped too, watchdog included, so the lease may have run out meanwhile.
  void set_resume_check(std::function<bool()> may_continue) { may_continue_ = std::move(may_continue); }
  // The command was killed instead of continued (set_resume_check).
  bool killed_on_resume() const { return killed_on_resume_; }
  // stdin is dlock's controlling terminal: a stop of the command is seen (poll) and stops dlock.
  bool job_control() const { return tty_; }
  // dlock was continued after a stop that stopped the command too: continue it (handing it the
  // terminal when dlock is in the foreground), or kill it if the resume check refuses.
  void resume_after_stop();
  // Stops dlock (`stop_dlock`, which returns once dlock is continued) only after making sure no
  // process of the command's group still runs: one that ignores or handles the stop signal is
  // sent SIGSTOP, and /proc must show every member stopped. A stopped dlock renews nothing, so
  // a member running on could outlive the lease and overlap another holder. When some member
  // cannot be stopped within half a second, dlock is not stopped: the group is continued, the
  // note callback says why, and false is returned. Then, on continue, resume_after_stop().
  bool stop_with_dlock(const std::function<void()>& stop_dlock);
  // Where stop_with_dlock() says why it did not stop (poll() calls it too).
  void set_note(std::function<void(const std::string&)> note) { note_ = std::move(note); }
  // dlock was continued (SIGCONT) while the command runs: after a `fg` the command gets the
  // terminal, which went to dlock's group.
  void continued() const;
  // The command's first process has exited, and others of its group still run (poll() waits
  // for them).
  bool group_outlives_leader() const;
  // The command died of SIGINT or SIGQUIT while its group had the terminal: Ctrl-C or Ctrl-\ in
  // all likelihood, which the terminal would have sent to dlock's job too, had dlock kept it.
  bool ended_by_terminal_signal() const {
    return ended_with_terminal_ && (term_signal_ == SIGINT || term_signal_ == SIGQUIT);
  }

 private:
  // Waits briefly for every member to stop, then sends SIGSTOP and waits again. false, with
  // `why`, when some member still runs (or /proc cannot tell).
  bool stop_whole_group(std::string& why);
  // After a stop that could not be completed: the command gets the terminal back if dlock has
  // it, and its group is continued.
  void undo_stop();
  void find_terminal();
  void give_terminal_to(pid_t pgrp) const;
  bool in_foreground() const;         // dlock's group has the terminal
  bool command_has_terminal() const;  // the command's group has it
  void take_terminal_back() const;    // from the command's group, if it has it
  // Some process of the command's group still exists (one dlock may not signal counts too).
  bool group_alive() const;
  // The guard: a process that outlives dlock and kills the command's group if dlock dies
  // without disarming it (kill -9, a crash). It is started, in a group of its own, before the
  // command, and learns the command's group from the command itself (its pid, written into the
  // guard's pipe before exec), so there is no moment in which the command runs unguarded: a
  // kill of dlock's whole group right after start() took a guard still in that group along.
  void arm_guard();
  void disarm_guard();

  pid_t pid_ = -1;
  bool tty_ = false;  // dlock has a controlling terminal: job control applies
  int tty_fd_ = -1;   // that terminal: stdin, or /dev/tty opened (find_terminal())
  bool ended_with_terminal_ = false;  // the first process died of a signal holding the terminal
  std::optional<int> status_;
  int term_signal_ = 0;
  std::function<bool()> may_continue_;
  std::function<void(const std::string&)> note_;
  bool killed_on_resume_ = false;
  int guard_fd_ = -1;      // dlock's end of the guard's socket pair
  bool leftovers_ = false;  // the first process exited with others of its group still running
  bool group_gone_ = false;  // the whole group has exited: its number is not ours any more
};

}  // namespace dlock::cli
