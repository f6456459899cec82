// dlock run NAME [--kind K] [--read] [--permits N] [--take K] [--wait DUR | --no-wait]
//               [--ttl DUR] [--grace DUR] -- CMD [ARGS...]
//
// The lock may be of any kind (lock_target.hpp): a mutex by default, a reentrant, fair or rw
// lock (--read: a shared hold), or permits of a semaphore (--permits N: its size).
// Acquire in watchdog mode, run CMD in its own process group, renew while it runs, release
// when it exits. The command is stopped BEFORE the lease can end:
//   - the lease is at risk (no renewal succeeded and less than grace + margin of validity is
//     left): SIGTERM to the group, SIGKILL when only margin is left;
//   - the lock was taken away outright (on_lost with LossReason::taken: key deleted, replaced,
//     force-unlocked): SIGTERM at once, SIGKILL after the grace;
//   - the lease expired on this machine's clock (on_lost with LossReason::expired): SIGKILL.
// Either way dlock exits 70 (--lost-exit-code). A lease that comes back with no more than
// grace + margin of validity left (a late reply, dlock paused) does not start the command: 70 too.
// The library's lease events run on its event-loop thread and must not block: they only write a
// byte into a self-pipe the main thread polls.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "child_process.hpp"
#include "commands.hpp"
#include "dlock/clock.hpp"
#include "dlock/duration.hpp"
#include "lock_target.hpp"
#include "lock_wait.hpp"
#include "owner_token.hpp"
#include "signals.hpp"

