#include "locks/fair_wait.hpp"

#include <charconv>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"  // release_unwanted
#include "locks/idempotent_call.hpp"
#include "scripts/script_call.hpp"
#include "util/jitter_rng.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail {

milliseconds fair_retry_delay(int position, long long hint_ms, milliseconds recheck, milliseconds refresh_left) {
  milliseconds d = refresh_left;
  if (position == 0 || position < 0) d = std::min(d, recheck);
  if ((position == 0 || position == 1) && hint_ms >= 0) d = std::min(d, milliseconds(hint_ms + 1));
  return std::max(d, milliseconds(1));
}

std::string fair_channel_of(std::string_view id) {
  // fair_*.lua: string.match(id, '^%x+@(.+):%d+$') or id
  const auto at = id.find('@');
  const auto colon = id.rfind(':');
  if (at == std::string_view::npos || at == 0 || colon == std::string_view::npos || colon <= at + 1 ||
      colon + 1 == id.size()) {
    return std::string(id);
  }
  auto is_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!std::all_of(id.begin(), id.begin() + static_cast<std::ptrdiff_t>(at), is_hex)) return std::string(id);
  if (!std::all_of(id.begin() + static_cast<std::ptrdiff_t>(colon) + 1, id.end(), is_digit)) return std::string(id);
  return std::string(id.substr(at + 1, colon - at - 1));
}

FairMessage parse_fair_message(std::string_view payload) {
  FairMessage m;
  constexpr std::string_view granted = "granted ";
  constexpr std::string_view released = "released ";
  if (payload.starts_with(granted)) {
    const auto rest = payload.substr(granted.size());
    const auto space = rest.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == rest.size()) return m;
    std::uint64_t token = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + space, token);
    if (ec != std::errc() || end != rest.data() + space) return m;
    m.kind = FairMessage::Kind::granted;
    m.token = token;
    m.waiter = rest.substr(space + 1);
  } else if (payload.starts_with(released) && payload.size() > released.size()) {
    m.kind = FairMessage::Kind::released;
    m.waiter = payload.substr(released.size());
  }
  return m;
}

namespace {
class FairWaitOp;
}  // namespace

// One FairLock object's subscription to its channel, P{N}:ch:<process>, kept from the first wait
// that queues until the object is destroyed; messages go to the waits registered by waiter id.
// Loop thread only.
class FairChannel final : public Notifier::Listener, public std::enable_shared_from_this<FairChannel> {
 public:
  FairChannel(const std::shared_ptr<ClientCore>& core, std::string name) : core_(core), name_(std::move(name)) {}

  // Subscribed, and the server confirmed it (as far as we know: after a reconnect the Notifier
  // subscribes again and calls on_resubscribed, which re-checks every wait).
  bool ready() const noexcept { return confirmed_; }

  // Subscribes once; `then` runs when the server has answered (whatever the answer: a wait is
  // bounded by its own re-tries even without messages), at once when that already happened.
  void subscribe(std::function<void()> then) {
    if (registered_ && !in_flight_) return then();
    waiting_.push_back(std::move(then));
    if (registered_) return;
    auto core = core_.lock();
    if (!core) return;  // the Client is gone: its waits end with shutdown
    registered_ = true;
    in_flight_ = true;
    // The Notifier keeps a plain pointer: this object unsubscribes before it goes (retire). The
    // confirmation may outlive that (another FairLock object of this process keeps the channel).
    core->notifier().subscribe(name_, this, [weak = weak_from_this()](const Error& e) {
      auto self = weak.lock();
      if (!self) return;
      self->in_flight_ = false;
      self->confirmed_ = !e;
      auto waiting = std::move(self->waiting_);
      self->waiting_.clear();
      for (auto& f : waiting) f();
    });
  }

  void attach(const std::string& waiter, std::weak_ptr<FairWaitOp> op) { waiters_[waiter] = std::move(op); }

