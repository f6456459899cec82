#include "dlock/lease.hpp"

#include <atomic>
#include <mutex>
#include <optional>

#include "client_core.hpp"
#include "locks/idempotent_call.hpp"
#include "locks/reentrant_hold.hpp"
#include "locks/release_seam.hpp"
#include "renewal/lease_record.hpp"
#include "scripts/script_call.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock {

using detail::LeaseRecord;

Lease::Lease(std::shared_ptr<LeaseRecord> rec) noexcept : rec_(std::move(rec)) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    (void)release();
    rec_ = std::move(other.rec_);
  }
  return *this;
}

Lease::~Lease() { (void)release(); }

namespace {

// When the validity of `rec` (a lease still in state held) ends: its own, its hold's (a take of
// a ReentrantMutex hold) or its shortest part's (a hold in parts; the parent is never renewed).
// nullopt when the hold or a part is no longer held.
std::optional<BootClock::time_point> validity_end(const LeaseRecord& rec) noexcept {
  const LeaseRecord& valid = rec.hold ? *rec.hold : rec;
  if (valid.state() != LeaseRecord::State::held) return std::nullopt;
  auto until = rec.parts.empty() ? valid.valid_until() : BootClock::time_point::max();
  for (const auto& part : rec.parts) {
    if (part->state() != LeaseRecord::State::held) return std::nullopt;
    until = std::min(until, part->valid_until());
  }
  return until;
}

// Held, and its validity has ended, though the watchdog has not said so yet: its alarm (on
// CLOCK_BOOTTIME, util/boot_alarm.hpp) is due, or the loop has not run it yet (busy, or the
// process just resumed). Meanwhile held() must not say yes, nor lost() no.
bool ran_out(const LeaseRecord& rec) noexcept {
  if (rec.state() != LeaseRecord::State::held) return false;
  const auto end = validity_end(rec);
  return end && *end <= BootClock::now();
}

}  // namespace

bool Lease::held() const noexcept {
  if (!rec_ || rec_->state() != LeaseRecord::State::held) return false;
  const auto end = validity_end(*rec_);
  return !end || *end > BootClock::now();  // a hold or part found ended is the watchdog's to report
}
bool Lease::lost() const noexcept {
  return rec_ && (rec_->state() == LeaseRecord::State::lost || ran_out(*rec_));
}
std::optional<LossReason> Lease::loss_reason() const noexcept {
  if (!rec_) return std::nullopt;
  if (rec_->state() == LeaseRecord::State::lost) return rec_->loss_reason();
  if (ran_out(*rec_)) return LossReason::expired;
  return std::nullopt;
}

const std::string& Lease::name() const noexcept {
  static const std::string none;
  return rec_ ? rec_->name : none;
}
const std::string& Lease::owner() const noexcept {
  static const std::string none;
  return rec_ ? rec_->owner : none;
}
FencingToken Lease::token() const noexcept { return rec_ ? rec_->token : FencingToken{}; }

milliseconds Lease::remaining() const noexcept {
  if (!rec_ || rec_->state() != LeaseRecord::State::held) return milliseconds(0);
  const auto end = validity_end(*rec_);
  if (!end) return milliseconds(0);
  auto left = *end - BootClock::now();
  if (left.count() <= 0) return milliseconds(0);
  return std::chrono::duration_cast<milliseconds>(left);
}

