#include "locks/reentrant_hold.hpp"

#include <atomic>
#include <charconv>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "client_core.hpp"
#include "locks/idempotent_call.hpp"
#include "locks/release_memory.hpp"
#include "scripts/script_call.hpp"
#include "util/random_hex.hpp"

namespace dlock::detail {

namespace scripts {
extern const Script reentrant_acquire;
extern const Script reentrant_release;
extern const Script reentrant_renew;
}  // namespace scripts

// 64 bits from the kernel's CSPRNG (random_hex), as 16 hex digits. Not a seeded generator: a
// process forked after using one repeats its parent's sequence, and so do its siblings; two
// processes' takes of one lock then shared a latch, and the second release found the first's
// latch, took itself for a retry and skipped its decrement: the lock stayed held until its TTL
// ended, by an owner that had been told it was released (TakeId.ForkedProcessesDrawTheirOwn).
std::string new_take_id() { return random_hex(8); }

namespace {

class ReentrantHold;

// (client id, key, owner) -> the owner's live hold. Process-wide because a hold belongs to a
// Client, not to a ReentrantMutex object; the client id in the key keeps Clients apart.
struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, std::weak_ptr<ReentrantHold>> holds;
  // (client id, key, owner) -> the drop pending for a take whose outcome is unknown (see
  // drop_unknown_take). An acquisition by the same owner replaces it: from then on, a drop
  // would remove that acquisition's take too.
  std::unordered_map<std::string, std::uint64_t> pending_drops;
  std::uint64_t next_drop = 1;
  // pending_drops.size(), read without the lock by every acquisition (which then builds no key
  // and takes no lock when it is 0, the normal case). An owner's drop is armed and cancelled on
  // its Client's loop thread, so that thread never misses its own.
  std::atomic<std::size_t> pending_count{0};

  static Registry& get() {
    static Registry* registry = new Registry;  // never destroyed: Leases may outlive statics
    return *registry;
  }
};

std::string registry_key(const ClientCore& core, const std::string& key, const std::string& owner) {
  std::string k;
  k.reserve(core.client_id().size() + key.size() + owner.size() + 2);  // one allocation
  k += core.client_id();
  k += '\n';
  k += key;
  k += '\n';
  k += owner;
  return k;
}

// A hold's token as ARGV text, empty without fencing. On the stack: a token has about 16
// digits, past std::string's inline buffer, and every take writes it into two lists.
struct TokenText {
  char buf[24];
  std::size_t size = 0;
  std::string_view view() const noexcept { return {buf, size}; }
};

TokenText token_text(const ReentrantLayout& layout, FencingToken token) {
  TokenText t;
  if (layout.fencing()) {
    t.size = static_cast<std::size_t>(std::to_chars(t.buf, t.buf + sizeof t.buf, token.value).ptr - t.buf);
  }
  return t;
}

class ReentrantHold {
 public:
  ReentrantHold(std::shared_ptr<ClientCore> core_, std::string rkey_, FencingToken token_)
      : core(std::move(core_)), rkey(std::move(rkey_)), token(token_) {}
  ReentrantHold(const ReentrantHold&) = delete;
  ReentrantHold& operator=(const ReentrantHold&) = delete;

  // The last take's record is gone: every take was released (or abandoned), so the hold's
  // record leaves the watchdog, if the last release did not take it off already (take_released).
  // No script runs: the takes' releases already did the work (or reported that they failed, and
  // then the key expires at its TTL).
  ~ReentrantHold() {
    {
      auto& reg = Registry::get();
      std::lock_guard lock(reg.mu);
      auto it = reg.holds.find(rkey);
      if (it != reg.holds.end() && it->second.expired()) reg.holds.erase(it);
    }
    if (!record || !record->begin_release()) return;  // lost, ended by its last release, or shut down
    retire();
  }

  // After record->begin_release() succeeded: the hold is over; no renewal follows.
  void retire() {
    core->active_leases_.fetch_sub(1);
    record->finish_release();
    if (core->is_shut_down()) return;  // the shutdown takes every lease off the watchdog
    auto rec = record;
    auto forget = [rec] { rec->core->renewals().remove(*rec); };
    if (core->on_loop_thread()) forget();
    else core->post(forget);
  }

  bool live() const noexcept { return record && record->state() == LeaseRecord::State::held; }

  // Loop thread (the hold record's events): every take still held learns what its hold did.
  // A take under release is left to its release's reply, as a Mutex lease is: the hold's
  // renewal may have crossed the last take's release and found the key it deleted (no loss).
  void lost(LossReason why) {
    for (auto& weak : takes) {
      auto take = weak.lock();
      if (!take || !take->mark_lost_if_held(why)) continue;
      if (take->events.on_lost) take->events.on_lost(why);
    }
  }
  void at_risk(milliseconds left) {
    for (auto& weak : takes) {
      auto take = weak.lock();
      if (take && take->state() == LeaseRecord::State::held && take->events.on_at_risk) take->events.on_at_risk(left);
    }
  }

