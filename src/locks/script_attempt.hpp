// One try at a lock through its acquire script: the part every lock kind shares.
//
// Every kind's acquire script follows one convention, so one piece of code turns its reply into
// an Attempt (and, on success, a LeaseRecord the watchdog keeps alive):
//   ARGV  = {owner, ttl_ms, extra_args...}
//   reply = {1, token}   acquired; token is the fencing token of the hold
//           {1, token, room[, ttl]}  acquired a shared hold; room: how many more may take it
//                             now (Semaphore: permits still free), Attempt::room_left; ttl: when
//                             the first of the other holds expires (Attempt::holder_ttl)
//           {0, pttl}    held by someone else; pttl is when it may free up (-1: unknown)
//           {-1, type}   the key holds a value of another type ({-1, type, key}: that key)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "locks/acquire_op.hpp"
#include "renewal/lease_record.hpp"

namespace dlock::detail {

// LeaseOptions as a lock object keeps them: one shared instance for every lock that uses the
// defaults (most do), instead of 136 bytes per lock (the watchdog may hold thousands). Assigned
// from a LeaseOptions; read through * and ->.
class SharedLeaseOptions {
 public:
  SharedLeaseOptions() : p_(defaults()) {}
  // Implicit, so that `spec->lease = options;` reads as it did with a plain LeaseOptions.
  SharedLeaseOptions(LeaseOptions o)
      : p_(is_default(o) ? defaults() : std::make_shared<const LeaseOptions>(std::move(o))) {}
  const LeaseOptions& operator*() const noexcept { return *p_; }
  const LeaseOptions* operator->() const noexcept { return p_.get(); }
  const std::shared_ptr<const LeaseOptions>& ptr() const noexcept { return p_; }

 private:
  static const std::shared_ptr<const LeaseOptions>& defaults() {
    static const auto d = std::make_shared<const LeaseOptions>();
    return d;
  }
  static bool is_default(const LeaseOptions& o) {
    static_assert(sizeof(LeaseOptions) == 136, "LeaseOptions changed: compare the new field in is_default()");
    const LeaseOptions d;
    return o.mode == d.mode && o.ttl == d.ttl && o.renew_interval == d.renew_interval &&
           o.at_risk_margin == d.at_risk_margin && o.drift_allowance == d.drift_allowance &&
           o.listen_for_revocation == d.listen_for_revocation && !o.replication_ack && !o.events.on_lost &&
           !o.events.on_at_risk;
  }

  std::shared_ptr<const LeaseOptions> p_;
};

// One per lock object, shared (immutable) by its attempts and, through `hold` and `lease.events`,
// by its leases: keep it small, the watchdog may hold thousands.
struct ScriptAttemptSpec {
  std::string name;       // the lock's name, for messages and the Lease
  std::string_view kind;  // "Mutex", "ReentrantMutex"... (a literal): for the wrong-type message
  const Script* acquire = nullptr;
  StringList keys;
  StringList extra_args;
  HoldScripts hold;  // how the hold is renewed and released; with hold.layout, keys and
                     // extra_args derive from hold.key too (read them through the accessors)
  SharedLeaseOptions lease;
  // The owner identity of every attempt (SharedMutex: one per writer's acquisition, so that
  // its intent is refreshed, not duplicated). Null: a fresh random token per attempt. A shared
  // string, not a std::function: 16 bytes, not 32. Replaced by a fresh token (loop thread only)
  // whenever an attempt sends a release for it (a late hold refused, an unknown outcome, too
  // few replicas): the release is remembered under that owner (and may be sent again after a
  // blip), so a later hold of the same owner would look released, or be deleted.
  std::shared_ptr<std::string> owner;
  // When the reply is lost (timeout, dropped connection) the hold may exist anyway: release it
  // with the hold's release script so it does not sit out its TTL. Off for kinds where that
  // release could undo an earlier hold of the same owner (reentrant re-takes).
  bool release_on_unknown_outcome = true;
  // The acquire script keeps a waiters' roll (Mutex: mutex_acquire.lua): a waiter's try passes
  // ARGV {..., waiter id, place TTL ms, '1' | '0' (more waiters of this Client behind it)}.
  bool keeps_roll = false;
  // Keys appended to the acquire script's KEYS, with the place TTL (ms) appended to its ARGV,
  // when a subscribed waiter tries (MultiLock: each lock's waiters' roll, multi_acquire.lua).
  StringList place_keys;

  // The first acquire key: the lock's own key (messages, WAIT's routing).
  std::string first_key() const {
    return hold.layout ? KeyLayout::build(hold.key, hold.layout->acquire_keys.first(1)).front() : std::string(keys.front());
  }
  // The acquire script's keys and extra arguments as visitors (KeyLayout::visit), for
  // encode_evalsha_with.
  template <class F>
  void visit_acquire_keys(F&& f) const {
    if (hold.layout) return KeyLayout::visit(hold.key, hold.layout->acquire_keys, f);
    for (std::string_view k : keys) f(k, std::string_view());
  }
  template <class F>
  void visit_acquire_extra(F&& f) const {
    if (hold.layout) return KeyLayout::visit(hold.key, hold.layout->acquire_extra, f);
    for (std::string_view a : extra_args) f(a, std::string_view());
  }
};

AttemptFn script_attempt(std::shared_ptr<ClientCore> core, std::shared_ptr<const ScriptAttemptSpec> spec);

// A late reply. An acquired try whose reply came back after its lease's validity had ended (the
// process was paused, or the reply was that slow) is no acquisition: another owner may hold the
// lock by now, with a higher fencing token. When `a` is such a try, its hold is released again
// (the kind's release script compares the owner token, so another owner's hold stays) and
// `report` gets a busy Attempt once that release was answered (a caller that gives up on it
// finds no hold of its own left behind); returns true. Otherwise returns false and does nothing.
// The busy Attempt's holder_ttl is zero: the lock may be free now, so a waiter tries again at
// once (and a Semaphore waiter does not read "no expiry would make room": over its limit).
// Every kind refuses late acquisitions: script_attempt and ReentrantMutex's tries through this;
// the ordered MultiLock checks before it makes any record; FairLock, whose handovers are
// acquisitions too, checks tries and 'granted' messages alike (fair_wait.cpp, accept).
bool refuse_late(Attempt& a, const std::function<void(Attempt)>& report);

}  // namespace dlock::detail