namespace {

std::string describe(const LeaseRecord& rec) {
  return "lock '" + rec.name + "' on " + rec.core->where();
}

// Runs one of the hold's scripts where the hold lives: its server, or all of them (Redlock).
void eval_hold(const LeaseRecord& rec, const detail::Script& script, const std::vector<std::string>& keys,
               const std::vector<std::string>& args, detail::ReplyHandler done) {
  if (rec.scripts.fanout) return rec.scripts.fanout->run(script, keys, args, std::move(done));
  rec.core->eval(script, keys, args, std::move(done));
}

// Runs a script for this lease and waits for the reply, sent again while its outcome is unknown
// (idempotent_call.hpp: release and renew are idempotent for the same owner).
Result<Reply> run_blocking(const std::shared_ptr<LeaseRecord>& rec, const detail::Script& script,
                           const std::vector<std::string>& keys, const std::vector<std::string>& args,
                           std::function<void(const Result<Reply>&)> on_loop = {}) {
  return detail::call_idempotent(
      *rec->core, [&](detail::ReplyHandler done) { eval_hold(*rec, script, keys, args, std::move(done)); }, &on_loop);
}

// The release of a hold on one server: its EVALSHA encoded for each send (the first one, and a
// resend after an unknown outcome) by LeaseRecord::release_payload(), in one allocation.
Result<Reply> run_release_blocking(const std::shared_ptr<LeaseRecord>& rec,
                                   std::function<void(const Result<Reply>&)> on_loop) {
  return detail::call_idempotent(
      *rec->core,
      [&](detail::ReplyHandler done) { rec->core->eval(*rec->scripts.release, rec->release_payload(), std::move(done)); },
      &on_loop);
}

Result<void> extend_record(const std::shared_ptr<LeaseRecord>& rec, milliseconds ttl);
Result<void> release_parts(const std::shared_ptr<LeaseRecord>& parent);
using ReleaseDone = std::function<void(Result<void>)>;
void release_claimed_async(const std::shared_ptr<LeaseRecord>& rec, bool report_loss, ReleaseDone done);

// What a release's reply says (the caller claimed the release: begin_release). A loss found
// here is the caller's to report; `report_loss` runs on_lost for a caller that cannot be told
// (a release from the event loop, whose outcome nobody awaits), once, as the watchdog would.
Result<void> settle_release(const std::shared_ptr<LeaseRecord>& rec, const Result<Reply>& r, bool report_loss) {
  if (!r.ok()) {
    rec->finish_release();
    return Error(r.code(), "release of " + describe(*rec) + " failed (" + r.error().what() +
                               "); the key expires at its TTL");
  }
  if (r->is_error()) {
    rec->finish_release();
    return Error(detail::classify_error_reply(r.value()), "release of " + describe(*rec) + ": " + r->str());
  }
  if (r->is_integer() && r->integer() >= 1) {  // 1, 2, or >= 3: released (see the scripts)
    rec->finish_release();
    return {};
  }
  // Not ours any more: it expired or was taken over while we believed we held it.
  if (rec->mark_lost(LossReason::taken) && report_loss && rec->events.on_lost) rec->events.on_lost(LossReason::taken);
  return Error(errc::lock_lost, describe(*rec) +
                                    " was no longer held by this owner at release (expired or taken over)");
}

// Seen first by every reply to a hold's release, where it arrives: the record leaves the
// watchdog's queue (and its revocation channel) on the loop thread, and a release whose
// notification reached waiters tells the fairness logic (note_release). Release scripts say how
// many subscribers their notification reached (2 + n).
void on_release_reply(LeaseRecord& held, const Result<Reply>& reply, BootClock::time_point sent) {
  // A command refused at once (the Client began shutting down after the checks above) is
  // answered on the caller's thread: the removal then goes to the loop as a handler.
  if (held.core->on_loop_thread()) held.core->renewals().remove(held);
  else held.core->post([self = held.shared_from_this()] { self->core->renewals().remove(*self); });
  if (reply.ok() && reply->is_integer() && reply->integer() >= 3) {
    held.core->note_release(held.scripts.first_release_key(), reply->integer() - 2, BootClock::now() - sent,
                            held.scripts.layout && held.scripts.layout->names_waiters);
  }
}

// A release once the Client shuts down. Its step 1 releases every lease still held
// (ClientCore::shutdown), and taking the lease out of its hands (begin_release) could leave the
// key to sit out its TTL (step 1 over, the connections closing). So this waits
// for step 1 and reports what became of the records it releases: this one, the hold of a take
// (ReentrantMutex), or the parts of a hold in parts.
// On an event-loop thread (a callback) it cannot wait: while step 1 is not over, the lease is
// left to it, and the outcome is not awaited, as for any release sent from a loop thread.
// What success means for a Redlock lease here: its home node deleted the key (the others were
// sent the release too, unconfirmed).
// async_release() never waits: while step 1 is not over, it answers shutdown.
Result<void> release_at_shutdown(const std::shared_ptr<LeaseRecord>& rec, bool may_wait = true) {
  using State = LeaseRecord::State;
  if (!may_wait && rec->core->held_release_pending()) {
    return Error(errc::shutdown, describe(*rec) +
                                     " is released by its Client's shutdown; an asynchronous release does not await "
                                     "the outcome");
  }
  if (detail::ClientCore::on_a_loop_thread() && rec->core->held_release_pending()) {
    return Error(errc::called_from_event_loop, describe(*rec) +
                                                   " is released by its Client's shutdown; called from an event-loop "
                                                   "thread, the outcome is not awaited");
  }
  if (may_wait) rec->core->await_held_release();
  std::vector<const LeaseRecord*> released_by_shutdown;
  if (rec->hold) released_by_shutdown.push_back(rec->hold.get());
  else if (!rec->parts.empty()) {
    for (const auto& part : rec->parts) released_by_shutdown.push_back(part.get());
  } else released_by_shutdown.push_back(rec.get());
  bool lost = false;
  bool all_released = true;
  bool untouched = false;  // step 1 did not release it (its time ran out first)
  for (const LeaseRecord* r : released_by_shutdown) {
    const State s = r->state();
    lost = lost || s == State::lost;
    all_released = all_released && s == State::released;
    untouched = untouched || s == State::held;
  }
  // This record, when step 1 did not act on it, is settled here (once).
  const bool own = rec->begin_release();
  if (own && !rec->hold && rec->parts.empty()) rec->core->active_leases_.fetch_sub(1);
  if (own) rec->finish_release();
  if (lost || rec->state() == State::lost) {
    return Error(errc::lock_lost, describe(*rec) + " was lost before it was released");
  }
  if (all_released) return {};
  return Error(errc::shutdown, "client is shut down; " + describe(*rec) +
                                   (untouched ? " expires at its TTL"
                                              : ": its release at shutdown got no answer or failed; if it did not "
                                                "arrive, the key expires at its TTL"));
}

}  // namespace