namespace dlock::cli {

namespace {

using std::chrono::milliseconds;
using Clock = dlock::BootClock;

struct RunSettings {
  std::string name;
  LockSpec lock;
  std::optional<milliseconds> wait;  // nullopt: forever
  milliseconds ttl{30000};
  milliseconds grace{5000};
  milliseconds margin{1000};  // safety margin before the end of validity
  milliseconds drift{0};
  int conflict_code = exit_code::not_acquired;
  int lost_code = exit_code::lost;
  std::vector<std::string> argv;
};

RunSettings parse_settings(Context& ctx, const Args& args) {
  static const std::vector<OptionSpec> specs = [] {
    std::vector<OptionSpec> v = {
        {"--wait", 0, true},  {"--no-wait", 0, false}, {"--ttl", 0, true},
        {"--grace", 0, true}, {"--conflict-exit-code", 0, true}, {"--lost-exit-code", 0, true},
        {"--replicas", 0, true},
    };
    v.insert(v.end(), lock_spec_options().begin(), lock_spec_options().end());
    return v;
  }();
  ParsedArgs a = ctx.parse(args, specs, /*command_after=*/1);
  RunSettings s;
  if (a.positionals.empty()) throw UsageError("run needs a lock NAME and a command");
  s.name = a.positionals[0];
  check_lock_name(s.name);
  if (a.rest.empty()) throw UsageError("run needs a command after the lock name (dlock run NAME -- CMD...)");
  s.argv = a.rest;
  s.lock = parse_lock_spec(a);
  if (ctx.redlock() && s.lock.kind != Kind::mutex) {
    throw UsageError(std::string("--redlock holds a mutex (a Redlock); --kind ") + kind_text(s.lock.kind) +
                     " needs one deployment named with --redis");
  }
  if (auto k = replicas_option(a)) {
    if (ctx.redlock() && *k > 0) throw UsageError("--replicas is for --redis deployments; Redlock masters have no replicas");
    ctx.set_replication_ack(*k);
  }
  s.wait = wait_option(a);
  if (auto v = a.last("--ttl")) s.ttl = parse_ttl_arg("--ttl", *v);
  if (auto v = a.last("--grace")) s.grace = parse_ttl_arg("--grace", *v);
  if (auto v = a.last("--conflict-exit-code")) s.conflict_code = parse_exit_code_arg("--conflict-exit-code", *v);
  if (auto v = a.last("--lost-exit-code")) s.lost_code = parse_exit_code_arg("--lost-exit-code", *v);
  if (s.ttl.count() <= 0) throw UsageError("--ttl must be positive");
  const auto margin_of = [](milliseconds ttl) { return std::clamp<milliseconds>(ttl / 10, milliseconds(50), milliseconds(1000)); };
  const auto drift_of = [](milliseconds ttl) { return ttl / 100 + milliseconds(2); };  // the library's default allowance
  s.margin = margin_of(s.ttl);
  s.drift = drift_of(s.ttl);
  // Renewals must have room between "renewed" and "at risk": grace + margin must stay at least
  // one margin below the lease's validity. A TTL without room even for --grace 0 is the TTL's
  // fault, and said so ("--grace 0s must be shorter than --ttl 100ms (at most 0s)" was not).
  if (2 * s.margin + s.drift > s.ttl) {
    milliseconds least = s.ttl;
    while (2 * margin_of(least) + drift_of(least) > least) ++least;
    throw UsageError("--ttl " + dlock::format_duration(s.ttl) + " is too short for dlock run: at least " +
                     dlock::format_duration(least) + ", which leaves room for renewals and a safety margin of " +
                     dlock::format_duration(margin_of(least)) + " before the lease can end");
  }
  if (s.grace + 2 * s.margin + s.drift > s.ttl) {
    // Named as the default when it is one: "--grace 5s" in the message of a command line that
    // gave only --ttl sent the reader looking for an option they never passed.
    const bool given = a.last("--grace").has_value();
    throw UsageError(std::string(given ? "" : "the default ") + "--grace " + dlock::format_duration(s.grace) +
                     " must be shorter than --ttl " + dlock::format_duration(s.ttl) + " (at most " +
                     dlock::format_duration(std::max(milliseconds(0), s.ttl - 2 * s.margin - s.drift)) + ")" +
                     (given ? "" : ": give a shorter --grace, or a longer --ttl"));
  }
  return s;
}

// What `run` reports at the end: a line for people, or one JSON object as stderr's last line.
struct Report {
  std::string outcome;  // completed, lost, not_acquired, interrupted, exec_failed, error
  int exit_code = 0;
  std::optional<int> status;  // the command's status
  int signal = 0;             // the signal that ended the command, or interrupted the wait
  std::string owner;
  std::uint64_t token = 0;
  long long waited_ms = 0;
  std::optional<long long> held_ms;
  std::string message;
};

int finish(Context& ctx, const RunSettings& s, const Report& r) {
  if (ctx.json()) {
    Json j = ctx.begin_json(r.outcome == "completed");
    j.field("name", s.name).field("kind", kind_text(s.lock.kind));
    if (s.lock.kind == Kind::rw) j.field("mode", s.lock.read ? "read" : "write");
    if (s.lock.kind == Kind::semaphore) j.field("permits_taken", static_cast<long long>(s.lock.take));
    j.field("outcome", r.outcome).field("exit_code", r.exit_code);
    j.key("status").opt_num(r.status ? std::optional<long long>(*r.status) : std::nullopt);
    j.key("signal").num(static_cast<long long>(r.signal));
    j.key("owner").opt_str(r.owner.empty() ? std::nullopt : std::optional<std::string>(r.owner));
    j.key("fencing_token").num(r.token);
    j.field("waited_ms", r.waited_ms);
    j.key("held_ms").opt_num(r.held_ms);
    if (!r.message.empty()) j.field("message", r.message);
    ctx.print_json(j, /*to_stderr=*/true);
  } else if (!r.message.empty()) {
    ctx.note(r.message);
  }
  return r.exit_code;
}

enum class Stopping { no, at_risk, taken, expired };

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGKILL: return "SIGKILL";
    default: return "signal " + std::to_string(sig);
  }
}

