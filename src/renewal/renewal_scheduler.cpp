#include "renewal/renewal_scheduler.hpp"

#include <charconv>

#include "client_core.hpp"
#include "locks/idempotent_call.hpp"
#include "scripts/script_call.hpp"

namespace dlock::detail {

namespace scripts {
extern const Script reentrant_release;
}  // namespace scripts

RenewalScheduler::RenewalScheduler(ClientCore& core, asio::io_context& io) : core_(core), timer_(io) {}

void RenewalScheduler::add(const std::shared_ptr<LeaseRecord>& rec) {
  schedule(rec, rec->policy.first_due(rec->renewal, BootClock::now()));
  if (rec->listen_for_revocation) {
    rec->listening = true;
    core_.notifier().subscribe(rec->scripts.channel_name(), rec.get(), [](const Error&) {});
  }
}

std::vector<std::string> LeaseRecord::release_args() const {
  std::vector<std::string> args{owner};
  scripts.append_release_extra(args);
  if (scripts.layout && scripts.layout->names_waiters) args.push_back(core->client_id());
  return args;
}

std::string LeaseRecord::release_payload() const {
  const bool names_waiter = scripts.layout && scripts.layout->names_waiters;
  return encode_evalsha_with(
      *scripts.release, [&](auto&& f) { scripts.visit_release_keys(f); },
      [&](auto&& f) {
        f(owner, std::string_view());
        scripts.visit_release_extra(f);
        if (names_waiter) f(core->client_id(), std::string_view());
      });
}

std::string LeaseRecord::renew_payload(milliseconds ttl) const {
  char buf[24];
  const std::string_view ttl_ms(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, ttl.count()).ptr - buf));
  return encode_evalsha_with(
      *scripts.renew, [&](auto&& f) { scripts.visit_renew_keys(f); },
      [&](auto&& f) {
        f(owner, std::string_view());
        f(ttl_ms, std::string_view());
        scripts.visit_renew_extra(f);
      });
}

void LeaseRecord::on_notification(std::string_view payload) {
  if (payload == "revoked" && listening) {
    if (auto self = weak_from_this().lock()) core->renewals().revoked(self);
  }
}

void LeaseRecord::on_resubscribed() {
  // Revocations published during the gap were missed: check the key now.
  if (!listening) return;
  if (auto self = weak_from_this().lock()) core->renewals().revoked(self);
}

void RenewalScheduler::revoked(const std::shared_ptr<LeaseRecord>& r) {
  if (r->state() != LeaseRecord::State::held) return;
  if (r->policy.mode() == LeaseMode::watchdog) {
    if (!r->renewal.renew_in_flight) {
      r->renewal.renew_in_flight = true;
      renew(r, BootClock::now());  // a renewal is the check: reply 0 means the key is gone
    }
  } else {
    check(r);
  }
}

// Fixed-TTL leases are never renewed; a revocation is checked with a read of the key's holder.
void RenewalScheduler::check(const std::shared_ptr<LeaseRecord>& rec) {
  core_.send_now(format_command({"GET", rec->scripts.first_renew_key()}), [this, rec](Result<Reply> r) {
    if (rec->state() != LeaseRecord::State::held || !r.ok()) return;
    if (!r->is_string() || r->str() != rec->owner) lose(rec, LossReason::taken);
  });
}

void RenewalScheduler::stop_listening(LeaseRecord& rec) {
  if (!rec.listening) return;
  rec.listening = false;
  core_.notifier().unsubscribe(rec.scripts.channel_name(), &rec);
}

void RenewalScheduler::schedule(const std::shared_ptr<LeaseRecord>& rec, time_point due) {
  queue_.remove(rec);
  queue_.add(due, rec);
  arm();
}

void RenewalScheduler::remove(LeaseRecord& rec) {
  stop_listening(rec);
  if (rec.slot == Queue::npos) return;
  // The queue's entry is found through the record's slot; removing it may drop the scheduler's
  // reference (the caller holds its own).
  std::shared_ptr<LeaseRecord> self = rec.shared_from_this();
  queue_.remove(self);
  arm();
}