Result<void> Lease::extend(milliseconds ttl) {
  if (!rec_) return Error(errc::invalid_argument, "extend() on an empty Lease");
  if (ttl.count() <= 0) return Error(errc::invalid_argument, "extend(): the TTL must be positive");
  if (auto ok = detail::validate_bounded("extend(): the TTL", ttl); !ok) return ok;
  if (rec_->state() != LeaseRecord::State::held) {
    return Error(errc::not_owner, describe(*rec_) + " is no longer held by this lease");
  }
  if (rec_->core->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "Lease::extend() called on the client's event-loop thread");
  }
  // A hold in parts is extended part by part; the first failure is the answer (a part found
  // gone is lost, which loses the whole hold).
  for (const auto& part : rec_->parts) {
    if (auto r = extend_record(part, ttl); !r) return r;
  }
  if (!rec_->parts.empty()) return {};
  // A take of a shared hold extends the hold: its TTL is the hold's, renewed as a whole. A
  // loss found here is the hold's, and reaches every take through the hold's on_lost.
  return extend_record(rec_->hold ? rec_->hold : rec_, ttl);
}

namespace {

Result<void> extend_record(const std::shared_ptr<LeaseRecord>& rec, milliseconds ttl) {
  if (rec->state() != LeaseRecord::State::held) {
    return Error(errc::not_owner, describe(*rec) + " is no longer held by this lease");
  }
  // Refused before anything is sent: a TTL that leaves no validity after the drift allowance
  // (or none to renew in) would be lost the moment it was set.
  if (auto ok = detail::validate_lease(rec->policy.extended_to(ttl)); !ok) {
    return Error(errc::invalid_argument, "extend(" + std::to_string(ttl.count()) + " ms): " + ok.error().what());
  }
  const std::vector<std::string> args = rec->renew_args(ttl);
  const auto sent = BootClock::now();
  // An extension that may have run without this client learning it (no reply, an error after
  // a resend) leaves the key on the new TTL, possibly shorter than the old: from now until the
  // reply, the lease is believed valid only up to the earlier of the two ends. (Posted before
  // the send, so it is handled on the loop before the reply is.)
  const auto until_if_run = detail::LeaseTiming::from(rec->policy.extended_to(ttl)).validity_from(sent);
  // `before` and `tightened`: the validity before and after the tightening, written on the
  // loop before any reply is handled and read there by untighten(). `unknown`: a try's outcome
  // was unknown; written and read by the reply handler alone, whose calls follow one another.
  struct Pending {
    BootClock::time_point before{};
    BootClock::time_point tightened{};
    bool unknown = false;
  };
  auto pending = std::make_shared<Pending>();
  rec->core->post([rec, until_if_run, pending] {
    pending->before = rec->renewal.valid_until;
    rec->core->renewals().tighten(rec, until_if_run);
    pending->tightened = rec->renewal.valid_until;
  });
  // Posted, as a refusal at once may be handled on this thread: after the tightening above.
  auto untighten = [rec, pending] {
    rec->core->post([rec, pending] { rec->core->renewals().untighten(rec, pending->before, pending->tightened); });
  };
  // Set on the loop thread when a watchdog renewal was sent while the extension was in flight:
  // it carries the OLD TTL and, landing after the extension, cut the key's TTL back.
  auto raced = std::make_shared<std::atomic<bool>>(false);
  Result<Reply> r = run_blocking(rec, *rec->scripts.renew, rec->scripts.renew_key_list(), args,
                                 [rec, ttl, sent, raced, pending, untighten](const Result<Reply>& reply) {
                                   // On the loop thread, so the scheduler sees the new TTL in order.
                                   if (!reply.ok()) {
                                     // Never sent: the Client's queue for the node was full.
                                     // (Not a Redlock verdict: it names one node's error.)
                                     if (reply.code() == errc::overloaded && !pending->unknown && !rec->scripts.fanout) {
                                       return untighten();
                                     }
                                     pending->unknown = true;
                                     return;
                                   }
                                   // Refused before the script ran (READONLY, BUSY, LOADING...),
                                   // on the only try: the key keeps its old TTL, and so does the
                                   // validity. A script's own error may follow a write, and a
                                   // Redlock verdict sums several nodes: both stay tight.
                                   if (!pending->unknown && !rec->scripts.fanout &&
                                       detail::refused_before_running(reply.value())) {
                                     return untighten();
                                   }
                                   if (!reply->is_integer()) return;
                                   if (reply->integer() != 1) return rec->core->renewals().lose(rec, LossReason::taken);
                                   // Replies keep their order on a connection: a renewal still in
                                   // flight now was sent after the extension, and the key's end is
                                   // that renewal's, not the extension's, until corrected below.
                                   raced->store(rec->renewal.renew_in_flight);
                                   rec->core->renewals().extended(rec, ttl, sent, !raced->load());
                                 });
  if (r.ok() && r->is_integer() && r->integer() == 1 && raced->load()) {
    // Renew once more with the new TTL: sent after the racing renewal, it lands after it. Later
    // renewals use the new TTL, so when extend() returns the key has it. Only its success
    // raises the validity to the new TTL's.
    const auto again = BootClock::now();
    r = run_blocking(rec, *rec->scripts.renew, rec->scripts.renew_key_list(), args,
                     [rec, ttl, again](const Result<Reply>& reply) {
                       if (!reply.ok() || !reply->is_integer()) return;
                       if (reply->integer() == 0) return rec->core->renewals().lose(rec, LossReason::taken);
                       if (reply->integer() == 1) rec->core->renewals().extended(rec, ttl, again, true);
                     });
  }
  // This extension is settled (after any untighten() its handler posted): others may restore.
  rec->core->post([rec] {
    if (rec->renewal.extensions_in_flight > 0) --rec->renewal.extensions_in_flight;
  });
  if (!r.ok()) return r.error();
  if (r->is_error()) return Error(detail::classify_error_reply(*r), describe(*rec) + ": " + r->str());
  if (!r->is_integer() || r->integer() != 1) {
    return Error(errc::not_owner, describe(*rec) + " is no longer held by this owner");
  }
  // The server ran it, but the answer came after the validity had ended (the earlier of the
  // old and the new end): the lease is lost (on_lost ran), and its key was given back.
  if (rec->state() == LeaseRecord::State::lost) {
    return Error(errc::not_owner, describe(*rec) + " ran out of validity before the extension was answered");
  }
  return {};
}

// The checks before a release is sent: nothing when this call claimed the release (held ->
// releasing, counted off), else the outcome known now. `may_wait`: see release_at_shutdown.
std::optional<Result<void>> claim_release(const std::shared_ptr<LeaseRecord>& rec, bool may_wait) {
  const auto state = rec->state();
  if (state == LeaseRecord::State::released) return Result<void>{};
  if (rec->core->is_shut_down()) return release_at_shutdown(rec, may_wait);
  if (auto seam = detail::release_claim_seam.load(std::memory_order_relaxed)) seam();
  if (!rec->begin_release()) {
    if (state == LeaseRecord::State::lost || rec->state() == LeaseRecord::State::lost) {
      return Error(errc::lock_lost, describe(*rec) + " was lost before it was released");
    }
    // The shutdown's step 1 claimed it after the check above (it claims only once shut_down_
    // is set): its release is in flight, and its outcome is this call's.
    if (rec->core->is_shut_down()) return release_at_shutdown(rec, may_wait);
    return Result<void>{};  // another thread is releasing it
  }
  // Claimed, this release is ours even when the shutdown began since the check above: its step
  // 1 skips a lease being released, and the Client still sends commands until it closes its
  // connections, after those already sent are answered (ClientCore::send, settle_in_flight).
  // Handing the lease back to step 1 instead left its key to its TTL when step 1 had gone past.
  // A take is counted through its hold; a hold in parts through its parts.
  if (!rec->hold && rec->parts.empty()) rec->core->active_leases_.fetch_sub(1);
  if (rec->hold) detail::reentrant_take_released(rec);
  return std::nullopt;
}

}  // namespace

