#include "renewal/renewal_scheduler.hpp"

#include "client_core.hpp"
#include "scripts/script_call.hpp"

namespace dlock::detail {

RenewalScheduler::RenewalScheduler(ClientCore& core, asio::io_context& io) : core_(core), timer_(io) {}

void RenewalScheduler::add(const std::shared_ptr<LeaseRecord>& rec) {
  const time_point now = BootClock::now();
  if (rec->mode == LeaseMode::watchdog) {
    schedule(rec, now + rec->timing.renew_interval);
  } else {
    schedule(rec, rec->valid_until());  // fixed TTL: only its end is watched
  }
}

void RenewalScheduler::schedule(const std::shared_ptr<LeaseRecord>& rec, time_point due) {
  if (rec->scheduled) queue_.remove(rec->slot);
  rec->slot = queue_.add(due, rec);
  rec->scheduled = true;
  arm();
}

void RenewalScheduler::remove(LeaseRecord& rec) {
  if (!rec.scheduled) return;
  rec.scheduled = false;
  queue_.remove(rec.slot);  // may drop the last scheduler reference; `rec` is the caller's
  arm();
}

std::vector<std::shared_ptr<LeaseRecord>> RenewalScheduler::take_all() {
  std::vector<std::shared_ptr<LeaseRecord>> all;
  while (!queue_.empty()) {
    auto due = queue_.pop_due(time_point::max());
    for (auto& r : due) {
      r->scheduled = false;
      all.push_back(std::move(r));
    }
  }
  timer_.cancel();
  armed_for_.reset();
  return all;
}

void RenewalScheduler::arm() {
  auto next = queue_.next();
  if (!next) {
    if (armed_for_) timer_.cancel();
    armed_for_.reset();
    return;
  }
  if (armed_for_ && *armed_for_ == *next) return;
  armed_for_ = *next;
  timer_.expires_at(*next);
  timer_.async_wait([this](std::error_code ec) {
    if (ec) return;  // cancelled: re-armed for another time
    armed_for_.reset();
    on_timer();
  });
}

void RenewalScheduler::on_timer() {
  const time_point now = BootClock::now();
  auto due = queue_.pop_due(now);
  for (auto& rec : due) {
    rec->scheduled = false;
    const auto state = rec->state();
    if (state != LeaseRecord::State::held) continue;  // releasing or gone: nothing to keep alive
    if (now >= rec->valid_until()) {
      lose(rec, LossReason::expired);
      continue;
    }
    if (rec->mode == LeaseMode::fixed_ttl) {
      schedule(rec, rec->valid_until());
      continue;
    }
    check_at_risk(rec, now);
    if (!rec->renew_in_flight) renew(rec, now);
    // Until the renewal answers, the next thing that can happen is the end of validity.
    if (rec->scheduled == false && rec->state() == LeaseRecord::State::held) schedule(rec, rec->valid_until());
  }
  arm();
}

void RenewalScheduler::renew(const std::shared_ptr<LeaseRecord>& rec, time_point now) {
  rec->renew_in_flight = true;
  std::vector<std::string> args;
  args.reserve(2 + rec->scripts.renew_extra.size());
  args.push_back(rec->owner);
  args.push_back(std::to_string(rec->timing.ttl.count()));
  args.insert(args.end(), rec->scripts.renew_extra.begin(), rec->scripts.renew_extra.end());
  const time_point sent = now;
  core_.eval_now(*rec->scripts.renew, encode_evalsha(*rec->scripts.renew, rec->scripts.renew_keys, args),
                 [this, rec, sent, ttl = rec->timing.ttl](Result<Reply> r) {
                   rec->renew_in_flight = false;
                   if (rec->state() != LeaseRecord::State::held) return;
                   if (!r.ok() || r->is_error() || !r->is_integer()) return on_renew_failed(rec);
                   if (r->integer() == 0) return lose(rec, LossReason::taken);
                   if (ttl == rec->timing.ttl) {
                     auto until = rec->timing.validity_from(sent);
                     if (until > rec->valid_until()) rec->set_valid_until(until);
                   }
                   rec->at_risk_reported = false;
                   schedule(rec, std::max(sent + rec->timing.renew_interval, BootClock::now()));
                 });
}

void RenewalScheduler::on_renew_failed(const std::shared_ptr<LeaseRecord>& rec) {
  const time_point now = BootClock::now();
  if (now >= rec->valid_until()) return lose(rec, LossReason::expired);
  check_at_risk(rec, now);
  schedule(rec, rec->timing.retry_at(now, rec->valid_until()));
}

void RenewalScheduler::check_at_risk(const std::shared_ptr<LeaseRecord>& rec, time_point now) {
  if (rec->at_risk_reported || !rec->timing.at_risk(now, rec->valid_until())) return;
  rec->at_risk_reported = true;
  if (rec->events.on_at_risk) {
    rec->events.on_at_risk(std::chrono::duration_cast<milliseconds>(rec->valid_until() - now));
  }
}

void RenewalScheduler::extended(const std::shared_ptr<LeaseRecord>& rec, milliseconds ttl, time_point sent_at) {
  LeaseOptions o;
  o.ttl = ttl;
  auto next = LeaseTiming::from(o);
  next.drift = rec->timing.drift;
  rec->timing = next;
  rec->set_valid_until(rec->timing.validity_from(sent_at));
  rec->at_risk_reported = false;
  if (rec->state() != LeaseRecord::State::held) return;
  if (rec->mode == LeaseMode::watchdog) schedule(rec, sent_at + rec->timing.renew_interval);
  else schedule(rec, rec->valid_until());
}

void RenewalScheduler::lose(const std::shared_ptr<LeaseRecord>& rec, LossReason why) {
  remove(*rec);
  if (!rec->mark_lost(why)) return;
  core_.active_leases_.fetch_sub(1);
  if (rec->events.on_lost) rec->events.on_lost(why);
}

}  // namespace dlock::detail