std::vector<std::shared_ptr<LeaseRecord>> RenewalScheduler::take_all() {
  std::vector<std::shared_ptr<LeaseRecord>> all = queue_.pop_due(time_point::max());
  for (auto& r : all) stop_listening(*r);
  timer_.cancel();
  armed_for_.reset();
  closing_ = true;
  return all;
}

// The alarm is set again only for an earlier time. A lease released empties the queue, and the
// next one is due later than the alarm: an acquire/release pair (the hot path) then touches no
// timer (a timerfd_settime, a cancelled wait's handler and a new wait each time before). An
// alarm set too early fires once with nothing due, and on_timer sets it for the next time.
// Once the Client shuts down (take_all), an empty queue cancels the wait again: a pending wait
// is work that keeps the event loop from ending (a lease taken during the shutdown and then
// released would keep it running until the alarm's time, up to a renew interval).
void RenewalScheduler::arm() {
  auto next = queue_.next();
  if (!next) {
    if (closing_) {
      timer_.cancel();
      armed_for_.reset();
    }
    return;
  }
  if (armed_for_ && *armed_for_ <= *next) return;
  armed_for_ = *next;
  timer_.expires_at(*next);
  timer_.async_wait([this](std::error_code ec) {
    if (ec) return;  // cancelled: re-armed for another time
    armed_for_.reset();
    on_timer();
  });
}

// Everything due now is handled in this one loop iteration, so the renewals leave together in
// one pipelined write per connection: one round trip however many leases are due.
void RenewalScheduler::on_timer() {
  const time_point now = BootClock::now();
  for (auto& rec : queue_.pop_due(now)) {
    if (rec->state() != LeaseRecord::State::held) continue;  // releasing or gone
    apply(rec, rec->policy.on_due(rec->renewal, now), now);
  }
  arm();
}

void RenewalScheduler::apply(const std::shared_ptr<LeaseRecord>& rec, const RenewalStep& step, time_point now) {
  rec->set_valid_until(rec->renewal.valid_until);
  if (step.action == RenewalAction::lose) return lose(rec, LossReason::expired);
  if (step.report_at_risk && rec->events.on_at_risk) {
    rec->events.on_at_risk(std::chrono::duration_cast<milliseconds>(rec->renewal.valid_until - now));
  }
  if (step.action == RenewalAction::renew) renew(rec, now);
  if (step.next && rec->state() == LeaseRecord::State::held) schedule(rec, *step.next);
}

void RenewalScheduler::renew(const std::shared_ptr<LeaseRecord>& rec, time_point sent) {
  const milliseconds ttl = rec->policy.timing().ttl;
  auto on_reply = [this, rec, sent, ttl](Result<Reply> r) {
    if (rec->state() != LeaseRecord::State::held) return;
    const time_point now = BootClock::now();
    if (r.ok() && r->is_integer() && r->integer() == 0) return lose(rec, LossReason::taken);
    const bool ok = r.ok() && r->is_integer() && r->integer() == 1;
    if (ok && ttl != rec->policy.timing().ttl) {
      // extend() changed the TTL while this renewal was in flight; its own
      // bookkeeping already covers validity.
      rec->renewal.renew_in_flight = false;
      return;
    }
    apply(rec, ok ? rec->policy.on_renewed(rec->renewal, sent, now)
                  : rec->policy.on_renew_failed(rec->renewal, now),
          now);
  };
  // A hold on several servers (Redlock) renews on all of them; the verdict comes back here.
  if (rec->scripts.fanout) {
    return rec->scripts.fanout->run(*rec->scripts.renew, rec->scripts.renew_key_list(), rec->renew_args(ttl),
                                    std::move(on_reply));
  }
  core_.eval_now(*rec->scripts.renew, rec->renew_payload(ttl), std::move(on_reply));
}

