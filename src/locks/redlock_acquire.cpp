#include "locks/redlock_acquire.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"  // release_unwanted
#include "locks/hold_back.hpp"
#include "locks/redlock_turns.hpp"
#include "util/jitter_rng.hpp"
#include "util/names.hpp"

namespace dlock::detail {

namespace {

using Clock = BootClock;

class RedlockWaitOp final : public RedlockTurns::Waiter, public std::enable_shared_from_this<RedlockWaitOp> {
 public:
  RedlockWaitOp(std::shared_ptr<const RedlockSpec> spec, WaitOptions wait, std::function<void(Result<Lease>)> done,
                std::function<void()> on_wait)
      : spec_(std::move(spec)),
        home_(spec_->nodes.cores.front()),
        wait_(normalize_wait(wait)),
        what_("Redlock '" + spec_->name + "'"),
        done_(std::move(done)),
        on_wait_(std::move(on_wait)),
        timer_(home_->io()),
        deadline_timer_(home_->io()) {
    single_ = wait_.timeout && wait_.timeout->count() <= 0;
    if (wait_.timeout && !single_) deadline_ = Clock::now() + *wait_.timeout;
  }

  // Ends the wait when `stop` is requested. The callback only posts to the home loop.
  void watch(std::stop_token stop) {
    stop_ = stop;
    stop_cb_.emplace(std::move(stop), std::function<void()>([home = home_, weak = weak_from_this()] {
                       home->post([weak] {
                         if (auto op = weak.lock()) op->cancel();
                       });
                     }));
  }

  void start() {
    started_ = true;
    if (cancel_pending_) return cancel();
    if (home_->is_shut_down()) return deliver(Error(errc::shutdown, "client " + home_->where() + " is shut down"));
    // Shutdown of the home Client reaches this wait through its hook: its timers stop with it.
    shutdown_hook_ = home_->add_shutdown_hook([weak = weak_from_this()](const Error& why, std::function<void()> cleaned_up) {
      if (auto self = weak.lock()) self->give_up(why);
      if (cleaned_up) cleaned_up();
    });
    if (single_) return try_now();
    if (deadline_) {
      deadline_timer_.expires_at(*deadline_);
      deadline_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
        if (!ec) self->give_up(self->deadline_error());
      });
    }
    turns_ = RedlockTurns::of(home_.get(), spec_->key);
    if (turns_->push(shared_from_this())) return on_head();
    parked();  // queued behind another waiter of this process
  }

  // --- From the queue (RedlockTurns), on the home loop ---
  void on_head() override {
    if (finished_) return;
    after_holder_ = turns_->take_after_holder(handover_generation_);
    handover_pending_ = after_holder_;
    step();
  }

  void on_wake() override {
    if (finished_) return;
    if (sleep_ == Sleep::for_try) {
      stop_sleeping();
      step();
    } else if (sleep_ == Sleep::for_handover) {
      stop_sleeping();
      hold_back();
    }
  }

  // Also cuts a try's sleep short: a head whose subscription sleep ran out (or that took over
  // from one that left) tried before every node confirmed, and a release announced before the
  // confirmation was not heard.
  void on_subscribed() override {
    if (finished_ || (sleep_ != Sleep::for_subscription && sleep_ != Sleep::for_try)) return;
    stop_sleeping();
    step();
  }

 private:
  enum class Sleep {
    none,
    for_try,           // until a wake-up or the timer, then a try
    for_handover,      // our predecessor here holds the lock: until its release, then hold_back()
    pause,             // deaf to wake-ups until the timer
    for_subscription,  // until every node answered the SUBSCRIBE, or the timer
  };

  // A stop callback that ran before start() (the stop was requested before the call, or while
  // watch() registered it) only marks the wait: until start(), the caller's thread may still be
  // inside watch(), and deliver() must not destroy the callback under it.
  void cancel() {
    if (!started_) {
      cancel_pending_ = true;
      return;
    }
    give_up(Error(errc::cancelled, (single_ ? "acquiring " : "waiting for ") + what_ + " was cancelled"));
  }

  Error deadline_error() const {
    if (try_in_flight_) return Error(errc::timeout, "timed out waiting for " + what_ + " (its last try was still unanswered)");
    return Error(errc::timeout, "timed out waiting for " + what_);
  }