  const std::shared_ptr<ClientCore> core;
  const std::string rkey;
  const FencingToken token;
  // The one record the watchdog renews for the whole hold. Set before the hold is published
  // in the registry, never changed after.
  std::shared_ptr<LeaseRecord> record;
  // Loop thread only: the takes' records, for the loss fan-out.
  std::vector<std::weak_ptr<LeaseRecord>> takes;
  // Takes whose release has not been claimed yet (under Registry::mu): when the last one is
  // claimed, the hold ends there (take_released), whatever that release's outcome.
  std::size_t unreleased = 0;
};

// The deleter of a take's record: the record keeps its hold alive, exactly as long as it lives.
struct TakeDeleter {
  std::shared_ptr<ReentrantHold> hold;
  void operator()(LeaseRecord* rec) {
    delete rec;
    hold.reset();  // now, not when the control block goes (weak_ptrs may keep it longer)
  }
};

// What one acquisition (all its tries) needs.
struct TakeSpec {
  std::shared_ptr<ClientCore> core;
  std::shared_ptr<const ReentrantLayout> layout;
  std::string owner;
  LeaseOptions lease;
  std::string ttl_text;  // lease.ttl in ms, as reentrant_acquire.lua's ARGV[2]
};

// Starts the watchdog record of a new hold. Its events fan out to the hold's takes.
std::shared_ptr<LeaseRecord> hold_record(const TakeSpec& spec, const std::shared_ptr<ReentrantHold>& hold,
                                         BootClock::time_point sent) {
  const ReentrantLayout& l = *spec.layout;
  HoldScripts s;
  s.renew = &scripts::reentrant_renew;
  s.renew_keys = {l.key};
  s.renew_extra = {token_text(l, hold->token).view()};
  // Only the Client's shutdown releases the hold record: the whole hold goes at once.
  s.release = &scripts::reentrant_release;
  s.release_keys = {l.key};
  s.release_extra = {l.channel, l.message, token_text(l, hold->token).view()};
  // Redisson's channel never carries "revoked".
  if (l.fencing()) s.channel = l.channel;
  LeaseOptions o = spec.lease;
  std::weak_ptr<ReentrantHold> weak = hold;
  o.events.on_lost = [weak](LossReason why) {
    if (auto h = weak.lock()) h->lost(why);
  };
  o.events.on_at_risk = [weak](milliseconds left) {
    if (auto h = weak.lock()) h->at_risk(left);
  };
  // The scheduler checks a revoked fixed-TTL lease by reading a string key; a hold is a hash.
  if (o.mode == LeaseMode::fixed_ttl) o.listen_for_revocation = false;
  return std::make_shared<LeaseRecord>(spec.core, l.name, spec.owner, hold->token, std::move(s), o, sent);
}

// An acquired try: the take joins the owner's hold, or starts a new one. Loop thread.
std::shared_ptr<LeaseRecord> join(const TakeSpec& spec, FencingToken token, long long count,
                                  BootClock::time_point sent) {
  const ReentrantLayout& l = *spec.layout;
  const auto& core = spec.core;
  std::shared_ptr<ReentrantHold> hold;
  std::shared_ptr<ReentrantHold> replaced;  // destroyed outside the registry lock
  bool started = false;
  {
    auto& reg = Registry::get();
    std::lock_guard lock(reg.mu);
    std::string rkey = registry_key(*core, l.key, spec.owner);
    auto& slot = reg.holds[rkey];
    hold = slot.lock();
    // A take with a new token (Redisson layout: count 1) started a new hold: the earlier one
    // ended in Redis (expired, deleted) before this take, whether or not its renewal noticed.
    const bool joins = hold && hold->live() && (l.fencing() ? hold->token == token : count > 1);
    if (!joins) {
      replaced = std::move(hold);
      hold = std::make_shared<ReentrantHold>(core, std::move(rkey), token);
      hold->record = hold_record(spec, hold, sent);
      slot = hold;
      started = true;
    }
    ++hold->unreleased;  // under the lock, as take_released's check: see there
  }
  if (replaced && replaced->live()) core->renewals().lose(replaced->record, LossReason::taken);
  if (started) {
    core->active_leases_.fetch_add(1);
    core->renewals().add(hold->record);
  }

  HoldScripts s;
  s.renew = &scripts::reentrant_renew;
  s.renew_keys = {l.key};
  // Lease::extend() renews the hold's record instead; "take" makes the script refuse a direct
  // renewal of one take (the TTL belongs to the whole hold).
  s.renew_extra = {token_text(l, token).view(), "take"};
  s.release = &scripts::reentrant_release;
  s.release_keys = {l.key, l.latch_prefix + new_take_id()};
  s.release_extra = {l.channel, l.message, token_text(l, token).view(),
                     std::to_string(release_memory(core->options()).count())};
  LeaseOptions o = spec.lease;
  o.listen_for_revocation = false;  // the hold's record listens for the whole hold
  std::shared_ptr<LeaseRecord> take(new LeaseRecord(core, l.name, spec.owner, token, std::move(s), o, sent),
                                    TakeDeleter{hold});
  // A re-take leaves the TTL alone: the take is valid as long as its hold, which it follows
  // (Lease::remaining, extend). Takes are not counted in active_leases(): the hold is.
  take->hold = hold->record;
  take->set_valid_until(hold->record->valid_until());
  std::erase_if(hold->takes, [](const std::weak_ptr<LeaseRecord>& w) { return w.expired(); });
  hold->takes.push_back(take);
  return take;
}

// An acquisition by `owner` of `key` is about to be sent (loop thread): a drop still pending for
// an earlier take of this owner must not follow it.
void cancel_pending_drop(const ClientCore& core, const std::string& key, const std::string& owner) {
  auto& reg = Registry::get();
  if (reg.pending_count.load(std::memory_order_relaxed) == 0) return;
  const std::string rkey = registry_key(core, key, owner);
  std::lock_guard lock(reg.mu);
  if (reg.pending_drops.erase(rkey) != 0) reg.pending_count.fetch_sub(1, std::memory_order_relaxed);
}

// A take whose outcome is unknown (connection error, timeout), while its owner has no live hold
// here: any count under the owner's field is that take, unwanted. Dropped (the whole field: no
// latch, the release script's shutdown form), sent again while its outcome is unknown
// (idempotent_call.hpp): sent once right after the connection failed, the drop failed fast and
// the lock sat out its TTL. Unlike the other kinds' cleanups this one is not by acquisition: a
// ReentrantMutex owner is the thread, so a later resend would also drop a NEW take of the same
// owner. So every try first checks, on the loop thread (where that owner's acquisitions are sent
// too, in order on the connection), that no acquisition of the owner came since and that it
// still holds nothing here. A take found in between (the owner acquired again first) stays:
// counted into the new hold, the lock is then freed at its TTL after the owner's last release.
void drop_unknown_take(const std::shared_ptr<ClientCore>& core, const ReentrantLayout& l, const std::string& owner) {
  const std::string rkey = registry_key(*core, l.key, owner);
  std::uint64_t id = 0;
  {
    auto& reg = Registry::get();
    std::lock_guard lock(reg.mu);
    id = reg.next_drop++;
    if (reg.pending_drops.insert_or_assign(rkey, id).second) reg.pending_count.fetch_add(1, std::memory_order_relaxed);
  }
  // Still this drop's turn? Ends it (erases the entry) when `finished`.
  auto current = [rkey, id](bool finished) {
    auto& reg = Registry::get();
    std::lock_guard lock(reg.mu);
    auto it = reg.pending_drops.find(rkey);
    if (it == reg.pending_drops.end() || it->second != id) return false;
    if (finished) {
      reg.pending_drops.erase(it);
      reg.pending_count.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
  };
  auto payload = encode_evalsha(scripts::reentrant_release, std::vector<std::string>{l.key},
                                std::vector<std::string>{owner, l.channel, l.message, ""});
  send_idempotent(core, [core, key = l.key, owner, payload = std::move(payload), current](ReplyHandler answered) {
    if (!current(false) || reentrant_hold_live(*core, key, owner)) {
      current(true);
      return answered(Reply::make_integer(0));  // superseded: no try, no more tries
    }
    core->eval_now(scripts::reentrant_release, payload, [current, answered = std::move(answered)](Result<Reply> r) {
      if (!outcome_unknown(r)) current(true);
      answered(std::move(r));
    });
  });
}

}  // namespace

AttemptFn reentrant_attempt(std::shared_ptr<ClientCore> client, std::shared_ptr<const ReentrantLayout> lock,
                            std::string owner_id, LeaseOptions options) {
  const std::string ttl_text = std::to_string(options.ttl.count());
  auto spec = std::make_shared<const TakeSpec>(
      TakeSpec{std::move(client), std::move(lock), std::move(owner_id), std::move(options), ttl_text});
  return [spec](const TryContext&, std::function<void(Attempt)> report) {
    const ReentrantLayout& layout = *spec->layout;
    const std::string_view keys[] = {layout.key, layout.fence_key};
    const std::string_view args[] = {spec->owner, spec->ttl_text};
    const auto sent = BootClock::now();
    cancel_pending_drop(*spec->core, layout.key, spec->owner);
    spec->core->eval_now(
        scripts::reentrant_acquire,
        encode_evalsha(scripts::reentrant_acquire, std::span(keys, layout.fencing() ? 2 : 1), args),
        [spec, sent, report = std::move(report)](Result<Reply> r) {
          const auto& core = spec->core;
          const ReentrantLayout& l = *spec->layout;
          // Only for errors: a take that succeeds builds no message.
          const auto what = [&] { return core->lock_what("ReentrantMutex", l.name); };
          Attempt a;
          if (!r.ok()) {
            // The outcome is unknown: the take may exist. When this owner has no hold here, any
            // count under its field is ours and unwanted: drop it, so it does not sit out its
            // TTL. With a live hold a drop would end it, so that count stays (then the lock is
            // freed at its TTL after the owner's last release).
            if (!reentrant_hold_live(*core, l.key, spec->owner)) drop_unknown_take(core, l, spec->owner);
            a.error = Error(r.code(), "acquiring " + what() + ": " + r.error().what());
            return report(std::move(a));
          }
          const Reply& rep = *r;
          if (rep.is_error()) {
            a.error = Error(classify_error_reply(rep), "acquiring " + what() + ": " + rep.str());
            return report(std::move(a));
          }
          const bool well_formed = rep.is_array() && (rep.size() == 2 || rep.size() == 3) && rep[0].is_integer() &&
                                   (rep[0].integer() != 1 || (rep.size() == 3 && rep[1].is_integer() && rep[2].is_integer()));
          if (!well_formed) {
            a.error = Error(errc::protocol, "acquiring " + what() + ": unexpected reply " + rep.to_string());
            return report(std::move(a));
          }
          switch (rep[0].integer()) {
            case 1:
              a.kind = Attempt::Kind::acquired;
              a.lease = join(*spec, FencingToken{static_cast<std::uint64_t>(rep[1].integer())}, rep[2].integer(), sent);
              break;
            case 0:
              a.kind = Attempt::Kind::busy;
              if (rep[1].is_integer() && rep[1].integer() >= 0) a.holder_ttl = milliseconds(rep[1].integer());
              break;
            default: {
              // A third element names the offending key when it is not the lock key (the
              // fencing counter).
              const std::string& bad_key = rep.size() == 3 && rep[2].is_string() ? rep[2].str() : l.key;
              a.error = Error(errc::wrong_type, what() + ": key '" + bad_key + "' holds a " + rep[1].str() +
                                                    ", not a dlock ReentrantMutex");
            }
          }
          report(std::move(a));
        });
  };
}

bool reentrant_hold_live(const ClientCore& core, const std::string& key, const std::string& owner) {
  std::shared_ptr<ReentrantHold> hold;  // released after the registry lock: it may be the last reference
  {
    auto& reg = Registry::get();
    std::lock_guard lock(reg.mu);
    auto it = reg.holds.find(registry_key(core, key, owner));
    if (it != reg.holds.end()) hold = it->second.lock();
  }
  return hold && hold->live();
}

// The release of the hold's last unreleased take ends the hold now: the watchdog renews it no
// more, whether that release succeeds, fails (READONLY in a failover, an ACL, OOM) or never
// learns its outcome. Ending it only when the last take's record was destroyed kept renewing a
// hold whose release had failed for as long as the Lease object lived: the lock stayed held by
// nobody, for ever, while release() had said the key expires at its TTL. The count and the end
// are decided under the registry lock, as join() decides whether a new take joins this hold:
// a take joining a hold still live counts before the release can end it, and one that comes
// after finds it ended and starts its own.
void reentrant_take_released(const std::shared_ptr<LeaseRecord>& take) {
  const auto* d = std::get_deleter<TakeDeleter>(take);
  if (d == nullptr || !d->hold) return;
  const std::shared_ptr<ReentrantHold>& hold = d->hold;
  bool ended = false;
  {
    auto& reg = Registry::get();
    std::lock_guard lock(reg.mu);
    if (hold->unreleased > 0 && --hold->unreleased == 0) ended = hold->record->begin_release();
  }
  if (ended) hold->retire();
}

milliseconds reentrant_hold_remaining(const Lease& lease) noexcept {
  if (!lease.held()) return milliseconds(0);
  const auto* d = std::get_deleter<TakeDeleter>(lease.record());
  if (d == nullptr || !d->hold || !d->hold->live()) return milliseconds(0);
  const auto left = d->hold->record->valid_until() - BootClock::now();
  return left.count() > 0 ? std::chrono::duration_cast<milliseconds>(left) : milliseconds(0);
}

}  // namespace dlock::detail
