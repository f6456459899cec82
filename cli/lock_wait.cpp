#include "lock_wait.hpp"


#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/clock.hpp"
#include "lock_view.hpp"
#include "lua_scripts.hpp"
#include "owner_token.hpp"

namespace dlock::cli {

namespace {

using std::chrono::milliseconds;

long long ms_since(dlock::BootClock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(dlock::BootClock::now() - t).count();
}

struct Pending {
  std::mutex mu;
  std::optional<dlock::Result<dlock::Lease>> result;
  EventPipe done;  // 'a': the acquire's result is in; 's': an answer for the status line
};

// One line on stderr about the wait: updated in place on a terminal, or (with -v and no
// terminal) printed again whenever the holder changes. What it shows comes from
// dlock::async_inspect, so the wait's loop never blocks on it: a slow or silent server (with
// --redlock, the first master, which is the one asked) delays neither a signal nor the lock's
// arrival. While an answer is out for a second or more, the line says so.
class StatusLine {
 public:
  StatusLine(Context& ctx, const LockTarget& target, std::shared_ptr<Pending> wake)
      : ctx_(ctx),
        target_(target),
        wake_(std::move(wake)),
        tty_(::isatty(STDERR_FILENO) == 1),
        enabled_(!ctx.json() && (tty_ || ctx.verbose())) {}
  ~StatusLine() { clear(); }

  bool enabled() const { return enabled_; }

  // Called every second or so while the wait goes on: asks the server again unless an answer is
  // still out, and redraws (on a terminal, or to say that the server is silent).
  void tick(dlock::BootClock::time_point started) {
    if (!enabled_) return;
    bool ask = false;
    {
      std::lock_guard lock(asked_->mu);
      if (!asked_->out) {
        asked_->out = true;
        asked_->since = dlock::BootClock::now();
        ask = true;
      }
    }
    if (ask) {
      // Any kind: what dlock::inspect finds (the first holder, and how many there are). On the
      // Client's event loop: store, wake the main thread, never block.
      dlock::async_inspect(ctx_.client(), target_.name(),
                           [asked = asked_, wake = wake_](dlock::Result<dlock::LockInfo> r) {
                             {
                               std::lock_guard lock(asked->mu);
                               asked->info.emplace(std::move(r));
                               asked->out = false;
                             }
                             wake->done.notify('s');
                           });
    }
    draw(started, /*answered=*/false);
  }

  // An answer came in (the wake pipe said 's').
  void answered(dlock::BootClock::time_point started) {
    if (enabled_) draw(started, /*answered=*/true);
  }

  void clear() {
    if (shown_) std::fputs("\r\033[K", stderr);
    shown_ = false;
  }

 private:
  struct Asked {
    std::mutex mu;
    bool out = false;                      // an async_inspect is out
    dlock::BootClock::time_point since{};  // ... since then
    std::optional<dlock::Result<dlock::LockInfo>> info;  // the latest answer
  };

  void draw(dlock::BootClock::time_point started, bool answered) {
    std::optional<dlock::Result<dlock::LockInfo>> info;
    long long silent_ms = 0;
    {
      std::lock_guard lock(asked_->mu);
      info = asked_->info;
      if (asked_->out) silent_ms = ms_since(asked_->since);
    }
    const bool silent = silent_ms >= 1000;
    // Without a terminal a line is printed for an answer or for a silence, never for a tick alone.
    if (!tty_ && !answered && !(silent && !silence_printed_)) return;
    std::string text = "dlock: waiting for " + describe_spec(target_.spec()) + " lock '" + target_.name() + "'";
    std::string holder_token;
    if (info && info->ok() && (*info)->held()) {
      const dlock::LockHolder& h = (*info)->holders.front();
      holder_token = h.owner;
      const auto who = holder_info(h.owner);
      text += ": held by " + describe_holder(who);
      if ((*info)->holders.size() > 1) text += " and " + std::to_string((*info)->holders.size() - 1) + " more";
      if (who && who->since_unix_ms) text += " for " + human_duration(held_for_ms(*who->since_unix_ms));
      if (h.ttl) text += ", expires in " + human_duration(h.ttl->count());
      else text += ", never expires (a leak? see 'dlock leaks')";
    } else if (info && !info->ok()) {
      text += " (" + info->error().what() + ")";
    }
    if (silent) text += " (no answer from " + ctx_.client().address().display() + " for " + human_duration(silent_ms) + ")";
    text += "; waited " + human_duration(ms_since(started));
    if (tty_) {
      std::fputs(("\r\033[K" + text).c_str(), stderr);
      shown_ = true;
    } else if (!printed_once_ || holder_token != last_holder_ || (silent && !silence_printed_)) {
      std::fputs((text + "\n").c_str(), stderr);
      printed_once_ = true;
    }
    std::fflush(stderr);
    silence_printed_ = silent;
    if (answered) last_holder_ = holder_token;
  }

