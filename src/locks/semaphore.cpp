#include "dlock/semaphore.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <chrono>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"
#include "locks/release_memory.hpp"
#include "locks/script_attempt.hpp"
#include "scripts/script_call.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail::scripts {
extern const Script sem_acquire;
extern const Script sem_renew;
extern const Script sem_release;
extern const Script sem_set_limit;
extern const Script sem_state;
}  // namespace dlock::detail::scripts

namespace dlock {

namespace detail {
// The two queues' requests for acquisitions of one permit count: the same try (one spec), which
// waits in the shared queue or in the over-limit one (below). Each leg copies one of them and
// sets its own wait.
struct SemaphoreLegs {
  AcquireRequest shared;
  AcquireRequest over;
};
}  // namespace detail

using namespace detail;

namespace {

// Waiting (see semaphore.hpp, "Waiting"): the waiters of one Client on one Semaphore form one
// process-local FIFO, acquire_op's WaitQueue keyed by the permits zset, so only its head tries and
// a release costs one try per process rather than one per waiter. A head that takes permits while
// more are free passes its turn on at once (sem_acquire.lua's third reply element, room_left in
// the Attempt), so several permits freed together are all taken.
//
// The queue is FIFO with head-of-line blocking: a head that needs k permits holds the waiters
// behind it until k are free at once. That wait ends when holders release or expire, except for
// a k above the limit, which only set_permits() can satisfy: such a waiter leaves the shared queue
// for one of its own (this suffix, then k), where it waits for a resize without holding anybody
// up. One such queue per k: a resize that lets a smaller k in must not leave it queued behind a
// larger one still above the limit (only a queue's head tries).
constexpr const char* over_limit_queue = ":permits:over-limit";

Result<Reply> eval_blocking(const std::shared_ptr<ClientCore>& core, const Script& s,
                            const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  if (core->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "blocking Semaphore call on the client's event-loop thread");
  }
  auto wait = std::make_shared<SyncWait<Result<Reply>>>();
  core->eval(s, keys, args, [wait](Result<Reply> reply) { wait->set(std::move(reply)); });
  return wait->wait(*core);
}

// One leg of a wait, in the shared queue or in the over-limit one. A try that shows k on the
// wrong side of the limit for this queue ({0, -1} in the shared queue: k is above the limit, no
// expiry would make room; {0, pttl} in the over-limit queue: a resize made k fit, and now
// releases count) ends the leg with a marker error, and the wait goes on in the other queue,
// at its end, with what is left of the timeout.
void wait_in_queue(std::shared_ptr<ClientCore> core, std::shared_ptr<const SemaphoreLegs> legs, WaitOptions wait,
                   std::function<void()> on_wait, bool over_limit, BootClock::time_point started,
                   std::function<void(Result<Lease>)> done, std::stop_token stop) {
  AcquireRequest leg = over_limit ? legs->over : legs->shared;
  leg.wait = wait;
  if (leg.wait.timeout) {
    const auto spent = std::chrono::duration_cast<milliseconds>(BootClock::now() - started);
    if (spent >= *leg.wait.timeout) return done(Error(errc::timeout, "timed out waiting for " + leg.what));
    *leg.wait.timeout -= spent;
  }
  leg.on_wait = on_wait;
  auto moves = std::make_shared<bool>(false);
  leg.attempt = [inner = std::move(leg.attempt), moves, over_limit](const TryContext& ctx,
                                                                    std::function<void(Attempt)> report) {
    inner(ctx, [moves, over_limit, report = std::move(report)](Attempt a) {
      if (a.kind == Attempt::Kind::busy && a.holder_ttl.has_value() == over_limit) {
        *moves = true;
        a = Attempt{};
        a.error = Error(errc::busy, over_limit ? "within the limit again" : "over the limit");  // never seen
      }
      report(std::move(a));
    });
  };
  start_acquire(core, std::move(leg),
                [core, legs = std::move(legs), wait, on_wait = std::move(on_wait), over_limit, started, moves,
                 done = std::move(done), stop](Result<Lease> r) mutable {
                  // Only the marker moves the wait; a cancellation or timeout that raced it stands.
                  if (!*moves || r.ok() || r.code() != errc::busy) return done(std::move(r));
                  wait_in_queue(std::move(core), std::move(legs), wait, std::move(on_wait), !over_limit, started,
                                std::move(done), std::move(stop));
                },
                stop);
}

}  // namespace

