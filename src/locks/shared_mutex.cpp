#include "dlock/shared_mutex.hpp"

#include <algorithm>
#include <atomic>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"
#include "locks/idempotent_call.hpp"
#include "locks/release_memory.hpp"
#include "locks/thread_holds.hpp"
#include "locks/script_attempt.hpp"
#include "scripts/script_call.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail::scripts {
extern const Script rw_acquire_read;
extern const Script rw_acquire_write;
extern const Script rw_renew;
extern const Script rw_release;
extern const Script rw_downgrade;
extern const Script rw_withdraw;
}  // namespace dlock::detail::scripts

namespace dlock {

using namespace detail;
// The mode tag of the calling thread's hold in ThreadHolds.
enum Mode : int { exclusive = 0, shared = 1 };

namespace {

// Readers must not share a process-local wait queue: a queue lets only its head try, and after
// the head took a (shared) hold the next one would wait for a release notification that a
// reader's entry never causes. Each reader acquisition gets a queue of its own instead; they all
// listen on the lock's one channel.
std::atomic<std::uint64_t> next_reader_queue{0};

// Runs an idempotent script and waits for its reply, sent again while its outcome is unknown
// (idempotent_call.hpp).
Result<Reply> eval_blocking(const std::shared_ptr<ClientCore>& core, const Script& s,
                            const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  return call_idempotent(*core, [&](ReplyHandler done) { core->eval(s, keys, args, std::move(done)); });
}

}  // namespace

SharedMutex::SharedMutex(Client& client, std::string name, LeaseOptions lease)
    : core_(client.core()), name_(std::move(name)), lease_(std::move(lease)),
      holds_(std::make_unique<ThreadHolds>()) {
  if (auto ok = validate_lock_name(name_); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease_); !ok) throw_error(ok.code(), ok.error().what());
  key_ = core_->lock_key(name_);

  auto base = std::make_shared<ScriptAttemptSpec>();
  base->name = name_;
  base->kind = "SharedMutex";
  base->keys = {key_, key_ + ":readers", key_ + ":wintent", key_ + ":fence"};
  base->hold.renew = &scripts::rw_renew;
  base->hold.renew_keys = {key_, key_ + ":readers"};
  base->hold.release = &scripts::rw_release;
  base->hold.release_keys = {key_, key_ + ":readers", key_ + ":released", key_ + ":wintent"};
  base->hold.release_extra = {key_ + ":ch", std::to_string(release_memory(core_->options()).count())};
  base->lease = lease_;

  auto write = std::make_shared<ScriptAttemptSpec>(*base);
  write->acquire = &scripts::rw_acquire_write;
  write_spec_ = std::move(write);
  base->acquire = &scripts::rw_acquire_read;
  read_spec_ = std::move(base);
}

SharedMutex::~SharedMutex() = default;  // ThreadHolds releases what lock()/lock_shared() took

AcquireRequest SharedMutex::write_request(WaitOptions wait, std::shared_ptr<std::string>& owner, bool& intent) const {
  // A try that will not wait registers no intent: it would only keep readers out for nothing.
  intent = !(wait.timeout && wait.timeout->count() <= 0);
  // One owner for the tries of this acquisition, so its intent is refreshed, not duplicated
  // (replaced after a try that had to release it: ScriptAttemptSpec::owner).
  owner = std::make_shared<std::string>(core_->new_owner_token());
  auto spec = std::make_shared<ScriptAttemptSpec>(*write_spec_);
  spec->owner = owner;
  // The intent lives one lease TTL, like a hold: a writer that dies while waiting keeps readers
  // out no longer than a writer that dies holding it. The script caps the waiter's sleep to a
  // third of it, so a live writer's intent never lapses.
  spec->extra_args = {intent ? std::to_string(lease_.ttl.count()) : "0"};
  AcquireRequest req;
  // The queue of this process's writers (readers have their own). It is named by the lock key,
  // the first key of rw_release: a release that woke writers elsewhere holds back this Client's
  // next try on this queue (ClientCore::note_release is keyed by the first release key).
  req.key = key_;
  req.channel = key_ + ":ch";
  req.what = core_->lock_what("SharedMutex", name_, " (write)");
  req.wait = wait;
  req.attempt = script_attempt(core_, std::move(spec));
  // A writer's hold ends when P{N} goes (release, expiry); readers' when their zset goes.
  req.watch_keys = {key_, key_ + ":readers"};
  return req;
}