Result<void> Lease::release() noexcept {
  if (!rec_) return {};
  try {
    auto rec = rec_;
    if (auto known = claim_release(rec, true)) return std::move(*known);
    // From here the watchdog sends no renewal for it (it skips a record that is releasing), and
    // a renewal already under way that crosses the release finds the key gone and changes
    // nothing: the renew script never re-creates a key, and its reply is ignored once the lease
    // is releasing. The record leaves the watchdog's queue (and its revocation channel) on the
    // loop thread: with the release's reply (on_release_reply), not in a handler of its own.
    if (rec->core->on_loop_thread()) {
      // Nobody awaits this outcome, so a loss it finds is reported through on_lost.
      release_claimed_async(rec, true, {});
      return Error(errc::called_from_event_loop,
                   "release of " + describe(*rec) + " sent from the event-loop thread; its outcome is not awaited");
    }
    if (!rec->parts.empty()) return release_parts(rec);
    // The record is captured by pointer (this call waits for the reply and holds `rec`), which
    // keeps the callback within std::function's small buffer: no allocation per release.
    const auto sent = BootClock::now();
    auto on_loop = [held = rec.get(), sent](const Result<Reply>& reply) { on_release_reply(*held, reply, sent); };
    Result<Reply> r = rec->scripts.fanout ? run_blocking(rec, *rec->scripts.release, rec->scripts.release_key_list(),
                                                         rec->release_args(), on_loop)
                                          : run_release_blocking(rec, on_loop);
    return settle_release(rec, r, false);
  } catch (...) {
    return Error(errc::server, "release failed: out of memory");
  }
}