  void detach(const std::string& waiter) {
    waiters_.erase(waiter);
    maybe_unsubscribe();
  }

  // The FairLock object is gone: unsubscribe once no wait is left.
  void retire() {
    retired_ = true;
    maybe_unsubscribe();
  }

  void on_notification(std::string_view payload) override;
  void on_resubscribed() override;

 private:
  void maybe_unsubscribe() {
    if (!retired_ || !waiters_.empty() || !registered_) return;
    registered_ = false;
    confirmed_ = false;
    if (auto core = core_.lock()) core->notifier().unsubscribe(name_, this);
  }
  std::vector<std::shared_ptr<FairWaitOp>> live_waiters();

  // Weak: a retire() posted to a Client already shut down stays in its loop's queue, and must not
  // keep the ClientCore (which owns that queue) alive.
  std::weak_ptr<ClientCore> core_;
  std::string name_;
  bool registered_ = false;  // with the Notifier (until retired)
  bool in_flight_ = false;   // the first SUBSCRIBE awaits its answer
  bool confirmed_ = false;
  bool retired_ = false;
  std::vector<std::function<void()>> waiting_;
  std::unordered_map<std::string, std::weak_ptr<FairWaitOp>> waiters_;  // by waiter id
};

namespace {

// While sleeping, a waiter looks at least this often whether its Client was shut down (a local
// timer only: nothing is sent). It keeps ~Client from waiting on a long sleep.
// A wait that timed out first removes its place, then returns; at most this much later when the
// server is slow to answer (the place then expires by itself).
constexpr milliseconds timeout_cleanup_grace{200};

class FairWaitOp final : public std::enable_shared_from_this<FairWaitOp> {
 public:
  FairWaitOp(std::shared_ptr<ClientCore> core, std::shared_ptr<const FairSpec> spec, WaitOptions wait, FairDone done,
             std::function<void()> on_wait)
      : core_(std::move(core)),
        spec_(std::move(spec)),
        wait_(normalize_wait(wait)),
        done_(std::move(done)),
        on_wait_(std::move(on_wait)),
        timer_(core_->io()),
        deadline_timer_(core_->io()),
        grace_timer_(core_->io()),
        channel_(spec_->channel) {}

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
    shutdown_hook_ = core_->add_shutdown_hook([weak = weak_from_this()](const Error& why, std::function<void()> cleaned_up) {
      auto self = weak.lock();
      if (!self) {
        if (cleaned_up) cleaned_up();
        return;
      }
      self->shut_down(why, std::move(cleaned_up));
    });
    owner_ = core_->new_owner_token();
    // Registered before any try: a handover can be announced before the try's reply arrives.
    channel_->attach(owner_, weak_from_this());
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
    // A FairLock whose channel is already subscribed queues with its first try: a busy lock costs
    // no second try.
    subscribed_ = !single_ && channel_->ready();
    try_now(subscribed_);
  }

  // --- From the FairLock's channel (FairChannel) ---
  // A release handed us the lock: this is the acquisition.
  void on_granted(std::uint64_t token) {
    // A wait given up already sent (or is about to send) fair_dequeue, which drops the lock it
    // finds ours and hands it on: nothing to do here.
    if (finished_) return;
    // The try in flight decides which send time bounds the lease (on_reply).
    if (try_in_flight_) {
      granted_ = token;
      return;
    }
    // The last try answered "busy" ran before the release's SET: its send time is a safe start.
    take_grant(token, last_busy_sent_.value_or(first_enqueue_sent_));
  }

  // 'released', or the subscription was made again (messages may have been lost): try now.
  void wake() {
    ++generation_;
    if (!sleeping_ || finished_) return;
    sleeping_ = false;
    timer_.cancel();
    try_now(true);
  }

 private:
  void cancel() { give_up(Error(errc::cancelled, "waiting for " + spec_->what + " was cancelled")); }

