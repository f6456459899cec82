#include "locks/multi_lock_ordered.hpp"

#include <algorithm>

#include "client_core.hpp"
#include "io/command.hpp"
#include "locks/idempotent_call.hpp"
#include "scripts/script_call.hpp"
#include "util/countdown.hpp"
#include "util/slot.hpp"

namespace dlock::detail {

namespace scripts {
extern const Script multi_acquire;
extern const Script multi_renew;
extern const Script multi_release;
}  // namespace scripts

namespace {

// How long each release marker (P{N}:rel) lives: as for Mutex.
constexpr milliseconds release_marker_ttl{30000};

// The loss of one part loses the whole hold: the parent is marked lost (its on_lost runs once)
// and the parts still held are released now instead of sitting out their TTL. Loop thread.
void lose_parent(const std::shared_ptr<LeaseRecord>& parent, LossReason why) {
  if (!parent->mark_lost(why)) return;
  for (const auto& part : parent->parts) {
    if (part->state() == LeaseRecord::State::held) release_unwanted(part);
  }
  if (parent->events.on_lost) parent->events.on_lost(why);
}

// One try at the whole set, group by group.
class OrderedTry : public std::enable_shared_from_this<OrderedTry> {
 public:
  // `place_ttl`: nonzero when a subscribed waiter tries (TryContext): a busy group's locks get
  // the shared place on their waiters' rolls (multi_acquire.lua).
  OrderedTry(std::shared_ptr<ClientCore> core, std::shared_ptr<const OrderedMultiSpec> spec,
             std::function<void(Attempt)> report, milliseconds place_ttl)
      : core_(std::move(core)), spec_(std::move(spec)), report_(std::move(report)),
        owner_(core_->new_owner_token()), sent_(BootClock::now()), place_ttl_(place_ttl) {}

  void next() {
    if (taken_ == spec_->groups.size()) return finish();
    const auto& group = spec_->groups[taken_];
    std::vector<std::string> keys;
    for (const auto& k : group) {
      keys.push_back(k);
      keys.push_back(k + ":fence");
    }
    std::vector<std::string> args{owner_, std::to_string(spec_->lease.ttl.count())};
    if (place_ttl_.count() > 0) {
      for (const auto& k : group) keys.push_back(k + ":waiters");
      args.push_back(std::to_string(place_ttl_.count()));
    }
    core_->eval_now(scripts::multi_acquire, encode_evalsha(scripts::multi_acquire, keys, args),
                    [self = shared_from_this()](Result<Reply> r) { self->on_reply(std::move(r)); });
  }

 private:
  std::string what() const { return "MultiLock '" + spec_->name + "' on " + core_->where(); }

  void on_reply(Result<Reply> r) {
    Attempt a;
    if (!r.ok()) {
      // The outcome of this group is unknown: release it too (by owner token, harmless if unset).
      a.error = Error(r.code(), "acquiring " + what() + ": " + r.error().what());
      return give_back(taken_ + 1, std::move(a));
    }
    const Reply& rep = *r;
    if (rep.is_error()) {
      a.error = Error(classify_error_reply(rep), "acquiring " + what() + ": " + rep.str());
      return give_back(taken_, std::move(a));
    }
    if (!rep.is_array() || rep.size() < 2 || !rep[0].is_integer() || (!rep[1].is_integer() && rep[0].integer() != -1)) {
      a.error = Error(errc::protocol, "acquiring " + what() + ": unexpected reply " + rep.to_string());
      return give_back(taken_ + 1, std::move(a));
    }
    switch (rep[0].integer()) {
      case 1:
        if (taken_ == 0) token_ = FencingToken{static_cast<std::uint64_t>(rep[1].integer())};
        ++taken_;
        return next();
      case 0: {
        a.kind = Attempt::Kind::busy;
        if (rep[1].integer() >= 0) a.holder_ttl = milliseconds(rep[1].integer());
        const auto& group = spec_->groups[taken_];
        if (rep.size() == 3 && rep[2].is_integer() && rep[2].integer() >= 1 &&
            static_cast<std::size_t>(rep[2].integer()) <= group.size()) {
          const std::string& busy = group[static_cast<std::size_t>(rep[2].integer() - 1)];
          const auto at = std::find(spec_->keys.begin(), spec_->keys.end(), busy);
          if (at != spec_->keys.end()) a.busy_channel = static_cast<std::size_t>(at - spec_->keys.begin());
        }
        return give_back(taken_, std::move(a));
      }
      default: {
        const std::string bad_key = rep.size() == 3 && rep[2].is_string() ? rep[2].str() : spec_->groups[taken_].front();
        a.error = Error(errc::wrong_type,
                        what() + ": key '" + bad_key + "' holds a " + rep[1].str() + ", not a dlock MultiLock");
        return give_back(taken_, std::move(a));
      }
    }
  }

