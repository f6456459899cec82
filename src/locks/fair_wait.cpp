#include "locks/fair_wait.hpp"

#include <optional>
#include <random>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"  // release_unwanted
#include "scripts/script_call.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail {

milliseconds fair_retry_delay(int position, long long hint_ms, milliseconds recheck, milliseconds refresh_left) {
  milliseconds d = refresh_left;
  if (position == 0 || position < 0) d = std::min(d, recheck);
  if ((position == 0 || position == 1) && hint_ms >= 0) d = std::min(d, milliseconds(hint_ms + 1));
  return std::max(d, milliseconds(1));
}

namespace {

// While sleeping, a waiter looks at least this often whether its Client was shut down (a local
// timer only: nothing is sent). It keeps ~Client from waiting on a long sleep.
// A wait that timed out first removes its place, then returns; at most this much later when the
// server is slow to answer (the place then expires by itself).
constexpr milliseconds timeout_cleanup_grace{200};

class FairWaitOp final : public Notifier::Listener, public std::enable_shared_from_this<FairWaitOp> {
 public:
  FairWaitOp(std::shared_ptr<ClientCore> core, std::shared_ptr<const FairSpec> spec, WaitOptions wait, FairDone done)
      : core_(std::move(core)),
        spec_(std::move(spec)),
        wait_(wait),
        done_(std::move(done)),
        timer_(core_->io()),
        deadline_timer_(core_->io()),
        grace_timer_(core_->io()) {}

  // Cancels the wait when `stop` is requested. The callback only posts to the loop thread.
  void watch(std::stop_token stop) {
    stop_cb_.emplace(std::move(stop), std::function<void()>([core = core_, weak = weak_from_this()] {
                       core->post([weak] {
                         if (auto op = weak.lock()) op->cancel();
                       });
                     }));
  }