  // An acquisition (a try's reply, or a 'granted' message) ends the wait, unless it reached us
  // after the lease's validity had ended: the process was paused, or the reply or the message
  // was that slow. Then another waiter may hold the lock by now, with a higher token, so it is
  // no acquisition (as script_attempt.hpp's refuse_late does for the other kinds): released
  // again (fair_release compares the owner token, and hands the lock on to the next live
  // waiter), and only then does the wait go on, as after a busy try.
  void accept(std::shared_ptr<LeaseRecord> lease) {
    if (BootClock::now() < lease->valid_until()) return deliver(Lease(std::move(lease)));
    sleeping_ = false;
    timer_.cancel();
    refusing_ = true;
    release_unwanted(lease, [self = shared_from_this()] { self->after_refusal(); });
  }

  // A handover, whose lease counts from `start` (a try of ours that ran before it). Only the head
  // is handed the lock, and a waiter further back tries only every waiter_ttl / 3: one that moved
  // up without a try of its own can be handed the lock longer than a (short) lease TTL after its
  // last try. Refusing such a grant (accept) handed the lock on and sent this waiter to the back,
  // where, with holds longer than the TTL, the same happened again. Instead the granted key is
  // renewed, and the lease counts from that renewal's send: one round trip, only when late.
  void take_grant(std::uint64_t token, BootClock::time_point start) {
    if (BootClock::now() < LeaseTiming::from(spec_->lease).validity_from(start)) {
      return accept(make_lease(token, start));
    }
    sleeping_ = false;
    timer_.cancel();
    refusing_ = true;  // give_up() waits for the answer (on_confirmed cleans up)
    const HoldScripts& hold = *spec_->hold;
    std::vector<std::string> args{owner_, std::to_string(spec_->lease.ttl.count())};
    hold.append_renew_extra(args);
    const auto sent = BootClock::now();
    core_->eval_now(*hold.renew, encode_evalsha(*hold.renew, hold.renew_key_list(), args),
                    [self = shared_from_this(), token, sent](Result<Reply> r) {
                      self->on_confirmed(token, sent, std::move(r));
                    });
  }

  void on_confirmed(std::uint64_t token, BootClock::time_point sent, Result<Reply> r) {
    refusing_ = false;
    if (r.ok() && r->is_integer() && r->integer() == 0) {
      // The granted key was gone or someone else's when the renewal arrived (its TTL ran out
      // first): no acquisition. Our place went with the handover: the wait goes on, queued anew.
      refusing_ = true;
      return after_refusal();
    }
    auto lease = make_lease(token, sent);
    if (r.ok() && r->is_integer() && r->integer() == 1 && !finished_) return accept(std::move(lease));
    // Given up meanwhile, or the renewal failed (the key may still be ours): release it, which
    // hands it on, and go on (or report) as after a refused acquisition.
    refusing_ = true;
    release_unwanted(lease, [self = shared_from_this()] { self->after_refusal(); });
  }

  void after_refusal() {
    refusing_ = false;
    if (delivered_) return;
    // An acquisition took our place out of the queue (fair_acquire.lua, fair_release.lua): the
    // next try queues anew, and its send time is the one that bounds a later handover's lease.
    enqueued_ = false;
    last_busy_sent_.reset();
    if (finished_) return deliver_pending();  // given up while the release was in flight
    if (single_) {
      return deliver(Error(errc::busy, spec_->what + " was taken too late (the reply came after the lease's validity ended); released again"));
    }
    // Once, a pause or a hiccup; try after try (no busy answer between), the lease TTL is
    // shorter than this server's round trip: the wait would take and give back until its
    // deadline, or for ever (as AcquireOp does for the other kinds).
    if (++late_in_a_row_ >= kLateTriesToGiveUp) {
      return give_up(Error(errc::invalid_argument, "acquiring " + spec_->what + ": " + std::to_string(kLateTriesToGiveUp) +
                                              " acquisitions in a row were answered after the lease's validity had "
                                              "ended and given back: the lease TTL is too short for this server's "
                                              "latency"));
    }
    if (deadline_ && BootClock::now() >= *deadline_) {
      return give_up(Error(errc::timeout, "timed out waiting for " + spec_->what));
    }
    if (!subscribed_) return subscribe();
    try_now(true);
  }