Semaphore::Semaphore(Client& client, std::string name, std::size_t permits, LeaseOptions lease)
    : core_(client.core()), name_(std::move(name)), initial_permits_(permits), lease_(std::move(lease)) {
  if (auto ok = validate_lock_name(name_); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease_); !ok) throw_error(ok.code(), ok.error().what());
  key_ = core_->lock_key(name_);
  one_ = legs(1);
}

Semaphore::~Semaphore() {
  std::deque<Lease> all;
  {
    std::lock_guard lock(mu_);
    all.swap(held_);
  }
  for (auto& l : all) (void)l.release();
}

std::shared_ptr<const SemaphoreLegs> Semaphore::legs(std::size_t k) const {
  const std::string count = std::to_string(k);
  auto spec = std::make_shared<ScriptAttemptSpec>();
  spec->name = name_;
  spec->kind = "Semaphore";
  spec->acquire = &scripts::sem_acquire;
  spec->keys = {key_, key_ + ":permits", key_ + ":limit", key_ + ":fence"};
  spec->extra_args = {count, std::to_string(initial_permits_)};
  spec->hold.renew = &scripts::sem_renew;
  spec->hold.renew_keys = {key_ + ":permits", key_};  // sem_renew.lua: the zset, then the claim
  spec->hold.renew_extra = {count};
  spec->hold.release = &scripts::sem_release;
  spec->hold.release_keys = {key_ + ":permits", key_ + ":released", key_};
  spec->hold.release_extra = {key_ + ":ch", std::to_string(release_memory(core_->options()).count()), count};
  spec->lease = lease_;
  auto legs = std::make_shared<SemaphoreLegs>();
  AcquireRequest& req = legs->shared;
  req.key = key_ + ":permits";  // the Client's one wait queue for this semaphore
  req.channel = key_ + ":ch";
  req.what = core_->lock_what("Semaphore", name_, " (" + count + (k == 1 ? " permit)" : " permits)"));
  req.attempt = script_attempt(core_, std::move(spec));
  req.watch_keys = {key_ + ":permits"};  // gone when the last permit is released or expires
  legs->over = req;  // the same try (one spec), waiting in the other queue
  legs->over.key = key_ + over_limit_queue + (":" + count);
  legs->over.wake_only_on = "resized";  // a release never makes room for more than the limit
  return legs;
}

void Semaphore::start(std::size_t k, WaitOptions wait, std::function<void(Result<Lease>)> done,
                      std::stop_token stop, std::function<void()> on_wait) const {
  std::shared_ptr<const SemaphoreLegs> l = k == 1 ? one_ : legs(k);
  if (wait.timeout && wait.timeout->count() <= 0) {  // one try: it queues behind nobody
    AcquireRequest req = l->shared;
    req.wait = wait;
    req.on_wait = std::move(on_wait);
    return start_acquire(core_, std::move(req), std::move(done), std::move(stop));
  }
  wait_in_queue(core_, std::move(l), wait, std::move(on_wait), /*over_limit=*/false, BootClock::now(),
                std::move(done), std::move(stop));
}

Result<Lease> Semaphore::acquire(std::size_t k, WaitOptions wait, std::stop_token stop) {
  if (k == 0) return Error(errc::invalid_argument, "Semaphore::acquire(): k must be at least 1");
  if (core_->on_loop_thread()) {
    return Error(errc::called_from_event_loop,
                 "blocking acquire of Semaphore '" + name_ + "' called on the client's event-loop thread; use async_acquire");
  }
  auto result = std::make_shared<SyncWait<Result<Lease>>>();
  start(k, wait, [result](Result<Lease> r) { result->set(std::move(r)); }, std::move(stop),
        [result] { result->park(); });
  return result->wait(*core_);
}

void Semaphore::async_acquire(std::size_t k, WaitOptions wait, std::function<void(Result<Lease>)> done,
                              std::stop_token stop) {
  if (k == 0) return done(Error(errc::invalid_argument, "Semaphore::async_acquire(): k must be at least 1"));
  start(k, wait, std::move(done), std::move(stop));
}