  void start() {
    if (finished_) return;  // cancelled before it started
    if (core_->is_shut_down()) return deliver(Error(errc::shutdown, "client is shut down"));
    // Shutdown reaches this wait through the Client's hook, not by polling.
    shutdown_hook_ = core_->add_shutdown_hook([weak = weak_from_this()](const Error& why) {
      if (auto self = weak.lock()) self->give_up(why);
    });
    owner_ = core_->new_owner_token();
    channel_ = spec_->channel_prefix + owner_;
    const auto now = BootClock::now();
    if (wait_.timeout) {
      if (wait_.timeout->count() <= 0) {
        single_ = true;
      } else {
        deadline_ = now + *wait_.timeout;
        deadline_timer_.expires_at(*deadline_);
        deadline_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
          if (!ec) self->give_up(Error(errc::timeout, "timed out waiting for " + self->spec_->what));
        });
      }
    }
    try_now(false);
  }

  // --- Notifier::Listener: our own channel ---
  void on_notification(std::string_view) override { wake(); }
  void on_resubscribed() override { wake(); }

 private:
  void cancel() { give_up(Error(errc::cancelled, "waiting for " + spec_->what + " was cancelled")); }

  void wake() {
    ++generation_;
    if (!sleeping_ || finished_) return;
    sleeping_ = false;
    timer_.cancel();
    try_now(true);
  }

  void try_now(bool enqueue) {
    try_in_flight_ = true;
    seen_generation_ = generation_;
    if (enqueue) enqueued_ = true;
    const auto sent = BootClock::now();
    const std::vector<std::string> args{owner_, std::to_string(spec_->lease.ttl.count()),
                                        std::to_string(spec_->waiter_ttl.count()), enqueue ? "1" : "0",
                                        spec_->channel_prefix};
    const std::vector<std::string> keys{spec_->key, spec_->fence_key, spec_->queue_key, spec_->timeouts_key};
    core_->eval_now(scripts::fair_acquire, encode_evalsha(scripts::fair_acquire, keys, args),
                    [self = shared_from_this(), sent](Result<Reply> r) { self->on_reply(std::move(r), sent); });
  }

  void on_reply(Result<Reply> r, BootClock::time_point sent) {
    try_in_flight_ = false;
    enum class Kind { acquired, busy, failed, unknown } kind = Kind::failed;
    std::shared_ptr<LeaseRecord> lease;
    long long hint = -1;
    int position = -1;
    Error error;
    if (!r.ok()) {
      // The try may have reached the server: it may have queued us, or even taken the lock.
      kind = Kind::unknown;
      error = Error(core_->is_shut_down() ? make_error_code(errc::shutdown) : r.code(),
                    "acquiring " + spec_->what + ": " + r.error().what());
    } else if (r->is_error()) {
      error = Error(classify_error_reply(*r), "acquiring " + spec_->what + ": " + r->str());
    } else if (!r->is_array() || r->size() < 2 || !(*r)[0].is_integer()) {
      error = Error(errc::protocol, "acquiring " + spec_->what + ": unexpected reply " + r->to_string());
    } else if ((*r)[0].integer() == 1 && (*r)[1].is_integer()) {
      kind = Kind::acquired;
      lease = std::make_shared<LeaseRecord>(core_, spec_->name, owner_,
                                            FencingToken{static_cast<std::uint64_t>((*r)[1].integer())}, spec_->hold,
                                            spec_->lease, sent);
      core_->active_leases_.fetch_add(1);
      core_->renewals().add(lease);
    } else if ((*r)[0].integer() == 0 && r->size() == 3) {
      kind = Kind::busy;
      hint = (*r)[1].integer();
      position = static_cast<int>((*r)[2].integer());
    } else if ((*r)[0].integer() == -1) {
      error = Error(errc::wrong_type, spec_->what + ": key '" + spec_->key + "' (or its queue) holds a " +
                                          (*r)[1].str() + ", not a dlock FairLock");
    } else {
      error = Error(errc::protocol, "acquiring " + spec_->what + ": unexpected reply " + r->to_string());
    }

    if (finished_) {
      // The wait was given up while this try was in flight; nobody will receive a lease.
      if (kind == Kind::acquired) {
        return release_unwanted(lease, [self = shared_from_this()] { self->deliver_pending(); });
      }
      if (enqueued_ || kind == Kind::unknown) return dequeue([self = shared_from_this()] { self->deliver_pending(); });
      return deliver_pending();
    }
    switch (kind) {
      case Kind::acquired:
        return deliver(Lease(std::move(lease)));
      case Kind::failed:
      case Kind::unknown:
        // Leave no place (nor, after an unknown outcome, a lock) behind; the caller need not wait.
        if (enqueued_ || kind == Kind::unknown) dequeue({});
        return deliver(std::move(error));
      case Kind::busy:
        break;
    }
    if (single_) {
      return deliver(Error(errc::busy, spec_->what + " is held by another owner, or others are queued for it"));
    }
    const auto now = BootClock::now();
    if (deadline_ && now >= *deadline_) return give_up(Error(errc::timeout, "timed out waiting for " + spec_->what));
    if (!subscribed_) return subscribe();
    // A notification arrived while the try was in flight: try again at once.
    if (generation_ != seen_generation_) return try_now(true);
    sleep(now, sent, position, hint);
  }

  // Subscribe to our own channel, and only once the server confirmed it, join the queue.
  void subscribe() {
    subscribed_ = true;
    core_->notifier().subscribe(channel_, this, [self = shared_from_this()](const Error&) {
      // Even when the subscription failed we go on: every wait is bounded by the renewal of our
      // place (and, for the head, the recheck interval).
      if (self->finished_) return;
      self->try_now(true);
    });
  }

  void sleep(BootClock::time_point now, BootClock::time_point sent, int position, long long hint) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::uniform_real_distribution<double> jitter(0.8, 1.2);
    const auto recheck = std::chrono::duration_cast<milliseconds>(wait_.recheck_interval * jitter(rng));
    const auto refresh_left =
        std::chrono::duration_cast<milliseconds>(spec_->refresh_interval() - (now - sent));
    next_try_at_ = now + fair_retry_delay(position, hint, recheck, refresh_left);
    arm_tick();
  }

  void arm_tick() {
    BootClock::time_point at = next_try_at_;
    if (deadline_) at = std::min(at, *deadline_);
    sleeping_ = true;
    timer_.expires_at(at);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || !self->sleeping_ || self->finished_) return;
      self->sleeping_ = false;
      self->on_tick();
    });
  }

  void on_tick() {
    if (core_->is_shut_down()) return give_up(Error(errc::shutdown, "client is shut down"));
    const auto now = BootClock::now();
    if (deadline_ && now >= *deadline_) return give_up(Error(errc::timeout, "timed out waiting for " + spec_->what));
    if (now >= next_try_at_) return try_now(true);
    arm_tick();
  }

  // Ends the wait without the lock: leave the queue first (after the try in flight, if any, has
  // been answered, so that it cannot queue us again), then report `why`.
  void give_up(Error why) {
    if (finished_) return;
    finished_ = true;
    sleeping_ = false;
    timer_.cancel();
    deadline_timer_.cancel();
    unsubscribe();
    pending_ = std::move(why);
    const bool shut_down = pending_->code == make_error_code(errc::shutdown);
    if (shut_down) return deliver_pending();  // nothing can be sent any more
    if (pending_->code == make_error_code(errc::timeout)) {
      // The caller's deadline holds, up to a short grace for the cleanup.
      grace_timer_.expires_after(std::min(timeout_cleanup_grace, core_->options().command_timeout));
      grace_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
        if (!ec) self->deliver_pending();
      });
    }
    // A cancelled caller gets its answer once nothing is left behind, as with Mutex (bounded by
    // the command timeout).
    if (try_in_flight_) return;  // on_reply cleans up
    if (!enqueued_) return deliver_pending();
    dequeue([self = shared_from_this()] { self->deliver_pending(); });
  }

  // Removes our place (and the lock, if a try whose reply was lost took it). `then` runs on the
  // loop thread once it has been answered, whatever the answer.
  void dequeue(std::function<void()> then) {
    const std::vector<std::string> keys{spec_->key, spec_->queue_key, spec_->timeouts_key};
    const std::vector<std::string> args{owner_, spec_->channel_prefix};
    core_->eval_now(scripts::fair_dequeue, encode_evalsha(scripts::fair_dequeue, keys, args),
                    [then = std::move(then)](Result<Reply>) {
                      if (then) then();
                    });
  }

  void unsubscribe() {
    if (!subscribed_) return;
    subscribed_ = false;
    core_->notifier().unsubscribe(channel_, this);
  }

  void deliver_pending() {
    if (pending_) deliver(std::move(*pending_));
  }

  void deliver(Result<Lease> result) {
    if (delivered_) return;
    delivered_ = true;
    finished_ = true;
    sleeping_ = false;
    timer_.cancel();
    deadline_timer_.cancel();
    grace_timer_.cancel();
    unsubscribe();
    stop_cb_.reset();
    if (shutdown_hook_) core_->remove_shutdown_hook(shutdown_hook_);
    shutdown_hook_ = 0;
    auto done = std::move(done_);
    done(std::move(result));
  }

  std::shared_ptr<ClientCore> core_;
  std::shared_ptr<const FairSpec> spec_;
  WaitOptions wait_;
  FairDone done_;
  BootTimer timer_;           // sleeping between tries
  BootTimer deadline_timer_;  // the caller's deadline
  BootTimer grace_timer_;     // bounds the cleanup after a timeout
  std::string owner_;         // our owner token, also our waiter id
  std::string channel_;       // P{N}:ch:<owner_>
  std::optional<BootClock::time_point> deadline_;
  BootClock::time_point next_try_at_{};
  bool single_ = false;         // timeout zero: one try, never queued
  bool subscribed_ = false;     // registered with the Notifier on channel_
  bool enqueued_ = false;       // a try that joins the queue was sent
  bool try_in_flight_ = false;
  bool sleeping_ = false;
  bool finished_ = false;       // no more tries: the outcome is decided
  bool delivered_ = false;      // done_ ran
  std::uint64_t generation_ = 0;       // notifications received
  std::uint64_t seen_generation_ = 0;  // ... when the last try was sent
  std::optional<Error> pending_;       // the outcome of a wait given up, delivered after cleanup
  std::uint64_t shutdown_hook_ = 0;
  std::optional<std::stop_callback<std::function<void()>>> stop_cb_;
};

}  // namespace

void start_fair_acquire(const std::shared_ptr<ClientCore>& core, std::shared_ptr<const FairSpec> spec, WaitOptions wait,
                        FairDone done, std::stop_token stop) {
  if (core->is_shut_down()) return done(Error(errc::shutdown, "client is shut down"));
  auto op = std::make_shared<FairWaitOp>(core, std::move(spec), wait, std::move(done));
  if (stop.stop_possible()) op->watch(std::move(stop));
  core->post([op] { op->start(); });
}

Result<Lease> fair_acquire_blocking(const std::shared_ptr<ClientCore>& core, std::shared_ptr<const FairSpec> spec,
                                    WaitOptions wait, std::stop_token stop) {
  if (core->on_loop_thread()) {
    return Error(errc::called_from_event_loop,
                 "blocking acquire of " + spec->what + " called on the client's event-loop thread; use async_acquire");
  }
  auto w = std::make_shared<SyncWait<Result<Lease>>>();
  start_fair_acquire(core, std::move(spec), wait, [w](Result<Lease> r) { w->set(std::move(r)); }, std::move(stop));
  return w->wait();
}

}  // namespace dlock::detail
