#include "locks/acquire_op.hpp"

#include <algorithm>
#include <utility>

#include "client_core.hpp"
#include "locks/hold_back.hpp"
#include "locks/idempotent_call.hpp"
#include "locks/reentrant_hold.hpp"
#include "scripts/script_call.hpp"
#include "util/jitter_rng.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail {

class AcquireOp;

// The process-local queue of waiters for one lock. Loop thread only.
class WaitQueue final : public std::enable_shared_from_this<WaitQueue> {
 public:
  // Only what every acquisition needs: most find the lock free with their first try and never
  // subscribe, so the channels' names and listeners are made when the queue first subscribes.
  WaitQueue(ClientCore& core, std::string key, const AcquireRequest& req)
      : core_(core), key_(std::move(key)), wake_only_on_(req.wake_only_on), withdraw_(req.withdraw) {}
  ~WaitQueue() {
    if (!subscribed_) return;
    for (std::size_t i = 0; i < channels_.size(); ++i) core_.notifier().unsubscribe(channels_[i], listeners_[i].get());
    if (keyspace_subscribed_) {
      for (const auto& ch : keyspace_channels_) core_.notifier().unsubscribe(ch, &keyspace_listener_);
    }
  }

  void push(const std::shared_ptr<AcquireOp>& op);
  // `acquired`: the op leaves because it took the lock (so the lock is now held by this process).
  // `holder_ttl`: then, when other holders' holds expire (shared holds), for the next head's sleep.
  void remove(AcquireOp* op, bool acquired, std::optional<milliseconds> holder_ttl = std::nullopt);
  bool is_head(const AcquireOp* op) const { return !ops_.empty() && ops_.front().get() == op; }
  std::size_t size() const noexcept { return ops_.size(); }
  // The lock keeps a waiters' roll (AcquireRequest::withdraw).
  bool keeps_roll() const noexcept { return withdraw_ != nullptr; }
  // The Client may have a place on the roll: set when a try that takes one is sent, cleared when
  // a try that leaves the roll acquired.
  void set_on_roll(bool on) noexcept { on_roll_ = on; }
  bool on_roll() const noexcept { return on_roll_; }
  bool confirmed() const noexcept { return confirmed_; }
  // Whether this process listens on the lock's channel (its release notifications count it).
  bool subscribed() const noexcept { return subscribed_; }
  std::uint64_t generation() const noexcept { return generation_; }
  // Subscribes once for the whole queue, to the channels `req` names (every waiter of one key
  // names the same); `then` runs when the subscription is confirmed or failed.
  void subscribe_then(const AcquireRequest& req, std::function<void()> then);

  // Shutdown: every waiter fails with `why`.
  void fail_all(const Error& why);

  // Any message on the lock's own channel means it may be free ("released", "revoked", or a
  // compatible client's own message, e.g. Redisson's "0"). For a lock with a waiters' roll,
  // 'released <id>' on this Client's own channel names it (mutex_release.lua): its turn, even
  // if this process released the lock itself a moment ago, so no holding back.
  // A MultiLock's ordered try that gave back its first groups says 'released <this queue's
  // key>' (multi_release.lua): that is this queue's own head, not the holder it waits for.
  // `channel`: its index in channels_.
  void on_notification(std::size_t channel, std::string_view message) {
    constexpr std::string_view named = "released ";
    if (message.starts_with(named)) {
      const std::string_view who = message.substr(named.size());
      if (who == key_) return;
      if (keeps_roll() && who == core_.client_id()) core_.clear_courtesy(key_);
    }
    if (only_ && channel < lock_channels_ && channel != *only_) return;
    if (wake_only_on_ != nullptr && message != wake_only_on_) return;
    wake();
  }

  // Until the next try, only a message on the request's channel `i` wakes (Attempt::
  // busy_channel); listen_to_all() while a try is in flight, so that a release it raced is heard.
  void listen_only(std::size_t i) noexcept { only_ = i < lock_channels_ ? std::optional<std::size_t>(i) : std::nullopt; }
  void listen_to_all() noexcept { only_.reset(); }

 private:
  void wake();
  void name_channels(const AcquireRequest& req);
  friend struct KeyspaceListener;