// ---------------------------------------------------------------- counting_semaphore members

void Semaphore::acquire() {
  Result<Lease> r = acquire(1, WaitOptions{});
  if (!r) throw_error(r.code(), r.error().what());
  std::lock_guard lock(mu_);
  held_.push_back(std::move(*r));
}

bool Semaphore::timed_try(milliseconds d) {
  WaitOptions wait;  // the default recheck interval
  wait.timeout = std::max(d, milliseconds(0));
  Result<Lease> r = acquire(1, wait);
  if (!r) {
    if (r.code() == errc::busy || r.code() == errc::timeout) return false;
    throw_error(r.code(), r.error().what());
  }
  std::lock_guard lock(mu_);
  held_.push_back(std::move(*r));
  return true;
}

bool Semaphore::try_acquire() { return timed_try(milliseconds(0)); }

void Semaphore::release(std::size_t n) {
  std::vector<Lease> mine;
  {
    std::lock_guard lock(mu_);
    if (n > held_.size()) {
      throw_error(make_error_code(errc::invalid_argument),
                  "Semaphore '" + name_ + "': release(" + std::to_string(n) + ") but only " +
                      std::to_string(held_.size()) + " permits are held through acquire()");
    }
    for (std::size_t i = 0; i < n; ++i) {
      mine.push_back(std::move(held_.front()));
      held_.pop_front();
    }
  }
  Error last;
  for (auto& l : mine) {  // outside the lock: each blocks for a round trip
    Result<void> r = l.release();
    if (!r.ok() && (!last || r.code() == errc::lock_lost)) last = r.error();
  }
  std::lock_guard lock(mu_);
  last_error_ = last;
}

std::size_t Semaphore::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

Error Semaphore::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

// ----------------------------------------------------------------------------------- limit

Result<void> Semaphore::set_permits(std::size_t n) {
  const std::string what = "Semaphore '" + name_ + "' on " + core_->where();
  Result<Reply> r = eval_blocking(core_, scripts::sem_set_limit, {key_, key_ + ":permits", key_ + ":limit"},
                                  {std::to_string(n), key_ + ":ch"});
  if (!r.ok()) return Error(r.code(), "set_permits of " + what + ": " + r.error().what());
  if (r->is_error()) return Error(classify_error_reply(*r), "set_permits of " + what + ": " + r->str());
  return {};
}

// The stored limit comes back as its text (digits only; sem_state.lua checks): a Lua number is
// exact only below 2^53, and one of 2^63 or more came back as a negative integer, which read as
// "no limit stored" and reported the constructor's count. A count beyond size_t (written by
// someone else) reads as the largest.
Result<std::pair<std::size_t, std::size_t>> Semaphore::state() const {
  const std::string what = "Semaphore '" + name_ + "' on " + core_->where();
  Result<Reply> r = eval_blocking(core_, scripts::sem_state, {key_, key_ + ":permits", key_ + ":limit"}, {});
  if (!r.ok()) return Error(r.code(), what + ": " + r.error().what());
  if (r->is_error()) return Error(classify_error_reply(*r), what + ": " + r->str());
  if (!r->is_array() || r->size() != 2 || !(*r)[0].is_string() || !(*r)[1].is_integer() || (*r)[1].integer() < 0) {
    return Error(errc::protocol, what + ": unexpected reply " + r->to_string());
  }
  const std::string& text = (*r)[0].str();
  std::size_t limit = initial_permits_;
  if (!text.empty()) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec == std::errc::result_out_of_range) limit = std::numeric_limits<std::size_t>::max();
    else if (ec != std::errc() || end != text.data() + text.size()) {
      return Error(errc::protocol, what + ": unexpected limit " + r->to_string());
    }
  }
  return std::pair<std::size_t, std::size_t>{limit, static_cast<std::size_t>((*r)[1].integer())};
}

Result<std::size_t> Semaphore::permits() const {
  auto s = state();
  if (!s) return s.error();
  return s->first;
}

Result<std::size_t> Semaphore::available() const {
  auto s = state();
  if (!s) return s.error();
  return s->first > s->second ? s->first - s->second : 0;
}

}  // namespace dlock