  std::shared_ptr<LeaseRecord> make_lease(std::uint64_t token, BootClock::time_point sent) {
    auto lease = std::make_shared<LeaseRecord>(core_, spec_->name, owner_, FencingToken{token}, spec_->hold,
                                               spec_->lease, sent);
    core_->active_leases_.fetch_add(1);
    core_->renewals().add(lease);
    return lease;
  }

  void try_now(bool enqueue) {
    try_in_flight_ = true;
    seen_generation_ = generation_;
    const auto sent = BootClock::now();
    if (enqueue && !enqueued_) first_enqueue_sent_ = sent;
    if (enqueue) enqueued_ = true;
    const std::vector<std::string> args{owner_, std::to_string(spec_->lease.ttl.count()),
                                        std::to_string(spec_->waiter_ttl.count()), enqueue ? "1" : "0",
                                        spec_->channel_prefix};
    const std::vector<std::string> keys{spec_->key, spec_->fence_key, spec_->queue_key, spec_->timeouts_key,
                                        spec_->grant_key};
    core_->eval_now(scripts::fair_acquire, encode_evalsha(scripts::fair_acquire, keys, args),
                    [self = shared_from_this(), sent](Result<Reply> r) { self->on_reply(std::move(r), sent); });
  }

  void on_reply(Result<Reply> r, BootClock::time_point sent) {
    try_in_flight_ = false;
    // Used here or never: a refused lease (accept) lets the wait go on with later tries.
    const std::optional<std::uint64_t> granted = std::exchange(granted_, std::nullopt);
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
      lease = make_lease(static_cast<std::uint64_t>((*r)[1].integer()), sent);
    } else if ((*r)[0].integer() == 0 && r->size() == 3) {
      kind = Kind::busy;
      hint = (*r)[1].integer();
      position = static_cast<int>((*r)[2].integer());
    } else if ((*r)[0].integer() == -1 && r->size() == 3 && (*r)[2].is_string()) {
      // The key named is not the lock key (the fencing counter).
      error = Error(errc::wrong_type, spec_->what + ": key '" + (*r)[2].str() + "' holds a " + (*r)[1].str() +
                                          ", not a dlock FairLock");
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
    if (granted && kind != Kind::acquired) {
      // A release handed us the lock while this try was in flight. A "busy" try ran before that
      // handover, so its send time bounds the lease; after any other outcome, the first try that
      // joined the queue (the handover needed our place) does.
      const auto start = kind == Kind::busy ? sent : first_enqueue_sent_;
      return take_grant(*granted, start);
    }
    switch (kind) {
      case Kind::acquired:
        return accept(std::move(lease));
      case Kind::failed:
      case Kind::unknown:
        // Leave no place (nor, after an unknown outcome, a lock) behind; the caller need not wait.
        if (enqueued_ || kind == Kind::unknown) dequeue({});
        return deliver(std::move(error));
      case Kind::busy:
        break;
    }
    last_busy_sent_ = sent;
    late_in_a_row_ = 0;
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

  // Subscribe the FairLock's channel (once per FairLock object), and only once the server
  // confirmed it, join the queue.
  void subscribe() {
    subscribed_ = true;
    channel_->subscribe([self = shared_from_this()] {
      // Even when the subscription failed we go on: every wait is bounded by the renewal of our
      // place (and, for the head, the recheck interval).
      if (self->finished_) return;
      self->try_now(true);
    });
  }

  void sleep(BootClock::time_point now, BootClock::time_point sent, int position, long long hint) {
    const auto recheck = std::chrono::duration_cast<milliseconds>(wait_.recheck_interval * jitter_between(0.8, 1.2));
    const auto refresh_left =
        std::chrono::duration_cast<milliseconds>(spec_->refresh_interval() - (now - sent));
    next_try_at_ = now + fair_retry_delay(position, hint, recheck, refresh_left);
    arm_tick();
  }

  void arm_tick() {
    // Queued: a blocking caller need not poll for its result any more.
    if (on_wait_) std::exchange(on_wait_, {})();
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

  // The Client shuts down. With `cleaned_up` the connections still work: the wait leaves the
  // queue as a cancelled one does (before the Client's own releases, which would otherwise hand
  // the lock to this wait: ClientCore::shutdown), and `cleaned_up` runs once it has answered.
  // Without it nothing can be sent any more: the wait ends now (its place expires by itself).
  void shut_down(const Error& why, std::function<void()> cleaned_up) {
    if (delivered_) {
      if (cleaned_up) cleaned_up();
      return;
    }
    if (!cleaned_up) {
      finished_ = true;
      return deliver(why);
    }
    cleaned_up_ = std::move(cleaned_up);
    give_up(why);  // a wait already giving up (a timeout's cleanup in flight) delivers as it ends
  }

  // Ends the wait without the lock: leave the queue first (after the try in flight, if any, has
  // been answered, so that it cannot queue us again), then report `why`.
  void give_up(Error why) {
    if (finished_) return;
    finished_ = true;
    sleeping_ = false;
    timer_.cancel();
    deadline_timer_.cancel();
    pending_ = std::move(why);
    if (pending_->code == make_error_code(errc::timeout)) {
      // The caller's deadline holds, up to a short grace for the cleanup.
      grace_timer_.expires_after(std::min(timeout_cleanup_grace, core_->options().command_timeout));
      grace_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
        if (!ec) self->deliver_pending();
      });
    }
    // A cancelled caller gets its answer once nothing is left behind, as with Mutex (bounded by
    // the command timeout).
    if (try_in_flight_ || refusing_) return;  // on_reply, after_refusal clean up
    if (!enqueued_) return deliver_pending();
    dequeue([self = shared_from_this()] { self->deliver_pending(); });
  }