  struct ChannelListener final : Notifier::Listener {
    WaitQueue* queue;
    std::size_t index;
    ChannelListener(WaitQueue* q, std::size_t i) : queue(q), index(i) {}
    void on_notification(std::string_view message) override { queue->on_notification(index, message); }
    void on_resubscribed() override { queue->wake(); }
  };

  ClientCore& core_;
  std::string key_;
  std::vector<std::string> channels_;
  std::size_t lock_channels_ = 0;  // channels_[0, lock_channels_): the request's own; then this Client's
  std::vector<std::unique_ptr<ChannelListener>> listeners_;  // one per channel, same order
  std::optional<std::size_t> only_;
  const char* wake_only_on_ = nullptr;  // AcquireRequest::wake_only_on
  std::vector<std::string> keyspace_channels_;
  bool keyspace_subscribed_ = false;
  std::size_t unconfirmed_ = 0;
  // The keyspace channel carries every command that touched the key; only the ones that free it
  // matter.
  struct KeyspaceListener final : Notifier::Listener {
    WaitQueue* queue;
    explicit KeyspaceListener(WaitQueue* q) : queue(q) {}
    void on_notification(std::string_view event) override {
      if (queue->wake_only_on_ != nullptr) return;
      if (event == "del" || event == "expired" || event == "evicted") queue->wake();
    }
    void on_resubscribed() override { queue->wake(); }
  } keyspace_listener_{this};
  // A vector, not a deque: a deque allocates twice when made, and a queue is made for nearly
  // every acquisition; queues are short, so erasing at the front costs little.
  std::vector<std::shared_ptr<AcquireOp>> ops_;
  void (*withdraw_)(ClientCore&, const std::string&, std::string_view) = nullptr;
  bool on_roll_ = false;
  bool failing_ = false;  // fail_all() is ending every wait: no head takes over meanwhile
  bool subscribed_ = false;
  bool confirmed_ = false;
  std::vector<std::function<void()>> on_confirmed_;
  std::uint64_t generation_ = 0;
};

class AcquireOp final : public std::enable_shared_from_this<AcquireOp> {
 public:
  AcquireOp(std::shared_ptr<ClientCore> core, AcquireRequest req, AcquireDone done)
      : core_(std::move(core)),
        req_(std::move(req)),
        done_(std::move(done)) {
    req_.wait = normalize_wait(req_.wait);
    if (req_.wait.timeout) deadline_ = BootClock::now() + *req_.wait.timeout;
  }

  // Cancels the wait when `stop` is requested. The callback only posts to the loop thread.
  void watch(std::stop_token stop) {
    stop_cb_.emplace(std::move(stop), std::function<void()>([core = core_, weak = weak_from_this()] {
                       core->post([weak] {
                         if (auto op = weak.lock()) op->cancel();
                       });
                     }));
  }

  void start() {
    if (state_ == State::done) return;  // cancelled before it started
    if (core_->is_shut_down()) return finish(Error(errc::shutdown, "client is shut down"));
    if (req_.wait.timeout && req_.wait.timeout->count() <= 0) {
      single_ = true;
      return try_now();
    }
    arm_deadline();
    queue_ = core_->wait_queue(req_.key, req_);
    queue_->push(shared_from_this());
    if (queue_->is_head(this)) return become_head();
    waiting();  // behind another waiter of this process: nothing is sent until it is done
  }

  // `held_here`: the previous head just took the lock, so a try now would only fail. Waiting for
  // the release notification instead keeps this process from racing its own holder's release
  // against the other processes' waiters (the notification reaches every process alike).
  void become_head(bool held_here = false, std::optional<milliseconds> holder_ttl = std::nullopt) {
    if (state_ == State::done) return;
    // Not while this process holds back after its own release: the lock has just been offered
    // to a waiter elsewhere, so the try would most likely fail and be followed by the
    // subscribe-then-try anyway (one command less per handoff).
    if (!held_here && !queue_->confirmed() && !fast_path_used_ && !core_->courtesy_until(req_.key)) {
      fast_path_used_ = true;
      // Fast path: a free lock costs one round trip, no subscription. Only when this try finds
      // it busy does the wait begin — and it begins with subscribe-then-try, so a release
      // between the two tries cannot be missed.
      unsubscribed_try_ = true;
      return try_now();
    }
    state_ = State::subscribing;
    // Subscribed only now: a release published before the subscription took effect (the
    // previous head took the lock with its unsubscribed try, and may already have let it go)
    // was heard by nobody here, so the first wait begins with a try, as every new subscription's.
    const bool subscribed_before = queue_->confirmed();
    queue_->subscribe_then(req_, [self = shared_from_this(), held_here, holder_ttl, subscribed_before] {
      if (self->state_ != State::subscribing) return;
      // A Client off the roll (its previous head acquired with nobody queued behind it; this
      // waiter came later) would never be named: one try, which finds the lock busy, puts it on.
      if (!held_here || !subscribed_before || (self->queue_->keeps_roll() && !self->queue_->on_roll())) {
        return self->try_now();
      }
      self->seen_generation_ = self->queue_->generation();
      self->sleep(BootClock::now(), holder_ttl);
    });
  }