void Lease::async_release(std::function<void(Result<void>)> done) {
  if (!done) done = [](Result<void>) {};
  if (!rec_) return done({});
  auto rec = rec_;
  if (auto known = claim_release(rec, false)) return done(std::move(*known));
  release_claimed_async(rec, false, std::move(done));
}

namespace {

// The outcome of a hold in parts, gathered part by part (each released with its own scripts, as
// one Lease would): lock_lost if any part was no longer ours, else the first transport or server
// error, else success.
struct PartsOutcome {
  bool lost = false;
  std::optional<Error> failed;

  // Claims a part's release (false when it was no longer held: lost, or released already).
  // The caller then takes it off its watchdog (forget), outside any lock of its own: a post to a
  // Client whose loop has ended runs queued work on the posting thread (ClientCore::post).
  bool claim(LeaseRecord& part) {
    if (!part.begin_release()) {
      lost = lost || part.state() == LeaseRecord::State::lost;
      return false;
    }
    part.core->active_leases_.fetch_sub(1);
    return true;
  }
  static void forget(LeaseRecord& part) {
    part.core->post([self = part.shared_from_this()] { self->core->renewals().remove(*self); });
  }

  void add(const LeaseRecord& parent, const Result<Reply>& r) {
    if (!r.ok() || r->is_error()) {
      if (!failed) {
        failed = r.ok() ? Error(detail::classify_error_reply(r.value()), "release of " + describe(parent) + ": " + r->str())
                        : Error(r.code(), "release of " + describe(parent) + " failed (" + r.error().what() +
                                              "); the keys expire at their TTL");
      }
    } else if (!r->is_integer() || r->integer() < 1) {  // 1, 2, >= 3: released (the scripts)
      lost = true;
    }
  }

