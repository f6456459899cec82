#include "locks/script_attempt.hpp"

#include <charconv>

#include "client_core.hpp"
#include "locks/idempotent_call.hpp"
#include "scripts/script_call.hpp"

namespace dlock::detail {

namespace {

// `n` in decimal, written into `buf`.
std::string_view decimal(char (&buf)[24], long long n) noexcept {
  return std::string_view(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, n).ptr - buf));
}

// A try sent a release under the spec's fixed owner (a refused late hold, an unknown outcome, too
// few replicas): later tries take a fresh one (ScriptAttemptSpec::owner). Loop thread only.
void retire_owner(ClientCore& core, const ScriptAttemptSpec& spec) {
  if (spec.owner) *spec.owner = core.new_owner_token();
}

// ReplicationAck: the hold counts only once enough replicas have it; otherwise it is released
// again (fail closed) and the caller gets errc::not_replicated.
void acknowledge(const std::shared_ptr<ClientCore>& core, const std::shared_ptr<const ScriptAttemptSpec>& spec,
                 const ReplicationAck& ack, const std::string& what, Attempt a,
                 const std::function<void(Attempt)>& report) {
  core->wait_replicas(ack, spec->first_key(), [core, spec, ack, what, a = std::move(a), report](Result<long long> acked) mutable {
    if (acked.ok() && *acked >= static_cast<long long>(ack.replicas)) {
      core->active_leases_.fetch_add(1);
      core->renewals().add(a.lease);
      // WAIT takes time too: validity may have ended while the replicas were counted.
      if (refuse_late(a, report)) return retire_owner(*core, *spec);
      return report(std::move(a));
    }
    retire_owner(*core, *spec);  // released below
    // Undone first, reported after: a caller that gives up (or exits) on the error must not
    // race the release that frees the lock.
    Attempt failed;
    if (!acked.ok()) {
      failed.error = Error(acked.code(), "acquiring " + what + ": " + acked.error().what() + "; released again");
    } else {
      failed.error = Error(errc::not_replicated,
                           "acquiring " + what + ": only " + std::to_string(*acked) + " of " +
                               std::to_string(ack.replicas) + " replicas acknowledged within " +
                               std::to_string(ack.timeout.count()) + " ms; released again (fail closed)");
    }
    a.lease->begin_release();
    core->eval_now(*spec->hold.release,
                   a.lease->release_payload(),
                   [rec = a.lease, report, failed = std::move(failed)](Result<Reply>) mutable {
                     rec->finish_release();
                     report(std::move(failed));
                   });
  });
}

}  // namespace

bool refuse_late(Attempt& a, const std::function<void(Attempt)>& report) {
  if (a.kind != Attempt::Kind::acquired || BootClock::now() < a.lease->valid_until()) return false;
  // Found by FaultScenario.HolderProcessPausedLongerThanItsTtl (under ASan): a waiter whose try
  // was granted just before its process was paused returned, on resume, a lease whose validity
  // had long ended, with a token below a later holder's. release_unwanted takes the record out
  // of the watchdog and out of active_leases() too.
  auto lease = std::move(a.lease);
  a = Attempt{};
  a.kind = Attempt::Kind::busy;
  a.holder_ttl = milliseconds(0);
  a.late = true;
  release_unwanted(lease, [report, busy = std::move(a)]() mutable { report(std::move(busy)); });
  return true;
}