  // A release was announced (or the subscription was re-established).
  void wake() {
    if (state_ != State::sleeping) return;
    if (timer_) timer_->cancel();
    // A notification that arrives after the deadline, before the sleep's own timer ran (the
    // deadline timer leaves a sleeping waiter to it): a try now would not be bounded by it.
    // Kept alive: finishing takes this op out of its queue, which may hold the last reference.
    const auto self = shared_from_this();
    if (past_deadline()) return;
    try_now();
  }

  void fail(const Error& why) { finish(why); }

  // The caller's stop_token was triggered.
  void cancel() {
    if (state_ == State::done) return;
    Error e(errc::cancelled, "waiting for " + req_.what + " was cancelled");
    // A try in flight may take the lock. Finish only once its reply is in (and a lock it took is
    // released), so that a caller who cancels and then exits leaves no lock behind. This delays
    // the cancellation by at most one round trip (bounded by the command timeout).
    if (state_ == State::trying) {
      if (!pending_cancel_) pending_cancel_ = std::move(e);
      return;
    }
    finish(std::move(e));
  }

 private:
  enum class State { queued, subscribing, trying, sleeping, done };

  void try_now() {
    // Fairness across processes: this process just released the lock while waiters elsewhere
    // were notified. Its own next try waits a moment (ClientCore::note_release), otherwise the
    // process whose event loop is already awake would take the lock again and again. A one-try
    // acquire (timeout 0) is not held back: it must answer now.
    if (!single_) {
      if (auto until = core_->courtesy_until(req_.key)) {
        const auto at = deadline_ ? std::min(*until, *deadline_) : *until;
        state_ = State::sleeping;
        waiting();
        sleep_timer().expires_at(at);
        timer_->async_wait([self = shared_from_this()](std::error_code ec) {
          if (!ec && self->state_ == State::sleeping && !self->past_deadline()) self->try_after_courtesy();
        });
        return;
      }
    }
    try_after_courtesy();
  }

  void try_after_courtesy() {
    state_ = State::trying;
    try_sent_ = BootClock::now();
    seen_generation_ = queue_ ? queue_->generation() : 0;
    if (queue_) queue_->listen_to_all();
    TryContext ctx;
    ctx.subscribed = queue_ && queue_->confirmed() && !unsubscribed_try_;
    roll_try_ = ctx.subscribed && queue_->keeps_roll();
    if (ctx.subscribed) ctx.place_ttl = place_ttl(req_.wait);
    if (roll_try_) {
      ctx.waiter = core_->client_id();
      ctx.more_waiters = queue_->size() > 1;
      leaves_roll_ = !ctx.more_waiters;
      queue_->set_on_roll(true);
    }
    req_.attempt(ctx, [self = shared_from_this()](Attempt a) { self->on_attempt(std::move(a)); });
  }

  // A waiter tries again at least every recheck interval (+20 % jitter); its place outlives two
  // of them, so only a waiter that stopped trying (gone, crashed, cut off) loses it.
  static milliseconds place_ttl(const WaitOptions& w) {
    return std::chrono::duration_cast<milliseconds>(w.recheck_interval * 2.4) + milliseconds(1000);
  }