  Result<void> settle(const std::shared_ptr<LeaseRecord>& parent, bool report_loss) {
    if (lost) {
      if (parent->mark_lost(LossReason::taken) && report_loss && parent->events.on_lost) {
        parent->events.on_lost(LossReason::taken);
      }
      return Error(errc::lock_lost, describe(*parent) +
                                        " was no longer wholly held by this owner at release (expired or taken over)");
    }
    parent->finish_release();
    if (failed) return *failed;
    return {};
  }
};

Result<void> release_parts(const std::shared_ptr<LeaseRecord>& parent) {
  PartsOutcome outcome;
  for (const auto& part : parent->parts) {
    if (!outcome.claim(*part)) continue;
    PartsOutcome::forget(*part);
    Result<Reply> r = run_blocking(part, *part->scripts.release, part->scripts.release_key_list(), part->release_args());
    part->finish_release();
    outcome.add(*parent, r);
  }
  return outcome.settle(parent, false);
}

// release_parts() without blocking: the parts' releases go out together (they may live on
// several Clients), and `done` runs once the last one is answered.
void release_parts_async(const std::shared_ptr<LeaseRecord>& parent, bool report_loss, ReleaseDone done) {
  struct Gather {
    std::mutex mu;  // replies come on the loop of each part's Client, or at once on this thread
    PartsOutcome outcome;
    std::size_t left = 1;  // one more than the releases in flight until all are sent
    ReleaseDone done;
  };
  auto g = std::make_shared<Gather>();
  g->done = std::move(done);
  auto one_done = [g, parent, report_loss] {
    Result<void> out;
    {
      std::lock_guard lock(g->mu);
      if (--g->left > 0) return;
      out = g->outcome.settle(parent, report_loss);
    }
    if (g->done) g->done(std::move(out));
  };
  for (const auto& part : parent->parts) {
    {
      std::lock_guard lock(g->mu);
      if (!g->outcome.claim(*part)) continue;
      ++g->left;
    }
    PartsOutcome::forget(*part);
    detail::async_call_idempotent(
        part->core,
        [part](detail::ReplyHandler h) {
          part->core->eval(*part->scripts.release, part->scripts.release_key_list(), part->release_args(), std::move(h));
        },
        [g, part, parent, one_done](Result<Reply> r) {
          part->finish_release();
          {
            std::lock_guard lock(g->mu);
            g->outcome.add(*parent, r);
          }
          one_done();
        });
  }
  one_done();
}

// The release of a claimed lease (begin_release) without blocking: sent again while its outcome
// is unknown, as release() does, and `done` gets what release() would return.
void release_claimed_async(const std::shared_ptr<LeaseRecord>& rec, bool report_loss, ReleaseDone done) {
  if (!rec->parts.empty()) return release_parts_async(rec, report_loss, std::move(done));
  const auto sent = BootClock::now();
  detail::async_call_idempotent(
      rec->core,
      [rec](detail::ReplyHandler h) {
        if (rec->scripts.fanout) {
          return eval_hold(*rec, *rec->scripts.release, rec->scripts.release_key_list(), rec->release_args(),
                           std::move(h));
        }
        rec->core->eval(*rec->scripts.release, rec->release_payload(), std::move(h));
      },
      [rec, sent, report_loss, done = std::move(done)](Result<Reply> r) {
        on_release_reply(*rec, r, sent);
        Result<void> out = settle_release(rec, r, report_loss);
        if (done) done(std::move(out));
      });
}

}  // namespace

}  // namespace dlock