  // Releases the first `groups` groups, and reports `a` once every release was answered: when
  // a try reports busy, no part of the set is held any more.
  void give_back(std::size_t groups, Attempt a) {
    groups = std::min(groups, spec_->groups.size());
    if (groups == 0) return report_(std::move(a));
    auto left = Countdown::make(groups, [result = std::make_shared<Attempt>(std::move(a)), report = std::move(report_)] {
      report(std::move(*result));
    });
    for (std::size_t i = 0; i < groups; ++i) {
      const HoldScripts& h = *spec_->holds[i];
      std::vector<std::string> args{owner_};
      args.insert(args.end(), h.release_extra.begin(), h.release_extra.end());
      // Our own waiter listens on these channels too: it must not take this for a release by
      // the holder it waits for, or it tries again at once, round after round, while that
      // holder keeps a later group (multi_release.lua, ARGV[4+n]).
      args.push_back("released " + spec_->queue_key);
      // Sent again while its outcome is unknown (idempotent_call.hpp): sent once right after a
      // connection error, it failed fast and the group sat out its TTL. The try reports after
      // each release's first answer.
      send_idempotent(
          core_,
          [core = core_, payload = encode_evalsha(*h.release, h.release_keys, args), script = h.release](
              ReplyHandler answered) { core->eval_now(*script, payload, std::move(answered)); },
          [left](Result<Reply>) { left->done(); });
    }
  }

  void finish() {
    Attempt a;
    if (BootClock::now() >= LeaseTiming::from(spec_->lease).validity_from(sent_)) {
      // The last group's reply came back after the hold's validity had ended (script_attempt.hpp,
      // refuse_late): no acquisition. Every group is given back (by owner token: another
      // owner's keys stay) before the try reports busy; no record was made.
      a.kind = Attempt::Kind::busy;
      a.holder_ttl = milliseconds(0);
      a.late = true;
      return give_back(spec_->groups.size(), std::move(a));
    }
    a.kind = Attempt::Kind::acquired;
    // The parent has no scripts of its own: Lease acts on its parts.
    auto parent = std::make_shared<LeaseRecord>(core_, spec_->name, owner_, token_, HoldScripts{}, spec_->lease, sent_);
    std::weak_ptr<LeaseRecord> weak = parent;
    LeaseOptions part_options = spec_->lease;
    part_options.events.on_lost = [weak](LossReason why) {
      if (auto p = weak.lock()) lose_parent(p, why);
    };
    part_options.events.on_at_risk = [weak](milliseconds left) {
      auto p = weak.lock();
      if (p && p->state() == LeaseRecord::State::held && p->events.on_at_risk) p->events.on_at_risk(left);
    };
    for (std::size_t i = 0; i < spec_->groups.size(); ++i) {
      parent->parts.push_back(
          std::make_shared<LeaseRecord>(core_, spec_->name, owner_, token_, spec_->holds[i], part_options, sent_));
    }
    for (const auto& part : parent->parts) {
      core_->active_leases_.fetch_add(1);
      core_->renewals().add(part);
    }
    a.lease = std::move(parent);
    report_(std::move(a));
  }

  std::shared_ptr<ClientCore> core_;
  std::shared_ptr<const OrderedMultiSpec> spec_;
  std::function<void(Attempt)> report_;
  std::string owner_;
  BootClock::time_point sent_;
  milliseconds place_ttl_;
  std::size_t taken_ = 0;
  FencingToken token_{};
};

}  // namespace

std::vector<std::vector<std::string>> slot_groups(const std::vector<std::string>& sorted_keys) {
  std::vector<std::vector<std::string>> groups;
  std::vector<std::uint16_t> slots;
  for (const auto& key : sorted_keys) {
    const std::uint16_t slot = key_slot(key);
    std::size_t i = 0;
    while (i < slots.size() && slots[i] != slot) ++i;
    if (i == slots.size()) {
      slots.push_back(slot);
      groups.emplace_back();
    }
    groups[i].push_back(key);
  }
  return groups;
}

std::shared_ptr<const HoldScripts> multi_hold_scripts(const std::vector<std::string>& keys,
                                                      const std::string& client_id) {
  auto h = std::make_shared<HoldScripts>();
  h->renew = &scripts::multi_renew;
  h->release = &scripts::multi_release;
  h->release_extra.push_back(std::to_string(release_marker_ttl.count()));
  h->release_extra.push_back(client_id);
  for (const auto& key : keys) {
    h->renew_keys.push_back(key);
    h->release_keys.push_back(key);
    h->release_keys.push_back(key + ":rel");
    h->release_keys.push_back(key + ":waiters");
    h->release_extra.push_back(key + ":ch");
    h->renew_extra.push_back(key + ":ch");  // a renewal that finds the group lost frees the rest
  }
  h->channel = keys.front() + ":ch";
  return h;
}

AttemptFn ordered_multi_attempt(std::shared_ptr<ClientCore> core, std::shared_ptr<const OrderedMultiSpec> spec) {
  return [core, spec](const TryContext& ctx, std::function<void(Attempt)> report) {
    std::make_shared<OrderedTry>(core, spec, std::move(report), ctx.subscribed ? ctx.place_ttl : milliseconds(0))->next();
  };
}

}  // namespace dlock::detail
