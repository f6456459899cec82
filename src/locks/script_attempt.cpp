#include "locks/script_attempt.hpp"

#include "client_core.hpp"
#include "scripts/script_call.hpp"

namespace dlock::detail {

AttemptFn script_attempt(std::shared_ptr<ClientCore> core, std::shared_ptr<const ScriptAttemptSpec> spec) {
  return [core, spec](std::function<void(Attempt)> report) {
    std::string owner = spec->owner ? spec->owner() : core->new_owner_token();
    const auto sent = BootClock::now();
    std::vector<std::string> args{owner, std::to_string(spec->lease.ttl.count())};
    args.insert(args.end(), spec->extra_args.begin(), spec->extra_args.end());
    core->eval_now(*spec->acquire, encode_evalsha(*spec->acquire, spec->keys, args),
                   [core, spec, owner = std::move(owner), sent, report = std::move(report)](Result<Reply> r) {
                     const std::string what = spec->kind + " '" + spec->name + "' on " + core->address().display();
                     Attempt a;
                     if (!r.ok()) {
                       if (spec->release_on_unknown_outcome) {
                         // The outcome is unknown: the hold may exist. Release it by its owner
                         // token so a lock we never learned about does not sit out its TTL.
                         std::vector<std::string> cleanup{owner};
                         cleanup.insert(cleanup.end(), spec->hold.release_extra.begin(), spec->hold.release_extra.end());
                         core->eval_now(*spec->hold.release,
                                        encode_evalsha(*spec->hold.release, spec->hold.release_keys, cleanup),
                                        [](Result<Reply>) {});
                       }
                       a.error = Error(r.code(), "acquiring " + what + ": " + r.error().what());
                       return report(std::move(a));
                     }
                     const Reply& rep = *r;
                     if (rep.is_error()) {
                       a.error = Error(classify_error_reply(rep), "acquiring " + what + ": " + rep.str());
                       return report(std::move(a));
                     }
                     if (!rep.is_array() || rep.size() < 2 || rep.size() > 3 || !rep[0].is_integer()) {
                       a.error = Error(errc::protocol, "acquiring " + what + ": unexpected reply " + rep.to_string());
                       return report(std::move(a));
                     }
                     const long long code = rep[0].integer();
                     if (code == 1) {
                       a.kind = Attempt::Kind::acquired;
                       a.lease = std::make_shared<LeaseRecord>(
                           core, spec->name, owner, FencingToken{static_cast<std::uint64_t>(rep[1].integer())},
                           std::shared_ptr<const HoldScripts>(spec, &spec->hold), spec->lease, sent);
                       core->active_leases_.fetch_add(1);
                       core->renewals().add(a.lease);
                     } else if (code == 0) {
                       a.kind = Attempt::Kind::busy;
                       if (rep[1].integer() >= 0) a.holder_ttl = milliseconds(rep[1].integer());
                     } else {
                       // A third element names the offending key when the script takes several.
                       const std::string& bad_key =
                           rep.size() == 3 && rep[2].is_string() ? rep[2].str() : spec->keys.front();
                       a.error = Error(errc::wrong_type, what + ": key '" + bad_key + "' holds a " +
                                                             rep[1].str() + ", not a dlock " + spec->kind);
                     }
                     report(std::move(a));
                   });
  };
}

}  // namespace dlock::detail