  // Removes our place (and the lock, if a try whose reply was lost took it). `then` runs on the
  // loop thread once it has been answered, whatever the answer. Sent again while its outcome is
  // unknown (idempotent_call.hpp): a place left behind by a blip kept every waiter behind it
  // waiting until it expired (waiter_ttl), and a lock taken by a lost try until its TTL.
  void dequeue(std::function<void()> then) {
    const std::vector<std::string> keys{spec_->key, spec_->queue_key, spec_->timeouts_key, spec_->fence_key,
                                        spec_->grant_key};
    const std::vector<std::string> args{owner_, spec_->channel_prefix};
    send_idempotent(
        core_,
        [core = core_, payload = encode_evalsha(scripts::fair_dequeue, keys, args)](ReplyHandler done) {
          core->eval_now(scripts::fair_dequeue, payload, std::move(done));
        },
        [then = std::move(then)](Result<Reply>) {
          if (then) then();
        });
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
    // The channel's subscription stays with the FairLock object for its next waits.
    channel_->detach(owner_);
    // stop_cb_ stays until the op goes: a stop requested before the call runs the callback
    // inside watch(), whose cancel can be delivered here before watch() has returned, and
    // destroying the callback under it would race (the callback only posts to a weak op).
    if (shutdown_hook_) core_->remove_shutdown_hook(shutdown_hook_);
    shutdown_hook_ = 0;
    auto done = std::move(done_);
    done(std::move(result));
    if (cleaned_up_) std::exchange(cleaned_up_, {})();
  }