AcquireRequest SharedMutex::read_request(WaitOptions wait) const {
  AcquireRequest req;
  req.key = key_ + ":r:" + std::to_string(next_reader_queue.fetch_add(1));
  req.channel = key_ + ":ch";
  req.what = core_->lock_what("SharedMutex", name_, " (read)");
  req.wait = wait;
  req.attempt = script_attempt(core_, read_spec_);
  // Readers wait for the writer's P{N} and for the writers' intents to go.
  req.watch_keys = {key_, key_ + ":wintent"};
  return req;
}

void SharedMutex::start_write(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop,
                              std::function<void()> on_wait) {
  std::shared_ptr<std::string> owner;  // the current one, read when the intent is withdrawn
  bool intent = false;
  AcquireRequest req = write_request(wait, owner, intent);
  req.on_wait = std::move(on_wait);
  if (intent) {
    // The tries in flight (on the loop thread only). The withdrawal below must not overtake the
    // last try: a wait that ends at its deadline abandons a try still out, and the withdrawal
    // may take another connection (the lock's own is down, Node::pick) and run first; the try
    // then left a fresh intent that kept readers out for a whole lease TTL.
    struct Tries {
      unsigned out = 0;
      std::function<void()> then;  // the withdrawal, once none is out
    };
    auto tries = std::make_shared<Tries>();
    req.attempt = [attempt = std::move(req.attempt), tries](const TryContext& ctx, std::function<void(Attempt)> report) {
      ++tries->out;
      attempt(ctx, [tries, report = std::move(report)](Attempt a) {
        --tries->out;
        report(std::move(a));
        if (tries->out == 0 && tries->then) std::exchange(tries->then, {})();
      });
    };
    // A writer that stops waiting (timeout, cancel, error) withdraws its intent, and reports
    // only once that is answered: after try_lock_for() returned false, readers are not kept out.
    // Not awaited when the connection is the problem. Either way the withdrawal is sent again
    // while its outcome is unknown (idempotent_call.hpp): otherwise the intent kept readers out
    // until it expired, one lease TTL (30 s by default) after a blip.
    // The key names are built only for a withdrawal: most writers acquire.
    done = [core = core_, spec = write_spec_, owner, tries,
            done = std::make_shared<std::function<void(Result<Lease>)>>(std::move(done))](Result<Lease> r) {
      if (r.ok()) return (*done)(std::move(r));
      const std::string key(spec->keys.front());  // P{N}, the first acquire key
      auto withdraw = [core, wintent = key + ":wintent", owner = *owner,
                       channel = key + ":ch"](ReplyHandler answered) {
        core->eval(scripts::rw_withdraw, {wintent}, {owner, channel}, std::move(answered));
      };
      std::function<void()> send;
      if (r.code() == errc::connection || r.code() == errc::shutdown) {
        send = [core, withdraw = std::move(withdraw)]() mutable { send_idempotent(core, std::move(withdraw)); };
        (*done)(std::move(r));
      } else {
        auto failed = std::make_shared<Result<Lease>>(std::move(r));
        send = [core, withdraw = std::move(withdraw), done, failed]() mutable {
          send_idempotent(core, std::move(withdraw), [done, failed](Result<Reply>) { (*done)(std::move(*failed)); });
        };
      }
      // The caller hears of a timeout no later than with one connection, where the withdrawal
      // queued behind the try it was abandoning.
      if (tries->out == 0) return send();
      tries->then = std::move(send);
    };
  }
  start_acquire(core_, std::move(req), std::move(done), std::move(stop));
}

Result<Lease> SharedMutex::acquire(WaitOptions wait, std::stop_token stop) {
  if (core_->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "blocking acquire of SharedMutex '" + name_ +
                                                   "' called on the client's event-loop thread; use async_acquire");
  }
  auto result = std::make_shared<SyncWait<Result<Lease>>>();
  start_write(wait, [result](Result<Lease> r) { result->set(std::move(r)); }, std::move(stop),
              [result] { result->park(); });
  return result->wait(*core_);
}

Result<Lease> SharedMutex::acquire_shared(WaitOptions wait, std::stop_token stop) {
  return acquire_blocking(core_, read_request(wait), std::move(stop));
}

void SharedMutex::async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop) {
  start_write(wait, std::move(done), std::move(stop));
}

void SharedMutex::async_acquire_shared(WaitOptions wait, std::function<void(Result<Lease>)> done,
                                       std::stop_token stop) {
  start_acquire(core_, read_request(wait), std::move(done), std::move(stop));
}