void RenewalScheduler::extended(const std::shared_ptr<LeaseRecord>& rec, milliseconds ttl, time_point sent_at,
                                bool confirmed) {
  rec->policy.retime(ttl);
  rec->renewal.reply_before_extension = false;  // that renewal's reply is ignored now (another TTL)
  if (!confirmed) {
    // The corrective renewal (Lease::extend) is on its way; whatever validity the lease had
    // stands, and its renewals run on the new TTL from now on.
    if (rec->state() != LeaseRecord::State::held) return;
    return schedule(rec, std::min(rec->renewal.valid_until, sent_at + rec->policy.timing().renew_interval));
  }
  rec->renewal.valid_until = rec->policy.timing().validity_from(sent_at);
  rec->renewal.at_risk_reported = false;
  rec->set_valid_until(rec->renewal.valid_until);
  if (rec->state() != LeaseRecord::State::held) return;
  schedule(rec, rec->policy.first_due(rec->renewal, sent_at));
}

void RenewalScheduler::tighten(const std::shared_ptr<LeaseRecord>& rec, time_point until) {
  if (rec->renewal.extensions_in_flight < 255) ++rec->renewal.extensions_in_flight;
  if (rec->renewal.renew_in_flight) rec->renewal.reply_before_extension = true;
  if (rec->state() != LeaseRecord::State::held || until >= rec->renewal.valid_until) return;
  rec->renewal.valid_until = until;
  rec->set_valid_until(until);
  const auto due = queue_.due_of(rec);
  if (due && *due > until) schedule(rec, until);
}

void RenewalScheduler::untighten(const std::shared_ptr<LeaseRecord>& rec, time_point before, time_point tightened) {
  rec->renewal.reply_before_extension = false;  // the extension did not run: that reply counts
  // Only the tightening undone: a validity set since by something else (another extension, from
  // another thread, that ran) stands, and none is undone while another extension is out (it
  // may yet set a shorter TTL: its own tightening may have changed nothing).
  if (rec->renewal.valid_until != tightened || rec->renewal.extensions_in_flight > 1) return;
  if (rec->state() != LeaseRecord::State::held || before <= rec->renewal.valid_until) return;
  rec->renewal.valid_until = before;
  rec->renewal.at_risk_reported = false;
  rec->set_valid_until(before);
  // Renewed now (unless a renewal is in flight): renewals were held back towards the tightened
  // end, and the one that crossed the extension may have been answered without raising anything.
  schedule(rec, BootClock::now());
}

void RenewalScheduler::lose(const std::shared_ptr<LeaseRecord>& rec, LossReason why) {
  remove(*rec);
  const bool was_held = rec->state() == LeaseRecord::State::held;
  if (!rec->mark_lost(why)) return;
  core_.active_leases_.fetch_sub(1);
  // Not a ReentrantMutex hold: its owner is the thread, the same for the thread's next hold,
  // and its whole-hold release would delete a take of that thread the server ran just before
  // (reentrant_hold.cpp guards its own such drops against live takes; this one could not be).
  if (was_held && why == LossReason::expired && rec->policy.mode() == LeaseMode::watchdog && !rec->hold &&
      rec->parts.empty() && rec->scripts.release != &scripts::reentrant_release) {
    free_key(rec);
  }
  if (rec->events.on_lost) rec->events.on_lost(why);
}

// A watchdog lease whose validity ran out was not given up by the server: its last renewals
// went unanswered (a slow link, a paused server, a connection that broke), and the server may
// have run them. The key may then live a whole TTL past the loss, held by nobody, and everyone
// else waits it out. So it is released by its owner token, as an unwanted acquisition is
// (another owner's hold stays; a FairLock hands on to its next waiter), and sent again while
// its outcome is unknown. On the same connection it lands after any renewal still in flight.
// A fixed-TTL lease is left alone: its key was meant to live out its TTL.
void RenewalScheduler::free_key(const std::shared_ptr<LeaseRecord>& rec) {
  if (rec->scripts.fanout) {
    return rec->scripts.fanout->run(*rec->scripts.release, rec->scripts.release_key_list(), rec->release_args(),
                                    [rec](Result<Reply>) {});
  }
  send_idempotent(rec->core, [rec, payload = rec->release_payload()](ReplyHandler done) {
    rec->core->eval_now(*rec->scripts.release, payload, std::move(done));
  });
}

}  // namespace dlock::detail