  void on_attempt(Attempt a) {
    last_round_trip_ = BootClock::now() - try_sent_;
    // The try that acquired left the roll (none of this Client's waiters remained behind it).
    if (roll_try_ && leaves_roll_ && a.kind == Attempt::Kind::acquired && queue_) queue_->set_on_roll(false);
    if (state_ == State::done) {
      // Abandoned at its deadline while this try was in flight; nobody will receive the lease.
      if (a.kind == Attempt::Kind::acquired) release_unwanted(a.lease);
      return;
    }
    if (a.kind == Attempt::Kind::acquired && core_->is_shut_down()) {
      // Answered while the Client shuts down (a one-try acquire is in no wait queue, so the
      // shutdown did not end it): its step 1 may have released the held leases already, and a
      // lease handed out now would be released by nobody. Given back, then the caller is told.
      return release_unwanted(a.lease, [self = shared_from_this()] {
        self->finish(Error(errc::shutdown, "client is shut down"));
      });
    }
    if (pending_cancel_) {
      // The caller gave up while this try was in flight; nobody will receive the lease.
      if (a.kind != Attempt::Kind::acquired) return finish(std::move(*pending_cancel_));
      return release_unwanted(a.lease, [self = shared_from_this()] { self->finish(std::move(*self->pending_cancel_)); });
    }
    switch (a.kind) {
      case Attempt::Kind::acquired:
        // A shared hold with room left: the next waiter takes its turn now (see Attempt).
        if (a.room_left && queue_) {
          pass_turn_ = *a.room_left > 0 || queue_->generation() != seen_generation_;
          others_ttl_ = a.holder_ttl;
        }
        return finish(Lease(std::move(a.lease)));
      case Attempt::Kind::failed: return finish(std::move(a.error));
      case Attempt::Kind::busy: break;
    }
    if (single_) {
      // Still busy (the documented outcome of a try that did not get the lock), but said as it
      // was: "held by another owner" sent operators looking for a holder nobody was.
      if (a.late) {
        return finish(Error(errc::busy, req_.what +
                                            " was acquired, but the answer came after the lease's validity ended, so "
                                            "it was given back (a slow server or a paused process)"));
      }
      return finish(Error(errc::busy, req_.what + " is held by another owner"));
    }
    // A try that acquired but was answered after its validity ended was given back. Once, it is
    // a pause or a hiccup; try after try, the lease TTL is shorter than this server's round
    // trip, and the wait would go on to its deadline (or for ever) taking and giving back.
    late_in_a_row_ = a.late ? late_in_a_row_ + 1 : 0;
    if (late_in_a_row_ >= kLateTriesToGiveUp) {
      const auto took = std::chrono::duration_cast<milliseconds>(last_round_trip_).count();
      return finish(Error(errc::invalid_argument, "acquiring " + req_.what + ": " + std::to_string(kLateTriesToGiveUp) +
                                             " tries in a row acquired, but were answered after the lease's "
                                             "validity had ended (the last took " + std::to_string(took) +
                                             " ms) and were given back: the lease TTL is too short for this "
                                             "server's latency"));
    }
    if (unsubscribed_try_) {
      unsubscribed_try_ = false;
      return become_head();  // now subscribes, then tries again
    }
    const auto now = BootClock::now();
    if (deadline_ && now >= *deadline_) return finish(Error(errc::timeout, "timed out waiting for " + req_.what));
    // A release announced while the try was in flight: try again at once.
    if (queue_->generation() != seen_generation_) return try_now();
    if (a.busy_channel) queue_->listen_only(*a.busy_channel);
    sleep(now, a.holder_ttl);
  }