// Watches the lease and the command until the command has ended; stops it before the lease
// can end. Returns why it was stopped (Stopping::no: it ended by itself).
Stopping supervise(Context& ctx, const RunSettings& s, dlock::Lease& lease, ChildCommand& child, SignalFd& signals,
                   EventPipe& events, bool& forwarded_interrupt) {
  // While the command has the terminal dlock is a background job: with `stty tostop` its own
  // notes (the lease at risk, taken away) would stop it by SIGTTOU just before it stops the
  // command. The command was started already, with the disposition dlock inherited.
  ::signal(SIGTTOU, SIG_IGN);
  Stopping why = Stopping::no;
  std::optional<Clock::time_point> kill_at;
  bool killed = false;
  const milliseconds stop_below = s.grace + s.margin;
  bool noted_leftovers = false;
  while (!child.poll()) {
    const auto now = Clock::now();
    if (!noted_leftovers && ctx.verbose() && child.group_outlives_leader()) {
      noted_leftovers = true;
      ctx.note("the command exited; lock '" + s.name + "' stays held until the processes it left running in its " +
               "process group have exited");
    }
    if (why == Stopping::no || why == Stopping::at_risk) {
      if (lease.lost()) {
        if (lease.loss_reason().value_or(dlock::LossReason::taken) == dlock::LossReason::taken) {
          if (why == Stopping::no) {
            ctx.note("lock '" + s.name + "' was taken away (its key was deleted or replaced, or force-unlocked); " +
                     "stopping the command: SIGTERM now, SIGKILL in " + dlock::format_duration(s.grace));
            child.signal_group(SIGTERM);
          }
          const auto by = now + s.grace;
          kill_at = kill_at ? std::min(*kill_at, by) : by;
          why = Stopping::taken;
        } else {
          ctx.note("the lease of lock '" + s.name + "' expired without renewal; killing the command");
          child.signal_group(SIGKILL);
          killed = true;
          why = Stopping::expired;
        }
      } else if (lease.held()) {
        const milliseconds left = lease.remaining();
        if (why == Stopping::no && left <= stop_below) {
          ctx.note("no renewal of lock '" + s.name + "' succeeded and only " + human_duration(left.count()) +
                   " of the lease is left; stopping the command: SIGTERM now, SIGKILL in " +
                   human_duration(std::max(milliseconds(0), left - s.margin).count()));
          child.signal_group(SIGTERM);
          why = Stopping::at_risk;
        }
        // SIGKILL at validity - margin; a renewal that succeeds meanwhile moves it later.
        if (why == Stopping::at_risk) kill_at = now + std::max(milliseconds(0), left - s.margin);
      }
    }
    if (kill_at && now >= *kill_at && !killed) {
      child.signal_group(SIGKILL);
      killed = true;
    }

    milliseconds timeout(1000);
    if (why == Stopping::no && lease.held()) {
      timeout = std::min(timeout, std::max(milliseconds(1), lease.remaining() - stop_below));
    }
    if (kill_at && !killed) {
      timeout = std::min(timeout, std::max(milliseconds(1), std::chrono::ceil<milliseconds>(*kill_at - now)));
    }
    bool sig_ready = false, event_ready = false;
    wait_readable(signals.fd(), events.fd(), static_cast<int>(timeout.count()), sig_ready, event_ready);
    if (sig_ready) {
      while (int sig = signals.take()) {
        if (sig == SIGTSTP || sig == SIGTTIN) {
          // dlock's group has the terminal, the command's does not (a `fg` after `bg`), or the
          // signal came from elsewhere: the command stops with dlock, as Ctrl-Z stops a job.
          // Under job control its stop stops dlock (ChildCommand::poll); without, dlock stops
          // here and continues it when continued itself. Either way only once the whole group
          // is stopped: a member that ignores SIGTSTP is stopped by SIGSTOP, or dlock does not
          // stop (its watchdog must renew while anything of the command runs).
          child.signal_group(sig);
          if (!child.job_control()) child.stop_with_dlock([sig] { stop_as_by(sig); });
        } else if (sig == SIGCONT) {
          child.continued();  // a `fg` after `bg`: the command gets the terminal
        } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
          if (ctx.verbose()) ctx.note("forwarding " + signal_name(sig) + " to the command");
          if (sig == SIGINT) forwarded_interrupt = true;
          child.signal_group(sig);
          // A stopped member of the group (SIGSTOP, or SIGTTIN on a read from the terminal)
          // would keep the signal pending and the lock held for ever: continued, as a shell's
          // `kill %job` continues the job.
          child.signal_group(SIGCONT);
        }
      }
    }
    if (event_ready) events.drain();  // on_lost / on_at_risk: just wake up and look again
  }
  return why;
}