Result<void> SharedMutex::downgrade(Lease& writer) {
  const std::shared_ptr<LeaseRecord>& rec = writer.record();
  if (!rec || rec->core != core_ || rec->scripts.renew != &scripts::rw_renew || rec->scripts.renew_keys.empty() ||
      rec->scripts.renew_keys.front() != key_) {
    return Error(errc::invalid_argument, "downgrade(): the lease is not one of SharedMutex '" + name_ + "'");
  }
  const std::string what = "SharedMutex '" + name_ + "' on " + core_->where();
  if (rec->state() == LeaseRecord::State::lost) return Error(errc::lock_lost, what + " was lost before the downgrade");
  if (rec->state() != LeaseRecord::State::held) {
    return Error(errc::not_owner, what + " is no longer held by this lease");
  }
  if (core_->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "SharedMutex::downgrade() called on the client's event-loop thread");
  }
  // Retrying is safe: a downgrade that already happened answers 2.
  Result<Reply> r = eval_blocking(core_, scripts::rw_downgrade, {key_, key_ + ":readers"},
                                  {rec->owner, std::to_string(lease_.ttl.count()), key_ + ":ch"});
  if (!r.ok()) return Error(r.code(), "downgrade of " + what + ": " + r.error().what());
  if (r->is_error()) return Error(classify_error_reply(*r), "downgrade of " + what + ": " + r->str());
  if (r->is_integer() && (r->integer() == 1 || r->integer() == 2)) return {};
  auto lost = rec;
  core_->post([lost] { lost->core->renewals().lose(lost, LossReason::taken); });
  return Error(errc::lock_lost, what + " was no longer held by this owner at the downgrade (expired or taken over)");
}

// ------------------------------------------------------------------------- standard members

void SharedMutex::lock() {
  if (holds_->holds()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "SharedMutex '" + name_ + "' is already held by this thread");
  }
  Result<Lease> r = acquire(WaitOptions{});
  if (!r) throw_error(r.code(), r.error().what());
  holds_->store(std::move(*r), Mode::exclusive);
}

void SharedMutex::lock_shared() {
  if (holds_->holds()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "SharedMutex '" + name_ + "' is already held by this thread");
  }
  Result<Lease> r = acquire_shared(WaitOptions{});
  if (!r) throw_error(r.code(), r.error().what());
  holds_->store(std::move(*r), Mode::shared);
}

bool SharedMutex::timed_try(milliseconds d, bool shared) {
  if (holds_->holds()) return false;
  WaitOptions wait;  // the default recheck interval
  wait.timeout = std::max(d, milliseconds(0));
  Result<Lease> r = shared ? acquire_shared(wait) : acquire(wait);
  if (!r) {
    if (r.code() == errc::busy || r.code() == errc::timeout) return false;
    throw_error(r.code(), r.error().what());
  }
  holds_->store(std::move(*r), shared ? Mode::shared : Mode::exclusive);
  return true;
}

bool SharedMutex::try_lock() { return timed_try(milliseconds(0), false); }
bool SharedMutex::try_lock_shared() { return timed_try(milliseconds(0), true); }

void SharedMutex::unlock() noexcept {
  if (holds_->release_mine(Mode::exclusive)) return;
  try {
    holds_->note_error(Error(errc::not_owner, "unlock(): this thread holds no exclusive hold of SharedMutex '" + name_ + "'"));
  } catch (...) {
  }
}

void SharedMutex::unlock_shared() noexcept {
  if (holds_->release_mine(Mode::shared)) return;
  try {
    holds_->note_error(Error(errc::not_owner, "unlock_shared(): this thread holds no shared hold of SharedMutex '" + name_ + "'"));
  } catch (...) {
  }
}

void SharedMutex::downgrade() {
  std::optional<Lease> lease = holds_->take_mine(Mode::exclusive);
  if (!lease) {
    throw std::system_error(std::make_error_code(std::errc::operation_not_permitted),
                            "downgrade(): this thread holds no exclusive hold of SharedMutex '" + name_ + "'");
  }
  Result<void> r = downgrade(*lease);
  // On an unknown outcome the hold stays recorded as exclusive; unlock() ends it either way.
  holds_->store(std::move(*lease), r.ok() ? Mode::shared : Mode::exclusive);
  if (!r) throw_error(r.code(), r.error().what());
}

bool SharedMutex::owns_lock() const noexcept { return holds_->holds(Mode::exclusive); }
bool SharedMutex::owns_shared() const noexcept { return holds_->holds(Mode::shared); }
FencingToken SharedMutex::fencing_token() const noexcept { return holds_->token(); }
bool SharedMutex::lost() const noexcept { return holds_->lost(); }
milliseconds SharedMutex::remaining() const noexcept { return holds_->remaining(); }
Error SharedMutex::last_error() const { return holds_->last_error(); }

}  // namespace dlock