  void sleep(BootClock::time_point now, std::optional<milliseconds> holder_ttl) {
    // (normalize_wait made a zero or negative interval the default one: never a polling loop.)
    auto d = std::chrono::duration_cast<BootClock::duration>(req_.wait.recheck_interval * jitter_between(0.8, 1.2));
    // The holder's TTL bounds the wait: a crashed holder's key expires without a notification.
    if (holder_ttl && holder_ttl->count() >= 0) d = std::min<BootClock::duration>(d, *holder_ttl + milliseconds(1));
    BootClock::time_point at = now + d;
    if (deadline_) {
      // The last try goes out about one try's round trip before the deadline, so that its
      // answer is in by then (a release by a client that publishes nothing is still noticed at
      // the end of a short wait); once that time has passed, the sleep runs to the deadline and
      // the wait ends there (past_deadline), without a try the deadline would not bound.
      // One such last try: a faster answer to it must not make room for another.
      const auto last_try = *deadline_ - last_round_trip_;
      if (!last_try_planned_ && last_try > now) {
        if (last_try <= at) last_try_planned_ = true;
        at = std::min(at, last_try);
      } else {
        at = std::min(at, *deadline_);
      }
    }
    state_ = State::sleeping;
    waiting();
    sleep_timer().expires_at(at);
    timer_->async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec && self->state_ == State::sleeping && !self->past_deadline()) self->try_now();
    });
  }

  // A sleep that ends at the deadline ends the wait: a try sent then would not be bounded by it
  // (the deadline timer leaves sleeping waiters to their own timer), and on a slow or paused
  // server the caller would get its timeout up to a command timeout late. The last try was sent
  // before (see sleep()).
  bool past_deadline() {
    if (!deadline_ || BootClock::now() < *deadline_) return false;
    finish(Error(errc::timeout, "timed out waiting for " + req_.what));
    return true;
  }

  // The wait may be long: a blocking caller need not poll for its result any more.
  void waiting() {
    if (req_.on_wait) std::exchange(req_.on_wait, {})();
  }

  // The deadline holds whatever the waiter is doing: queued, subscribing, or with a try in
  // flight on a slow or paused server. A try still in flight then is abandoned; if it took the
  // lock after all, its reply releases it (on_attempt).
  void arm_deadline() {
    if (!deadline_) return;
    deadline_timer_.emplace(core_->io());
    deadline_timer_->expires_at(*deadline_);
    deadline_timer_->async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || self->state_ == State::done || self->state_ == State::sleeping) return;  // sleep ends at the deadline itself
      self->finish(Error(errc::timeout, "timed out waiting for " + self->req_.what));
    });
  }

  BootTimer& sleep_timer() {
    if (!timer_) timer_.emplace(core_->io());
    return *timer_;
  }

  void finish(Result<Lease> result) {
    if (state_ == State::done) return;
    state_ = State::done;
    req_.on_wait = nullptr;  // never after the result (acquire_blocking's points at its waiter)
    if (timer_) timer_->cancel();
    if (deadline_timer_) deadline_timer_->cancel();
    if (queue_) {
      auto q = std::move(queue_);
      const bool acquired = result.ok() && !pass_turn_;
      // The next head waits for this hold's release, which a lease that runs out or is lost
      // never publishes: its sleep is bounded by this lease's validity, as a waiter's behind a
      // holder elsewhere is by the holder's TTL (shared holds: by the others' holds).
      // (Read only when a waiter is next: most acquisitions have nobody behind them.)
      std::optional<milliseconds> holder_ttl = others_ttl_;
      if (acquired && !holder_ttl && q->size() > 1) holder_ttl = result->remaining();
      q->remove(this, acquired, holder_ttl);
    }
    auto done = std::move(done_);
    done(std::move(result));
  }

  std::shared_ptr<ClientCore> core_;
  AcquireRequest req_;
  AcquireDone done_;
  // Made when first needed: most acquisitions never sleep, and many have no deadline. Making an
  // Asio timer looks its service up under a mutex, and cancelling one takes the reactor's.
  std::optional<BootTimer> timer_;           // sleeping between tries (sleep_timer())
  std::optional<BootTimer> deadline_timer_;  // the caller's deadline (arm_deadline())
  std::optional<BootClock::time_point> deadline_;
  BootClock::time_point try_sent_{};           // when the current (or last) try was sent
  BootClock::duration last_round_trip_{};      // how long the last try took
  bool last_try_planned_ = false;              // the sleep before the wait's last try was set
  std::shared_ptr<WaitQueue> queue_;
  State state_ = State::queued;
  bool single_ = false;
  bool unsubscribed_try_ = false;  // the current try was made before subscribing
  bool fast_path_used_ = false;    // at most one try before subscribing
  bool pass_turn_ = false;         // acquired with room left: the next head tries at once
  bool roll_try_ = false;          // the try in flight keeps a place on the waiters' roll
  bool leaves_roll_ = false;       // ... and leaves the roll if it acquires
  std::uint8_t late_in_a_row_ = 0;  // tries answered after their validity, in a row (on_attempt)
  std::optional<milliseconds> others_ttl_;  // acquired a shared hold: when others' holds expire
  std::uint64_t seen_generation_ = 0;
  std::optional<std::stop_callback<std::function<void()>>> stop_cb_;
  std::optional<Error> pending_cancel_;
};