  Context& ctx_;
  const LockTarget& target_;
  std::shared_ptr<Pending> wake_;
  std::shared_ptr<Asked> asked_ = std::make_shared<Asked>();  // outlives this line: a late answer lands here
  bool tty_;
  bool enabled_;
  bool shown_ = false;
  bool printed_once_ = false;
  bool silence_printed_ = false;
  std::string last_holder_;
};

// A cancelled acquire whose try is in flight waits for that try's answer (within the command
// timeout) and gives back a lock it took, but the release itself is not awaited, and the CLI
// is about to exit. Replies on one connection come in order, so after one round trip on the
// lock's own connection the try's reply has been handled (and any release of it queued), and
// after a second one, sent then, that release has been answered. A command on the lock's key
// (EXISTS) is routed as the lock's scripts are: to its Cluster primary, on the connection its
// slot picks. Without this, a SIGTERM racing a release left the lock taken until its TTL.
// Bounded like lock_seen (a second, or the command timeout if shorter): a server that does not
// answer cannot be settled with, and a signal must not wait a command timeout for it twice.
// True when both round trips were answered. --redlock: settle_cancelled_redlock.
bool settle_cancelled_attempt(dlock::Client& client, const std::string& key) {
  struct Settled {
    std::mutex mu;
    std::condition_variable cv;
    int answered = 0;
    bool failed = false;
  };
  auto settled = std::make_shared<Settled>();  // outlives this call: late replies land here
  auto on_reply = [settled](const dlock::Result<dlock::Reply>& r) {
    {
      std::lock_guard lock(settled->mu);
      if (r.ok()) ++settled->answered;
      else settled->failed = true;
    }
    settled->cv.notify_all();
  };
  client.async_command({"EXISTS", key}, [&client, key, settled, on_reply](dlock::Result<dlock::Reply> r) {
    on_reply(r);
    if (r.ok()) client.async_command({"EXISTS", key}, on_reply);  // on the loop thread: never blocks
  });
  const milliseconds bound = std::min(milliseconds(1000), client.options().command_timeout);
  std::unique_lock lock(settled->mu);
  settled->cv.wait_for(lock, bound, [&] { return settled->answered == 2 || settled->failed; });
  return settled->answered == 2;
}

// The same for --redlock. A Redlock try's answers come from every master and its late win is
// released from the first master's event loop after hand-overs between the Clients' loops, which
// no pair of round trips on one connection puts in order. So each master is asked directly
// whether it still holds a key of this process, and asked again (every 5 ms) until it does not:
// the question goes on the lock's connection to that master, behind the try's acquire there, so
// a "no" means the try never took it there or its release has run. Bounded like the others.
// True when every master said "no" in time.
bool settle_cancelled_redlock(const std::vector<dlock::Client*>& nodes, const std::string& key) {
  struct Round {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t answered = 0;
    std::vector<bool> clear;
  };
  const std::string mine = "@" + nodes.front()->owner_identity() + ":";
  const milliseconds bound = std::min(milliseconds(1000), nodes.front()->options().command_timeout);
  const auto until = std::chrono::steady_clock::now() + bound;
  std::vector<bool> clear(nodes.size(), false);
  for (;;) {
    auto round = std::make_shared<Round>();  // outlives this call: late replies land here
    round->clear.assign(nodes.size(), false);
    std::size_t asked = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (clear[i]) continue;
      ++asked;
      nodes[i]->async_command({"EVAL", lua::held_by_this_process, "1", key, mine},
                              [round, i](dlock::Result<dlock::Reply> r) {
                                {
                                  std::lock_guard lock(round->mu);
                                  ++round->answered;
                                  round->clear[i] = r.ok() && r->is_integer() && r->integer() == 0;
                                }
                                round->cv.notify_all();
                              });
    }
    {
      std::unique_lock lock(round->mu);
      round->cv.wait_until(lock, until, [&] { return round->answered == asked; });
      for (std::size_t i = 0; i < nodes.size(); ++i) clear[i] = clear[i] || round->clear[i];
    }
    if (std::all_of(clear.begin(), clear.end(), [](bool c) { return c; })) return true;
    if (std::chrono::steady_clock::now() + milliseconds(5) >= until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// Whether the lock's server shows it taken by someone else, within a second (the command
// timeout, if shorter): on a Cluster the primary of the lock's slot (the script names the lock's
// keys, so it is routed there), with --redlock a majority of the masters. A reply counts when
// the lock's keys name an owner other than this process (lua::held_by_others), or when it is an
// error reply (NOPERM, LOADING: the server is there but cannot tell). A connection error, a
// timeout or "free" does not: a server that stalled through the end of the wait and recovered
// just after it shows a free lock, or one taken by this process's own late try (that try was
// queued ahead on the same connection), neither of which is "busy". The answer is given as soon
// as it is known: enough "taken" replies, or so many "free" ones that a majority is out of reach
// (a free lock does not cost the whole second).
// taken: a majority saw another holder; free: a majority saw none; out_of_reach: too few can
// still say "taken" (an even number of Redlock masters split, or some silent); no_answer.
enum class Seen { taken, free, out_of_reach, no_answer };

Seen lock_seen(Context& ctx, const std::string& name) {
  std::vector<dlock::Client*> nodes;
  if (ctx.redlock()) nodes = ctx.redlock_nodes();
  else nodes.push_back(&ctx.client());
  const milliseconds bound = std::min(milliseconds(1000), nodes.front()->options().command_timeout);
  const std::size_t needed = nodes.size() / 2 + 1;
  struct Answers {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t taken = 0;
    std::size_t free = 0;
  };
  auto answers = std::make_shared<Answers>();  // outlives this call: late replies land here
  const std::string key = ctx.globals().prefix + "{" + name + "}";
  const std::string mine = "@" + nodes.front()->owner_identity();
  for (dlock::Client* c : nodes) {
    c->async_command({"EVAL", lua::held_by_others, "4", key, key + ":readers", key + ":wintent", key + ":permits",
                      mine},
                     [answers](dlock::Result<dlock::Reply> r) {
                       if (!r.ok() && (r.code() == dlock::errc::connection || r.code() == dlock::errc::timeout ||
                                       r.code() == dlock::errc::shutdown)) {
                         return;  // no answer: the bound decides
                       }
                       const bool free = r.ok() && r->is_integer() && r->integer() == 0;
                       {
                         std::lock_guard lock(answers->mu);
                         ++(free ? answers->free : answers->taken);
                       }
                       answers->cv.notify_all();
                     });
  }
  std::unique_lock lock(answers->mu);
  answers->cv.wait_for(lock, bound,
                       [&] { return answers->taken >= needed || answers->free > nodes.size() - needed; });
  if (answers->taken >= needed) return Seen::taken;
  if (answers->free >= needed) return Seen::free;
  return answers->free > nodes.size() - needed ? Seen::out_of_reach : Seen::no_answer;
}

}  // namespace

std::optional<milliseconds> wait_option(const ParsedArgs& a) {
  std::optional<milliseconds> wait;
  const char* given = nullptr;  // the first of the two options seen
  for (const auto& [name, value] : a.options) {
    if (name != "--no-wait" && name != "--wait") continue;
    // "--wait 10s --no-wait" is a script or alias fighting itself: which one wins is a guess.
    if (given != nullptr && name != given) throw UsageError("--wait and --no-wait cannot be used together");
    given = name == "--wait" ? "--wait" : "--no-wait";
    wait = name == "--wait" ? parse_duration_arg("--wait", value) : milliseconds(0);
  }
  return wait;
}

WaitOutcome wait_for_lock(Context& ctx, LockTarget& target, std::optional<milliseconds> wait, SignalFd& signals) {
  WaitOutcome out;
  const auto started = dlock::BootClock::now();
  auto pending = std::make_shared<Pending>();
  std::stop_source stop;
  target.async_acquire(
      dlock::WaitOptions{wait, milliseconds(500)},
      [pending](dlock::Result<dlock::Lease> r) {
        // On the Client's event-loop thread: hand over and wake the main thread; never block.
        {
          std::lock_guard lock(pending->mu);
          pending->result.emplace(std::move(r));
        }
        pending->done.notify('a');
      },
      stop.get_token());

  StatusLine status(ctx, target, pending);
  int first_status_ms = 300;  // a lock taken at once never shows a status line
  for (;;) {
    bool sig_ready = false, done_ready = false;
    const int timeout = status.enabled() && out.signal == 0 ? first_status_ms : -1;
    wait_readable(signals.fd(), pending->done.fd(), timeout, sig_ready, done_ready);
    if (sig_ready) {
      while (int s = signals.take()) {
        if (s == SIGTSTP || s == SIGTTIN) stop_as_by(s);  // Ctrl-Z while waiting: the wait goes on after `fg`
        if ((s == SIGINT || s == SIGTERM || s == SIGHUP) && out.signal == 0) {
          out.signal = s;
          stop.request_stop();  // the acquire ends with errc::cancelled (or, racing, a lease)
        }
      }
    }
    if (done_ready) {
      const std::string events = pending->done.drain();
      if (events.find('s') != std::string::npos) status.answered(started);
      std::lock_guard lock(pending->mu);
      if (pending->result) break;
    }
    if (!sig_ready && !done_ready) {
      status.tick(started);
      first_status_ms = 1000;
    }
  }
  status.clear();
  out.waited = milliseconds(ms_since(started));
  dlock::Result<dlock::Lease> r = std::move(*pending->result);
  if (r.ok()) {
    if (out.signal != 0) {
      (void)r->release();  // taken just as the signal came: give it back before leaving
      return out;
    }
    out.lease.emplace(std::move(*r));
  } else {
    out.error = r.error();
    // errc::timeout is either "the wait ran out" or "a command got no reply within the command
    // timeout": a server that accepts connections but does not answer. Only the first means the
    // lock is taken (exit 75, which --conflict-exit-code may even turn into success); a timeout
    // before the wait's end is the server's silence, reported as unreachable (69).
    // A wait that ran out while its last try was still out (a server paused or cut off since
    // its previous try) is told apart by asking the server(s) once more, for at most a second,
    // whether the lock is taken: a busy lock's exit costs one round trip more, a silent
    // server's up to that second; a free lock (the try was lost to a stall) is not "busy".
    if (out.error.code == dlock::errc::timeout && out.signal == 0) {
      const bool wait_ran_out = wait && wait->count() > 0 && out.waited + milliseconds(5) >= *wait;
      const Seen seen = wait_ran_out ? lock_seen(ctx, target.name()) : Seen::no_answer;
      if (seen == Seen::free) {
        // The try in flight at the deadline was abandoned (a wait shorter than a round trip, or
        // a server that stalled at its end), and the lock is free: one more try, awaited, as
        // --no-wait does, so that a wait never does worse than no wait. `--wait 1ms` on a free
        // lock exited 69, "the server stalled".
        WaitOutcome again = wait_for_lock(ctx, target, milliseconds(0), signals);
        again.waited = milliseconds(ms_since(started));
        return again;
      }
      if (seen == Seen::out_of_reach) {
        out.error = dlock::Error(dlock::errc::connection,
                                 out.error.what() + " (the servers stalled through the end of the wait; when they " +
                                     "answered again no majority of them saw the lock taken)");
      } else if (seen == Seen::no_answer) {
        out.error = dlock::Error(dlock::errc::connection,
                                 out.error.what() + " (the server did not answer: the lock's state is unknown)");
      }
    }
    // not_replicated: the library took the lock, then released it (fail closed) before it
    // reported; the same round trips are a cheap backstop for that release.
    if (out.signal != 0 || out.error.code == dlock::errc::not_replicated) {
      const bool settled = ctx.redlock() ? settle_cancelled_redlock(ctx.redlock_nodes(), ctx.key(target.name()))
                                         : settle_cancelled_attempt(ctx.client(), ctx.key(target.name()));
      out.unsettled = !settled && out.signal != 0;
    }
  }
  return out;
}

std::string held_after_signal(const WaitOutcome& w) {
  if (!w.unsettled) return "nothing is held";
  return "nothing was acquired, but the server did not answer in time: a try still in flight may have taken "
         "the lock, which then expires at its TTL";
}

}  // namespace dlock::cli
