#include "dlock/lease.hpp"

#include "client_core.hpp"
#include "renewal/lease_record.hpp"
#include "scripts/script_call.hpp"
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

bool Lease::held() const noexcept { return rec_ && rec_->state() == LeaseRecord::State::held; }
bool Lease::lost() const noexcept { return rec_ && rec_->state() == LeaseRecord::State::lost; }
std::optional<LossReason> Lease::loss_reason() const noexcept {
  if (!lost()) return std::nullopt;
  return rec_->loss_reason();
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
  if (!held()) return milliseconds(0);
  auto left = rec_->valid_until() - BootClock::now();
  if (left.count() <= 0) return milliseconds(0);
  return std::chrono::duration_cast<milliseconds>(left);
}

namespace {

std::string describe(const LeaseRecord& rec) {
  return "lock '" + rec.name + "' on " + rec.core->address().display();
}

// Runs one of the hold's scripts where the hold lives: its server, or all of them (Redlock).
void eval_hold(const LeaseRecord& rec, const detail::Script& script, const std::vector<std::string>& keys,
               const std::vector<std::string>& args, detail::ReplyHandler done) {
  if (rec.scripts.fanout) return rec.scripts.fanout->run(script, keys, args, std::move(done));
  rec.core->eval(script, keys, args, std::move(done));
}

// Runs a script for this lease and waits for the reply; retried once after a connection error
// (release and renew are idempotent for the same owner, so a retry cannot do harm).
Result<Reply> run_blocking(const std::shared_ptr<LeaseRecord>& rec, const detail::Script& script,
                           const std::vector<std::string>& keys, const std::vector<std::string>& args,
                           std::function<void(const Result<Reply>&)> on_loop = {}) {
  Result<Reply> r = Error(errc::connection);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto wait = std::make_shared<detail::SyncWait<Result<Reply>>>();
    eval_hold(*rec, script, keys, args, [wait, on_loop](Result<Reply> reply) {
      if (on_loop) on_loop(reply);
      wait->set(std::move(reply));
    });
    r = wait->wait();
    if (r.ok() || (r.code() != errc::connection && r.code() != errc::timeout)) break;
  }
  return r;
}

}  // namespace

Result<void> Lease::extend(milliseconds ttl) {
  if (!rec_) return Error(errc::invalid_argument, "extend() on an empty Lease");
  if (ttl.count() <= 0) return Error(errc::invalid_argument, "extend(): the TTL must be positive");
  if (rec_->state() != LeaseRecord::State::held) {
    return Error(errc::not_owner, describe(*rec_) + " is no longer held by this lease");
  }
  if (rec_->core->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "Lease::extend() called on the client's event-loop thread");
  }
  const std::vector<std::string> args = rec_->renew_args(ttl);
  const auto sent = BootClock::now();
  auto rec = rec_;
  Result<Reply> r = run_blocking(rec, *rec->scripts.renew, rec->scripts.renew_keys, args,
                                 [rec, ttl, sent](const Result<Reply>& reply) {
                                   // On the loop thread, so the scheduler sees the new TTL in order.
                                   if (!reply.ok() || !reply->is_integer()) return;
                                   if (reply->integer() == 1) rec->core->renewals().extended(rec, ttl, sent);
                                   else rec->core->renewals().lose(rec, LossReason::taken);
                                 });
  if (!r.ok()) return r.error();
  if (r->is_error()) return Error(detail::classify_error_reply(*r), describe(*rec) + ": " + r->str());
  if (!r->is_integer() || r->integer() != 1) {
    return Error(errc::not_owner, describe(*rec) + " is no longer held by this owner");
  }
  return {};
}

Result<void> Lease::release() noexcept {
  if (!rec_) return {};
  try {
    auto rec = rec_;
    const auto state = rec->state();
    if (state == LeaseRecord::State::released) return {};
    if (!rec->begin_release()) {
      if (state == LeaseRecord::State::lost || rec->state() == LeaseRecord::State::lost) {
        return Error(errc::lock_lost, describe(*rec) + " was lost before it was released");
      }
      return {};  // another thread is releasing it
    }
    rec->core->active_leases_.fetch_sub(1);
    if (rec->core->is_shut_down()) {
      rec->finish_release();
      return Error(errc::shutdown, "client is shut down; " + describe(*rec) + " expires at its TTL");
    }
    // Renewal is cancelled before the release is sent. A renewal already under way that crosses
    // the release finds the key gone and changes nothing: the renew script never re-creates a
    // key, and its reply is ignored once the lease is releasing.
    rec->core->post([rec] { rec->core->renewals().remove(*rec); });
    const std::vector<std::string> args = rec->release_args();
    if (rec->core->on_loop_thread()) {
      eval_hold(*rec, *rec->scripts.release, rec->scripts.release_keys, args,
                [rec](Result<Reply>) { rec->finish_release(); });
      return Error(errc::called_from_event_loop,
                   "release of " + describe(*rec) + " sent from the event-loop thread; its outcome is not awaited");
    }
    Result<Reply> r = run_blocking(rec, *rec->scripts.release, rec->scripts.release_keys, args);
    if (!r.ok()) {
      rec->finish_release();
      return Error(r.code(), "release of " + describe(*rec) + " failed (" + r.error().what() +
                                 "); the key expires at its TTL");
    }
    if (r->is_error()) {
      rec->finish_release();
      return Error(detail::classify_error_reply(*r), "release of " + describe(*rec) + ": " + r->str());
    }
    if (r->is_integer() && (r->integer() == 1 || r->integer() == 2)) {
      rec->finish_release();
      return {};
    }
    // Not ours any more: it expired or was taken over while we believed we held it.
    rec->mark_lost(LossReason::taken);
    return Error(errc::lock_lost, describe(*rec) +
                                      " was no longer held by this owner at release (expired or taken over)");
  } catch (...) {
    return Error(errc::server, "release failed: out of memory");
  }
}

}  // namespace dlock