  // One round of the wait, as its head.
  void step() {
    if (finished_) return;
    if (home_->is_shut_down()) return give_up(Error(errc::shutdown, "client " + home_->where() + " is shut down"));
    const auto now = Clock::now();
    // A sleep, pause or turn that ended at the deadline ends the wait: a try sent now would be
    // given up at once, and if it won, released (a fencing token and a wake-up spent for nothing).
    if (deadline_ && now >= *deadline_) return give_up(deadline_error());
    // A head whose predecessor here just took the lock waits for its release instead of trying
    // (a try now could only fail), and then lets the waiters of other processes, woken by the
    // same release, try first (hold_back).
    if (std::exchange(after_holder_, false) && turns_->subscribed()) {
      if (turns_->generation() != handover_generation_) return hold_back();  // released already
      return sleep(Sleep::for_handover, now + jittered(wait_.recheck_interval));
    }
    try_now();
  }

  // Two heads trying at once on every node split the nodes between them, and a split costs both
  // a pause of milliseconds. So after a release within this process the head holds back for
  // hold_back_after_release() of its own tries' round trip: the price of a handoff within this
  // process when nobody else waits.
  void hold_back() {
    sleep(Sleep::pause, Clock::now() + hold_back_after_release(turns_->last_try_round_trip()));
  }

  void try_now() {
    handover_pending_ = false;
    try_in_flight_ = true;
    seen_generation_ = turns_ ? turns_->generation() : 0;
    sent_ = Clock::now();
    // An acquisition is always reported on the home loop (redlock_attempt.cpp hands the lease
    // to the home watchdog there); busy and failed tries on whichever node decided.
    redlock_try(spec_, [self = shared_from_this()](RedlockTry t) {
      if (self->home_->on_loop_thread()) return self->on_try(std::move(t));
      // Posted even when the home Client shuts down: its shutdown hook ends the wait only once
      // the shutdown reaches its loop, and dropping this answer before that dropped the wait
      // unanswered (a post after the loop ended runs here: ClientCore::post).
      self->home_->post([self, t = std::move(t)]() mutable { self->on_try(std::move(t)); });
    });
  }

  void on_try(RedlockTry t) {
    try_in_flight_ = false;
    if (finished_) {
      // Given up while this try was out: nobody will receive the lease.
      if (t.lease) release_unwanted(t.lease);
      return;
    }
    // The home Client shuts down and its hook has not run yet, or its loop has ended: no sleep
    // or subscription may start now (nothing would end it).
    if (home_->is_shut_down() && t.kind != RedlockTry::Kind::acquired) return step();
    const auto now = Clock::now();
    if (turns_) turns_->note_try_round_trip(now - sent_);
    switch (t.kind) {
      case RedlockTry::Kind::acquired:
        if (stop_.stop_requested()) {
          // Its cancel() is on its way: nobody will take this lease.
          release_unwanted(t.lease);
          return cancel();
        }
        return take(std::move(t.lease));
      case RedlockTry::Kind::failed:
        return finish(std::move(t.error));
      case RedlockTry::Kind::busy:
        break;
    }
    if (single_) return finish(Error(errc::busy, what_ + " is held by another owner"));
    if (deadline_ && now >= *deadline_) return give_up(deadline_error());
    if (!turns_->subscribed()) {
      // The first try went out before subscribing (a free lock costs one round trip); now that
      // it found the lock busy, the queue subscribes on every node and the head tries again once
      // they answered, so a release between the two tries cannot be missed.
      turns_->subscribe(spec_->nodes, spec_->key + ":ch");
      milliseconds bound{0};
      for (const auto& core : spec_->nodes.cores) bound = std::max(bound, core->options().command_timeout);
      return sleep(Sleep::for_subscription, now + bound);
    }
    if (t.split) {
      // Two contenders each took some nodes and both released: back off for a random moment,
      // deaf to their release notifications, so the next round is not split again.
      const auto pause = std::chrono::duration_cast<Clock::duration>(
          std::clamp(spec_->lease.ttl / 100, milliseconds(5), milliseconds(50)) * jitter_between(0.5, 1.5));
      return sleep(Sleep::pause, now + pause);
    }
    if (turns_->generation() != seen_generation_) return step();  // a release was announced during the try
    auto d = jittered(wait_.recheck_interval);
    // The holders' TTL bounds the wait: a crashed holder's keys expire without a notification.
    if (t.holder_ttl) d = std::min<Clock::duration>(d, *t.holder_ttl + milliseconds(1));
    // As in acquire_op.cpp (sleep): the last try goes out about one try's round trip before the
    // deadline; after that time the sleep runs to the deadline, and the wait ends there.
    Clock::time_point until = now + d;
    if (deadline_) {
      const auto last_try = *deadline_ - turns_->last_try_round_trip();
      until = std::min(until, last_try > now ? last_try : *deadline_);
    }
    sleep(Sleep::for_try, until);
  }