void WaitQueue::push(const std::shared_ptr<AcquireOp>& op) { ops_.push_back(op); }

void WaitQueue::remove(AcquireOp* op, bool acquired, std::optional<milliseconds> holder_ttl) {
  const bool was_head = is_head(op);
  if (was_head) only_.reset();  // the next head's tries decide again what it waits for
  for (auto it = ops_.begin(); it != ops_.end(); ++it) {
    if (it->get() == op) {
      ops_.erase(it);
      break;
    }
  }
  if (ops_.empty()) {
    // Last waiter gone: give back a place on the roll that nobody here will use (a release
    // naming this Client would wake nobody), then drop the queue (and the subscription), after
    // a while when it is subscribed (ClientCore::linger_wait_queue).
    if (on_roll_) {
      on_roll_ = false;
      withdraw_(core_, key_, core_.client_id());
    }
    if (confirmed_ && !core_.is_shut_down()) return core_.linger_wait_queue(key_, shared_from_this());
    core_.forget_wait_queue(key_);
    return;
  }
  // Not once the Client shuts down either: a head that finished between the shutdown's start and
  // its fail_all() (its acquisition answered meanwhile) would let the next waiter send a try
  // that fail_all() is there to prevent (see there). fail_all() ends that waiter soon after.
  if (was_head && !failing_ && !core_.is_shut_down()) ops_.front()->become_head(acquired, holder_ttl);
}

void WaitQueue::fail_all(const Error& why) {
  auto self = shared_from_this();  // finishing the last op drops the queue from the registry
  auto ops = ops_;
  // A waiter that became head while the others are failed would send a try (one that keeps a
  // place on the roll) just before its own withdrawal, which could overtake it on another
  // connection: the place came back, and the shutdown's release named this Client.
  failing_ = true;
  for (auto& op : ops) op->fail(why);
  failing_ = false;
}

void WaitQueue::name_channels(const AcquireRequest& req) {
  channels_.push_back(req.channel);
  channels_.insert(channels_.end(), req.extra_channels.begin(), req.extra_channels.end());
  lock_channels_ = channels_.size();
  // A kind with a waiters' roll names this Client's waiter on a channel of its own, so a
  // release wakes no other process (mutex_release.lua).
  if (withdraw_) channels_.push_back(req.channel + ":" + core_.client_id());
  for (std::size_t i = 0; i < channels_.size(); ++i) listeners_.push_back(std::make_unique<ChannelListener>(this, i));
  const std::string prefix = "__keyspace@" + std::to_string(core_.address().db) + "__:";
  if (req.watch_keys.empty()) keyspace_channels_.push_back(prefix + req.key);
  for (const auto& k : req.watch_keys) keyspace_channels_.push_back(prefix + k);
}

void WaitQueue::subscribe_then(const AcquireRequest& req, std::function<void()> then) {
  if (confirmed_) return then();
  on_confirmed_.push_back(std::move(then));
  if (subscribed_) return;
  subscribed_ = true;
  name_channels(req);
  if (core_.keyspace_events()) {
    keyspace_subscribed_ = true;
    for (const auto& ch : keyspace_channels_) core_.notifier().subscribe(ch, &keyspace_listener_, [](const Error&) {});
  }
  unconfirmed_ = channels_.size();
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    core_.notifier().subscribe(channels_[i], listeners_[i].get(), [self = weak_from_this()](const Error&) {
      // Even when a subscription failed we go on: every wait is bounded by the recheck
      // interval, and the subscription is retried after the connection comes back.
      auto q = self.lock();
      if (!q || --q->unconfirmed_ > 0) return;
      q->confirmed_ = true;
      auto waiting = std::move(q->on_confirmed_);
      q->on_confirmed_.clear();
      for (auto& f : waiting) f();
    });
  }
}

void WaitQueue::wake() {
  ++generation_;
  if (!ops_.empty()) ops_.front()->wake();
}