  std::shared_ptr<ClientCore> core_;
  std::shared_ptr<const FairSpec> spec_;
  WaitOptions wait_;
  FairDone done_;
  std::function<void()> on_wait_;  // see start_fair_acquire
  BootTimer timer_;           // sleeping between tries
  BootTimer deadline_timer_;  // the caller's deadline
  BootTimer grace_timer_;     // bounds the cleanup after a timeout
  std::shared_ptr<FairChannel> channel_;  // the FairLock's P{N}:ch:<process>
  std::string owner_;                     // our owner token, also our waiter id
  std::optional<BootClock::time_point> deadline_;
  BootClock::time_point first_enqueue_sent_{};                 // the first try that joined the queue
  std::optional<BootClock::time_point> last_busy_sent_;        // the last try answered "busy"
  std::optional<std::uint64_t> granted_;  // handed over while a try was in flight: on_reply decides
  BootClock::time_point next_try_at_{};
  bool single_ = false;         // timeout zero: one try, never queued
  bool subscribed_ = false;     // channel_ subscribed (or asked to be) for this wait
  bool enqueued_ = false;       // a try that joins the queue was sent
  bool try_in_flight_ = false;
  bool refusing_ = false;       // a late grant's confirmation, or a late acquisition's release, is in flight
  bool sleeping_ = false;
  bool finished_ = false;       // no more tries: the outcome is decided
  bool delivered_ = false;      // done_ ran
  std::uint8_t late_in_a_row_ = 0;  // acquisitions refused as late since the last busy answer
  std::uint64_t generation_ = 0;       // notifications received
  std::uint64_t seen_generation_ = 0;  // ... when the last try was sent
  std::optional<Error> pending_;       // the outcome of a wait given up, delivered after cleanup
  std::uint64_t shutdown_hook_ = 0;
  std::function<void()> cleaned_up_;  // shutdown waits for this wait's cleanup (shut_down)
  std::optional<std::stop_callback<std::function<void()>>> stop_cb_;
};

}  // namespace

std::vector<std::shared_ptr<FairWaitOp>> FairChannel::live_waiters() {
  std::vector<std::shared_ptr<FairWaitOp>> out;
  for (auto& [id, w] : waiters_) {
    if (auto op = w.lock()) out.push_back(std::move(op));
  }
  return out;
}

void FairChannel::on_notification(std::string_view payload) {
  const FairMessage m = parse_fair_message(payload);
  if (m.kind == FairMessage::Kind::other) {
    // Not a message of this layout: every wait re-checks (a try each), rather than miss a turn.
    for (auto& op : live_waiters()) op->wake();
    return;
  }
  auto it = waiters_.find(std::string(m.waiter));
  if (it == waiters_.end()) return;  // another FairLock object's wait (same channel), or gone
  auto op = it->second.lock();
  if (!op) return;
  if (m.kind == FairMessage::Kind::granted) op->on_granted(m.token);
  else op->wake();
}

void FairChannel::on_resubscribed() {
  confirmed_ = true;
  // Messages published while the subscription was down are lost: every wait re-checks, and a
  // wait whose handover was lost finds the lock its own (fair_acquire.lua).
  for (auto& op : live_waiters()) op->wake();
}

std::shared_ptr<FairChannel> make_fair_channel(const std::shared_ptr<ClientCore>& core, std::string channel) {
  return std::make_shared<FairChannel>(core, std::move(channel));
}

void retire_fair_channel(const std::shared_ptr<ClientCore>& core, std::shared_ptr<FairChannel> channel) {
  if (!channel) return;
  core->post([channel = std::move(channel)] { channel->retire(); });
}

void start_fair_acquire(const std::shared_ptr<ClientCore>& core, std::shared_ptr<const FairSpec> spec, WaitOptions wait,
                        FairDone done, std::stop_token stop, std::function<void()> on_wait) {
  if (core->is_shut_down()) return done(Error(errc::shutdown, "client is shut down"));
  auto op = std::make_shared<FairWaitOp>(core, std::move(spec), wait, std::move(done), std::move(on_wait));
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
  start_fair_acquire(core, std::move(spec), wait, [w](Result<Lease> r) { w->set(std::move(r)); }, std::move(stop),
                     [w] { w->park(); });
  return w->wait(*core);
}

}  // namespace dlock::detail