  static Clock::duration jittered(milliseconds d) {
    return std::chrono::duration_cast<Clock::duration>(d * jitter_between(0.8, 1.2));
  }

  void sleep(Sleep kind, Clock::time_point until) {
    parked();
    if (deadline_) until = std::min(until, *deadline_);
    sleep_ = kind;
    timer_.expires_at(until);
    // A timer that had fired already when a wake-up ended its sleep still runs its handler,
    // without an error; the epoch keeps it from ending the sleep that came next.
    timer_.async_wait([self = shared_from_this(), epoch = ++sleep_epoch_](std::error_code ec) {
      if (ec || epoch != self->sleep_epoch_ || self->sleep_ == Sleep::none || self->finished_) return;
      self->sleep_ = Sleep::none;
      self->step();
    });
  }

  void stop_sleeping() {
    sleep_ = Sleep::none;
    ++sleep_epoch_;
    timer_.cancel();
  }

  // The wait is of unknown length now: a blocking caller need not poll for its result any more.
  void parked() {
    if (on_wait_) std::exchange(on_wait_, {})();
  }

  void take(std::shared_ptr<LeaseRecord> lease) {
    finished_ = true;
    if (turns_) turns_->remove(this, true);
    deliver(Lease(std::move(lease)));
  }

  // Ends the wait now, without the lock. A try still out is not waited for: on_try releases
  // what it brings.
  void give_up(Error why) {
    if (finished_) return;
    finish(std::move(why));
  }

  void finish(Error why) {
    finished_ = true;
    stop_sleeping();
    if (turns_) turns_->remove(this, false, handover_pending_);
    deliver(std::move(why));
  }

  void deliver(Result<Lease> result) {
    if (delivered_) return;
    delivered_ = true;
    finished_ = true;
    stop_sleeping();
    deadline_timer_.cancel();
    on_wait_ = {};  // a blocking caller's pointer: not to be used once it has its result
    stop_cb_.reset();
    if (shutdown_hook_) home_->remove_shutdown_hook(shutdown_hook_);
    shutdown_hook_ = 0;
    auto done = std::move(done_);
    done(std::move(result));
  }

  std::shared_ptr<const RedlockSpec> spec_;
  std::shared_ptr<ClientCore> home_;
  WaitOptions wait_;
  std::string what_;
  std::function<void(Result<Lease>)> done_;
  std::function<void()> on_wait_;
  BootTimer timer_;           // every sleep and pause
  BootTimer deadline_timer_;  // the caller's deadline
  std::optional<Clock::time_point> deadline_;
  std::shared_ptr<RedlockTurns> turns_;  // not for a single try
  Clock::time_point sent_{};
  Sleep sleep_ = Sleep::none;
  std::uint64_t sleep_epoch_ = 0;  // counts sleeps started and ended (see sleep())
  bool single_ = false;          // timeout zero: one try, never queued
  bool after_holder_ = false;    // see step()
  // Became head after a local holder and has not tried since: leaving now passes the wait for
  // that holder's release on to the next head (RedlockTurns::remove).
  bool handover_pending_ = false;
  std::uint64_t handover_generation_ = 0;
  std::uint64_t seen_generation_ = 0;  // turns_->generation() when the last try was sent
  bool try_in_flight_ = false;
  bool started_ = false;         // start() ran
  bool cancel_pending_ = false;  // cancel() came before start()
  bool finished_ = false;   // no more tries: the outcome is decided
  bool delivered_ = false;  // done_ ran
  std::uint64_t shutdown_hook_ = 0;
  std::stop_token stop_;
  std::optional<std::stop_callback<std::function<void()>>> stop_cb_;
};

}  // namespace

void start_redlock_acquire(std::shared_ptr<const RedlockSpec> spec, WaitOptions wait,
                           std::function<void(Result<Lease>)> done, std::stop_token stop,
                           std::function<void()> on_wait) {
  for (const auto& core : spec->nodes.cores) {
    if (core->is_shut_down()) return done(Error(errc::shutdown, "client " + core->where() + " is shut down"));
  }
  auto home = spec->nodes.cores.front();
  auto op = std::make_shared<RedlockWaitOp>(std::move(spec), wait, std::move(done), std::move(on_wait));
  if (stop.stop_possible()) op->watch(std::move(stop));
  home->post([op] { op->start(); });
}

}  // namespace dlock::detail