// The final release runs on a thread of its own while this thread keeps listening for signals:
// a release blocks for up to the command timeout and is retried after a connection error, for
// seconds when the server is slow or gone, and SIGINT/SIGTERM/SIGHUP must still end dlock then
// (the key expires at its TTL). Returns nullopt when such a signal came first (`sig`); the caller
// must then exit at once, as the release thread still uses `lease`.
std::optional<dlock::Result<void>> release_unless_signalled(dlock::Lease& lease, SignalFd& signals, int& sig) {
  struct Outcome {
    EventPipe done;
    std::mutex mu;
    std::optional<dlock::Result<void>> result;
  };
  auto outcome = std::make_shared<Outcome>();
  std::thread releaser([outcome, &lease] {
    auto r = lease.release();
    {
      std::lock_guard lock(outcome->mu);
      outcome->result.emplace(std::move(r));
    }
    outcome->done.notify('r');
  });
  for (;;) {
    bool sig_ready = false, done = false;
    wait_readable(signals.fd(), outcome->done.fd(), -1, sig_ready, done);
    if (done) {
      releaser.join();
      std::lock_guard lock(outcome->mu);
      return std::move(outcome->result);
    }
    while (int s = sig_ready ? signals.take() : 0) {
      if (s == SIGTSTP || s == SIGTTIN) stop_as_by(s);
      if (s == SIGINT || s == SIGTERM || s == SIGHUP) {
        sig = s;
        releaser.detach();
        return std::nullopt;
      }
    }
  }
}

// Waits, for at most the validity the lease has left now, for the watchdog's renewal to restore
// it to more than `needed`. A lease that came back short is due for renewal at once (its first
// renewal counts from the acquire's send), as is a FairLock handover's, whose lease counts from
// the waiter's last try. The bound is fixed on entry: renewals that keep the lease held but each
// come back short (round trips longer than the room between `needed` and the validity) would
// otherwise keep it waiting for ever. Looks at the lease every 10 ms: a read of local state,
// nothing is sent. False when that time is up or the lease is no longer held, or on
// SIGINT/SIGTERM/SIGHUP (then `sig` is set).
bool await_renewal(const dlock::Lease& lease, milliseconds needed, SignalFd& signals, int& sig) {
  const auto until = dlock::BootClock::now() + lease.remaining();
  for (;;) {
    if (!lease.held() || dlock::BootClock::now() >= until) return false;
    if (lease.remaining() > needed) return true;
    bool sig_ready = false, unused = false;
    wait_readable(signals.fd(), -1, 10, sig_ready, unused);
    while (int got = sig_ready ? signals.take() : 0) {
      if (got == SIGTSTP || got == SIGTTIN) stop_as_by(got);
      if (got == SIGINT || got == SIGTERM || got == SIGHUP) {
        sig = got;
        return false;
      }
    }
  }
}

// The lease's validity is counted from the acquire's send, so it is less than the TTL by however
// long the reply took and however long dlock was paused since (SIGSTOP, a suspended VM, an
// overloaded machine). When that leaves no more than grace + margin, supervise() would tell the
// command to stop as soon as it started; when none is left, the command would run unprotected
// until supervise() first looked. A lease short of that waits for the watchdog's renewal (not
// extend(), which would set the library's default renewal timings in place of run's own), for
// at most the validity it has left; short still, the command is not started at all, and a lock
// still held is given back. Exits 70 (--lost-exit-code), as a loss does, not 75: the lock was
// ours but is not safely held any more, and --conflict-exit-code 0 ("another host does the
// work") must not skip a run nobody made. Returns nullopt when the lease leaves room to start
// the command.
std::optional<int> refuse_short_lease(Context& ctx, const RunSettings& s, dlock::Lease& lease, SignalFd& signals,
                                      Report& report) {
  const milliseconds needed = s.grace + s.margin;
  if (lease.held() && lease.remaining() > needed) return std::nullopt;
  int sig = 0;
  if (await_renewal(lease, needed, signals, sig)) return std::nullopt;
  if (sig != 0) {
    report.outcome = "interrupted";
    report.signal = sig;
    report.exit_code = 128 + sig;
    report.message = "interrupted by " + signal_name(sig) + " before the command started (lock '" + s.name +
                     "' came back with too little of its lease left, and was waiting for its renewal)";
    if (lease.held()) {
      int again = 0;
      if (!release_unless_signalled(lease, signals, again)) report.message += "; its key expires at its TTL";
    }
    finish(ctx, s, report);
    Context::exit_now(report.exit_code);
  }
  report.outcome = "lost";
  report.exit_code = s.lost_code;
  report.message = "lock '" + s.name + "' was acquired with no more than --grace + margin (" +
                   human_duration(needed.count()) + ") of its lease left, and no renewal restored more in time: " +
                   "its reply came late, or dlock was paused; the command was not started";
  if (lease.held()) {
    // Renewed, but each time short: given back (interruptibly).
    int again = 0;
    if (!release_unless_signalled(lease, signals, again)) {
      report.outcome = "interrupted";
      report.signal = again;
      report.exit_code = 128 + again;
      report.message += "; interrupted by " + signal_name(again) + " while releasing it (its key expires at its TTL)";
    }
  }
  // Run out or lost: no release from here (it could block on a server that is gone); the key
  // expires at its TTL, unless the watchdog's own release of an expired lease gets out first.
  finish(ctx, s, report);
  Context::exit_now(report.exit_code);
}

}  // namespace