AttemptFn script_attempt(std::shared_ptr<ClientCore> core, std::shared_ptr<const ScriptAttemptSpec> spec) {
  return [core, spec](const TryContext& ctx, std::function<void(Attempt)> report) {
    std::string owner = spec->owner ? *spec->owner : core->new_owner_token();
    const auto sent = BootClock::now();
    // KEYS: the kind's acquire keys (+ the place keys of a subscribed try, MultiLock).
    // ARGV: owner, TTL ms, the kind's extra arguments (+ waiter id, place TTL ms, more waiters:
    // a roll try, Mutex) (+ place TTL ms, with the place keys).
    const bool roll = spec->keeps_roll && !ctx.waiter.empty();
    const bool places = !spec->place_keys.empty() && ctx.subscribed;
    char ttl_buf[24];
    char place_buf[24];
    const std::string_view ttl_ms = decimal(ttl_buf, spec->lease->ttl.count());
    const std::string_view place_ms = decimal(place_buf, ctx.place_ttl.count());
    std::string payload = encode_evalsha_with(
        *spec->acquire,
        [&](auto&& f) {
          spec->visit_acquire_keys(f);
          if (places) {
            for (std::string_view k : spec->place_keys) f(k, std::string_view());
          }
        },
        [&](auto&& f) {
          f(owner, std::string_view());
          f(ttl_ms, std::string_view());
          spec->visit_acquire_extra(f);
          if (roll) {
            f(ctx.waiter, std::string_view());
            f(place_ms, std::string_view());
            f(ctx.more_waiters ? "1" : "0", std::string_view());
          }
          if (places) f(place_ms, std::string_view());
        });
    const ReplicationAck ack =
        spec->lease->replication_ack ? *spec->lease->replication_ack : core->options().replication_ack;
    auto handler = [core, spec, owner = std::move(owner), sent, ack, report = std::move(report)](Result<Reply> r) {
                     // Only for messages: built when one is needed, not on every try.
                     auto what = [&] {
                       return std::string(spec->kind) + " '" + spec->name + "' on " + core->where();
                     };
                     Attempt a;
                     if (!r.ok()) {
                       if (spec->release_on_unknown_outcome) {
                         // The outcome is unknown: the hold may exist. Release it by its owner
                         // token so a lock we never learned about does not sit out its TTL.
                         // Sent again once the connection is back (idempotent_call.hpp).
                         std::vector<std::string> cleanup{owner};
                         spec->hold.append_release_extra(cleanup);
                         if (spec->hold.layout && spec->hold.layout->names_waiters) cleanup.push_back(core->client_id());
                         send_idempotent(core, [core, spec, payload = encode_evalsha(*spec->hold.release,
                                                                                     spec->hold.release_key_list(),
                                                                                     cleanup)](ReplyHandler done) {
                           core->eval_now(*spec->hold.release, payload, std::move(done));
                         });
                         // That release may arrive late (sent again after a blip).
                         retire_owner(*core, *spec);
                       }
                       a.error = Error(r.code(), "acquiring " + what() + ": " + r.error().what());
                       return report(std::move(a));
                     }
                     const Reply& rep = *r;
                     if (rep.is_error()) {
                       a.error = Error(classify_error_reply(rep), "acquiring " + what() + ": " + rep.str());
                       return report(std::move(a));
                     }
                     if (!rep.is_array() || rep.size() < 2 || rep.size() > 4 || !rep[0].is_integer()) {
                       a.error = Error(errc::protocol, "acquiring " + what() + ": unexpected reply " + rep.to_string());
                       return report(std::move(a));
                     }
                     const long long code = rep[0].integer();
                     if (code == 1) {
                       a.kind = Attempt::Kind::acquired;
                       // The hold's scripts and the loss callbacks stay in the spec, shared.
                       const LeaseEvents& ev = spec->lease->events;
                       a.lease = std::make_shared<LeaseRecord>(
                           core, spec->name, owner, FencingToken{static_cast<std::uint64_t>(rep[1].integer())},
                           std::shared_ptr<const HoldScripts>(spec, &spec->hold), *spec->lease, sent,
                           ev.on_lost || ev.on_at_risk ? std::shared_ptr<const LeaseEvents>(spec->lease.ptr(), &ev)
                                                       : nullptr);
                       if (rep.size() >= 3 && rep[2].is_integer()) a.room_left = rep[2].integer();
                       if (rep.size() == 4 && rep[3].is_integer() && rep[3].integer() >= 0) {
                         a.holder_ttl = milliseconds(rep[3].integer());
                       }
                       if (ack.replicas > 0) return acknowledge(core, spec, ack, what(), std::move(a), report);
                       core->active_leases_.fetch_add(1);
                       core->renewals().add(a.lease);
                       if (refuse_late(a, report)) return retire_owner(*core, *spec);
                     } else if (code == 0) {
                       a.kind = Attempt::Kind::busy;
                       if (rep[1].integer() >= 0) a.holder_ttl = milliseconds(rep[1].integer());
                       // A set's script (multi_acquire.lua, the kind with place_keys) says which
                       // of its locks was busy.
                       if (!spec->place_keys.empty() && rep.size() == 3 && rep[2].is_integer() && rep[2].integer() >= 1) {
                         a.busy_channel = static_cast<std::size_t>(rep[2].integer() - 1);
                       }
                     } else {
                       // A third element names the offending key when the script takes several.
                       const std::string bad_key =
                           rep.size() == 3 && rep[2].is_string() ? rep[2].str() : spec->first_key();
                       a.error = Error(errc::wrong_type, what() + ": key '" + bad_key + "' holds a " +
                                                             rep[1].str() + ", not a dlock " + std::string(spec->kind));
                     }
                     report(std::move(a));
    };
    if (ack.replicas > 0) return core->eval_acknowledged(*spec->acquire, std::move(payload), std::move(handler));
    core->eval_now(*spec->acquire, std::move(payload), std::move(handler));
  };
}

}  // namespace dlock::detail