std::shared_ptr<WaitQueue> ClientCore::wait_queue(const std::string& key, const AcquireRequest& req) {
  auto& slot = wait_queues_[key];
  if (auto q = slot.lock()) {
    if (!lingering_.empty()) lingering_.erase(key);  // waited on again: its new waiter keeps it
    return q;
  }
  auto q = std::make_shared<WaitQueue>(*this, key, req);
  slot = q;
  return q;
}

void ClientCore::forget_wait_queue(const std::string& key) { wait_queues_.erase(key); }

namespace {
// Long enough to span the gap between two waits of a process on a lock it contends for (one
// hold of another process, typically milliseconds), short enough that a lock waited on once
// leaves no subscription behind for long.
constexpr auto wait_queue_linger = std::chrono::seconds(1);
}  // namespace

void ClientCore::linger_wait_queue(const std::string& key, std::shared_ptr<WaitQueue> queue) {
  const auto until = BootClock::now() + wait_queue_linger;
  lingering_[key] = Lingering{std::move(queue), until};
  // Every entry lingers equally long, so an armed timer is due no later than this one.
  if (!linger_armed_) arm_linger(until);
}

void ClientCore::arm_linger(BootClock::time_point at) {
  if (!linger_timer_) linger_timer_ = std::make_unique<BootTimer>(io());
  linger_armed_ = true;
  linger_timer_->expires_at(at);
  linger_timer_->async_wait([this](std::error_code ec) {
    linger_armed_ = false;
    if (ec) return;
    const auto now = BootClock::now();
    std::optional<BootClock::time_point> next;
    std::vector<std::shared_ptr<WaitQueue>> done;  // destroyed (unsubscribing) after the loop
    for (auto it = lingering_.begin(); it != lingering_.end();) {
      if (it->second.until <= now) {
        done.push_back(std::move(it->second.queue));
        wait_queues_.erase(it->first);
        it = lingering_.erase(it);
      } else {
        next = next ? std::min(*next, it->second.until) : it->second.until;
        ++it;
      }
    }
    if (next) arm_linger(*next);
  });
}

void ClientCore::note_release(std::string_view key_view, long long notified, BootClock::duration round_trip,
                              bool others_only) {
  const std::string key(key_view);
  // Our own waiters' subscription received the notification too; it does not count.
  if (!others_only) {
    if (auto it = wait_queues_.find(key); it != wait_queues_.end()) {
      if (auto q = it->second.lock(); q && q->subscribed()) --notified;
    }
  }
  if (notified <= 0) return;
  const auto hold_back = hold_back_after_release(round_trip);
  const auto now = BootClock::now();
  if (courtesy_.size() >= 1024) std::erase_if(courtesy_, [&](const auto& kv) { return kv.second <= now; });
  courtesy_[key] = now + hold_back;
}

void ClientCore::clear_courtesy(const std::string& key) {
  if (!courtesy_.empty()) courtesy_.erase(key);
}

std::optional<BootClock::time_point> ClientCore::courtesy_until(const std::string& key) {
  if (courtesy_.empty()) return std::nullopt;
  auto it = courtesy_.find(key);
  if (it == courtesy_.end()) return std::nullopt;
  if (it->second <= BootClock::now()) {
    courtesy_.erase(it);
    return std::nullopt;
  }
  return it->second;
}

void ClientCore::fail_waiters(const Error& why, std::function<void()> drained) {
  std::vector<std::shared_ptr<WaitQueue>> queues;
  for (auto& [key, weak] : wait_queues_) {
    if (auto q = weak.lock()) queues.push_back(std::move(q));
  }
  std::shared_ptr<Countdown> count;
  if (drained) count = Countdown::make(1, std::move(drained));
  // A Mutex wait that ends gives its Client's place on the roll back; with `drained` its answer
  // is awaited (cleanup_started()), or a release that follows on another connection of the
  // node (a lock's own connection is down, Node::pick) could still find the place and name
  // this Client.
  {
    cleanups_ = count;
    struct Unset {  // whatever happens, cleanups sent later are not counted
      std::shared_ptr<Countdown>& counting;
      ~Unset() { counting.reset(); }
    } unset{cleanups_};
    for (auto& q : queues) q->fail_all(why);
  }
  lingering_.clear();
  if (linger_timer_) linger_timer_->cancel();
  auto hooks = std::move(shutdown_hooks_);  // a hook's wait removes itself as it ends
  shutdown_hooks_.clear();
  if (!count) {
    for (auto& [id, fn] : hooks) fn(why, {});
    return;
  }
  for (auto& [id, fn] : hooks) {
    count->add();
    fn(why, [count] { count->done(); });
  }
  count->done();
}