int cmd_run(Context& ctx, const Args& args) {
  const RunSettings s = parse_settings(ctx, args);
  Report report;

  // Before the lock: a command that cannot run should not make others wait.
  const ProgramLookup program = find_program(s.argv[0]);
  if (program.exit_code != 0) {
    report.outcome = "exec_failed";
    report.exit_code = program.exit_code;
    report.message = program.error;
    return finish(ctx, s, report);
  }

  // Signals are blocked before the Client's thread exists, so only the signalfd receives them.
  // SIGTSTP and SIGCONT too: Ctrl-Z that reaches dlock rather than the command (dlock has the
  // terminal after a `fg` that followed a `bg`) must stop the command, not only dlock and its
  // watchdog; and that `fg` must hand the command the terminal (supervise).
  // SIGTTIN as well: its default action would stop dlock alone, its watchdog with it, while the
  // command runs on.
  SignalFd signals({SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGTSTP, SIGTTIN, SIGCONT});
  auto events = std::make_shared<EventPipe>();

  dlock::LeaseOptions lo;
  lo.mode = dlock::LeaseMode::watchdog;
  lo.ttl = s.ttl;
  lo.drift_allowance = s.drift;
  const milliseconds window = s.ttl - s.drift - s.grace - s.margin;  // >= margin (checked)
  lo.renew_interval = std::max(milliseconds(1), std::min(s.ttl / 3, window / 2));
  lo.at_risk_margin = s.grace + s.margin;
  // A forced unlock (`dlock unlock --force`) stops the command at once, not at the next renewal.
  lo.listen_for_revocation = true;
  lo.events.on_lost = [events](dlock::LossReason why) {
    events->notify(why == dlock::LossReason::taken ? 't' : 'e');
  };
  lo.events.on_at_risk = [events](milliseconds) { events->notify('r'); };

  LockTarget target = ctx.redlock() ? LockTarget(ctx.redlock_nodes(), s.name, s.lock, lo)
                                    : LockTarget(ctx.client(), s.name, s.lock, lo);
  std::optional<std::size_t> resized_from;
  if (auto ready = target.prepare(resized_from); !ready) {
    report.exit_code = ready.code() == dlock::errc::invalid_argument ? exit_code::usage
                                                                      : exit_code_for(ready.code(), Phase::acquiring);
    report.outcome = "error";
    report.message = ready.error().what();
    return finish(ctx, s, report);
  }
  if (resized_from) {
    ctx.note("semaphore '" + s.name + "' had " + std::to_string(*resized_from) + " permits; set to " +
             std::to_string(*s.lock.permits) + " (--permits is the semaphore's size)");
  }
  WaitOutcome w = wait_for_lock(ctx, target, s.wait, signals);
  report.waited_ms = w.waited.count();
  if (w.signal != 0) {
    report.outcome = "interrupted";
    report.signal = w.signal;
    report.exit_code = 128 + w.signal;
    report.message = "interrupted by " + signal_name(w.signal) + " while waiting for lock '" + s.name +
                     "'; " + held_after_signal(w);
    return finish(ctx, s, report);
  }
  if (!w.lease) {
    report.exit_code = exit_code_for(w.error.code, Phase::acquiring);
    report.outcome = report.exit_code == exit_code::not_acquired ? "not_acquired" : "error";
    if (report.exit_code == exit_code::not_acquired) report.exit_code = s.conflict_code;
    report.message = w.error.what();
    return finish(ctx, s, report);
  }
  dlock::Lease& lease = *w.lease;
  report.owner = lease.owner();
  report.token = lease.token().value;
  if (auto refused = refuse_short_lease(ctx, s, lease, signals, report)) return *refused;
  if (ctx.verbose()) {
    ctx.note("acquired " + describe_spec(s.lock) + " lock '" + s.name + "' (fencing token " + std::to_string(report.token) + ") after " +
             human_duration(w.waited.count()) + "; running " + s.argv[0]);
  }

  ChildCommand child;
  std::string error;
  const auto started = Clock::now();
  const int exec_code = child.start(program.path, s.argv,
                                    {{"DLOCK_NAME", s.name},
                                     {"DLOCK_KIND", kind_text(s.lock.kind)},
                                     {"DLOCK_FENCING_TOKEN", std::to_string(report.token)},
                                     {"DLOCK_OWNER", lease.owner()}},
                                    error);
  if (exec_code != 0) {
    (void)lease.release();
    report.outcome = "exec_failed";
    report.exit_code = exec_code;
    report.message = error;
    return finish(ctx, s, report);
  }

  // Ctrl-Z stops dlock with the command, watchdog and all: on `fg` the command is continued
  // only if the lease still has more than the margin left.
  child.set_resume_check([&lease, &s] { return lease.held() && lease.remaining() > s.margin; });
  child.set_note([&ctx](const std::string& line) { ctx.note(line); });
  bool forwarded_interrupt = false;  // a SIGINT sent to dlock, not the terminal's to the command
  const Stopping why = supervise(ctx, s, lease, child, signals, *events, forwarded_interrupt);
  report.status = child.poll();
  report.signal = child.term_signal();
  report.held_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - started).count();

  if (child.killed_on_resume()) {
    report.outcome = "lost";
    report.exit_code = s.lost_code;
    report.message = "the command was killed instead of continued: it was stopped, and dlock with it (no renewals), "
                     "until lock '" + s.name + "' had " + dlock::format_duration(s.margin) +
                     " of its lease or less left; another holder may have it now";
    // Whatever is left of the lease expires by itself; a release could block on a lost server.
    finish(ctx, s, report);
    Context::exit_now(report.exit_code);
  }

  if (why != Stopping::no) {
    child.signal_group(SIGKILL);  // nothing of the command's group may run on unprotected
    report.outcome = "lost";
    report.exit_code = s.lost_code;
    // What became of the command: killed or ended by the SIGTERM, or (ignoring it) finished.
    const std::string ended = report.signal != 0 ? "it ended by " + signal_name(report.signal)
                              : report.status ? "it exited with status " + std::to_string(*report.status)
                                              : "it ended";
    const bool recovered = lease.held() && lease.remaining() > s.grace + s.margin;
    report.message = why == Stopping::at_risk
                         ? "the command was told to stop because lock '" + s.name + "' could not be renewed (" +
                               ended + ")" + (recovered ? "; renewals recovered after that" : "")
                         : "the command was stopped because lock '" + s.name + "' was lost (" + ended + ")";
    if (recovered) {
      (void)lease.release();  // renewals recovered after all: give the lock back now
    } else if (lease.held() || lease.loss_reason() == dlock::LossReason::expired) {
      // The server may be unreachable: a release could block; the key expires at its TTL.
      finish(ctx, s, report);
      Context::exit_now(report.exit_code);
    }
    return finish(ctx, s, report);
  }

  int sig = 0;
  auto outcome = release_unless_signalled(lease, signals, sig);
  if (!outcome) {
    report.outcome = "interrupted";
    report.signal = sig;
    report.exit_code = 128 + sig;
    report.message = "interrupted by " + signal_name(sig) + " while releasing lock '" + s.name +
                     "' (the command had finished); its key expires at its TTL";
    finish(ctx, s, report);
    Context::exit_now(report.exit_code);
  }
  auto released = std::move(*outcome);
  if (!released && released.code() == dlock::errc::lock_lost) {
    report.outcome = "lost";
    report.exit_code = s.lost_code;
    report.message = "the command finished, but lock '" + s.name +
                     "' was no longer held at release (expired or taken over while it ran)";
    return finish(ctx, s, report);
  }
  if (!released) ctx.note("warning: " + released.error().what());
  report.outcome = "completed";
  report.exit_code = *report.status;
  const int code = finish(ctx, s, report);
  // Ctrl-C reached only the command, which had the terminal: had dlock kept it, the signal
  // would have ended dlock's whole job (or the script it runs in) as well. Passed on, now that
  // the lock is released, so that a shell loop or script stops here as with flock(1); exiting
  // 130 let the next iteration run.
  if (child.ended_by_terminal_signal() && !forwarded_interrupt) end_as_the_terminal_would(child.term_signal());
  return code;
}

}  // namespace dlock::cli