std::function<void()> ClientCore::cleanup_started() {
  if (!cleanups_) return {};
  cleanups_->add();
  return [count = cleanups_] { count->done(); };
}

std::uint64_t ClientCore::add_shutdown_hook(ShutdownHook fn) {
  const std::uint64_t id = next_hook_id_++;
  shutdown_hooks_.emplace(id, std::move(fn));
  return id;
}

void ClientCore::remove_shutdown_hook(std::uint64_t id) { shutdown_hooks_.erase(id); }

void start_acquire(const std::shared_ptr<ClientCore>& core, AcquireRequest req, AcquireDone done,
                   std::stop_token stop) {
  if (core->is_shut_down()) return done(Error(errc::shutdown, "client is shut down"));
  auto op = std::make_shared<AcquireOp>(core, std::move(req), std::move(done));
  if (stop.stop_possible()) op->watch(stop);
  core->post([op] { op->start(); });
}

Result<Lease> acquire_blocking(const std::shared_ptr<ClientCore>& core, AcquireRequest req, std::stop_token stop) {
  if (core->on_loop_thread()) {
    return Error(errc::called_from_event_loop,
                 "blocking acquire of " + req.what + " called on the client's event-loop thread; use async_acquire");
  }
  auto wait = std::make_shared<SyncWait<Result<Lease>>>();
  // By pointer: small enough for std::function to keep without an allocation. It runs only on
  // the loop thread and before the result (AcquireOp::finish drops it first), while this caller
  // still waits below and holds `wait`.
  req.on_wait = [parked = wait.get()] { parked->park(); };
  start_acquire(core, std::move(req), [wait](Result<Lease> r) { wait->set(std::move(r)); }, std::move(stop));
  return wait->wait(*core);
}

namespace {

// A hold in parts (an ordered MultiLock: one record per Cluster slot group) has no scripts of
// its own: each part is released as one lease would be, and `then` runs once every part's
// release was answered. The parent is neither renewed nor counted (its parts are).
void release_unwanted_parts(const std::shared_ptr<LeaseRecord>& parent, std::function<void()> then) {
  if (!parent->begin_release()) {
    if (then) then();
    return;
  }
  auto left = Countdown::make(parent->parts.size(), [parent, then = std::move(then)] {
    parent->finish_release();
    if (then) then();
  });
  for (const auto& part : parent->parts) release_unwanted(part, [left] { left->done(); });
}

}  // namespace

void release_unwanted(const std::shared_ptr<LeaseRecord>& rec, std::function<void()> then) {
  if (!rec->parts.empty()) return release_unwanted_parts(rec, std::move(then));
  if (!rec->begin_release()) {
    if (then) then();
    return;
  }
  rec->core->renewals().remove(*rec);
  if (!rec->hold) rec->core->active_leases_.fetch_sub(1);  // a take counts through its hold
  else reentrant_take_released(rec);
  if (rec->scripts.fanout) {
    // A Redlock hold: released on every node, each sent again while its outcome is unknown
    // (QuorumFanout); `then` runs on the verdict.
    rec->scripts.fanout->run(*rec->scripts.release, rec->scripts.release_key_list(), rec->release_args(),
                             [rec, then = std::move(then)](Result<Reply>) {
                               rec->finish_release();
                               if (then) then();
                             });
    return;
  }
  // Sent again while its outcome is unknown (idempotent_call.hpp); `then` runs on the first
  // answer, so a caller is not held up while the node is down.
  send_idempotent(
      rec->core,
      [rec, payload = rec->release_payload()](
          ReplyHandler done) { rec->core->eval_now(*rec->scripts.release, payload, std::move(done)); },
      [rec, then = std::move(then)](Result<Reply>) {
        rec->finish_release();
        if (then) then();
      });
}

}  // namespace dlock::detail
