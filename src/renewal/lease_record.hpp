// LeaseRecord: the data behind a dlock::Lease. Leases are data, not threads: the Client's one
// RenewalScheduler renews every record it holds; a record holds no timer of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "dlock/fencing.hpp"
#include "dlock/options.hpp"
#include "renewal/renewal_policy.hpp"
#include "renewal/string_list.hpp"
#include "io/command.hpp"
#include "notify/notifier.hpp"
#include "scripts/script.hpp"

namespace dlock::detail {

class ClientCore;

// A hold that lives on several independent servers at once (Redlock). Renewals, extend() and
// release() run the hold's script on every server through run(), which answers once with one
// verdict in the single-server conventions below (1 renewed/released, 0 not held, or an error).
class HoldFanout {
 public:
  virtual ~HoldFanout() = default;
  // Any thread. `done` runs exactly once, on the loop thread of the record's core.
  virtual void run(const Script& script, const std::vector<std::string>& keys,
                   const std::vector<std::string>& args, ReplyHandler done) const = 0;
  // Any thread. Sends `script` to every node but the home one, without waiting for a verdict:
  // the home Client's shutdown releases a lease there itself (its own commands still leave
  // while it shuts down; run() no longer accepts work then).
  virtual void send_to_others(const Script& script, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args) const = 0;
};

// A lock whose every key, extra argument and channel is its key plus a suffix (Mutex) keeps only
// the key; its lists are built from one static KeyLayout of the kind when a script is sent. Kept
// per lock, the six lists and the channel were most of a held Mutex's memory (each a heap block
// repeating the key: docs/BENCHMARKS.md, the watchdog memory row).
struct KeyLayout {
  // One list item: the key followed by `text` (`text` alone when `literal`).
  struct Item {
    std::string_view text;
    bool literal = false;
  };
  std::span<const Item> acquire_keys, acquire_extra;
  std::span<const Item> renew_keys, renew_extra;
  std::span<const Item> release_keys, release_extra;
  std::string_view channel_suffix;  // empty: no channel
  // The kind keeps a waiters' roll (Mutex): its release script gets the releasing Client's id
  // after release_extra, and its reply counts only waiters of other Clients (see note_release).
  bool names_waiters = false;

  // Calls f(head, tail) for each item, whose string is head followed by tail: (key, text), or
  // (text, "") for a literal. For encode_evalsha_with: no string is built.
  template <class F>
  static void visit(std::string_view key, std::span<const Item> items, F&& f) {
    for (const Item& i : items) {
      if (i.literal) f(i.text, std::string_view());
      else f(key, i.text);
    }
  }

  static std::vector<std::string> build(std::string_view key, std::span<const Item> items) {
    std::vector<std::string> out;
    out.reserve(items.size());
    for (const Item& i : items) {
      if (i.literal) {
        out.emplace_back(i.text);
      } else {
        std::string& s = out.emplace_back();
        s.reserve(key.size() + i.text.size());
        s.append(key).append(i.text);
      }
    }
    return out;
  }
};

// The scripts that keep and end one kind of hold. Conventions every kind follows:
//   renew   ARGV = {owner, ttl_ms, renew_extra...};  reply 1 renewed, 0 no longer held
//   release ARGV = {owner, release_extra...};        reply 1 released, 2 already released by
//                                                    this owner (a retry), 0 not held
//
// One HoldScripts is shared (immutable) by a lock object and every lease it hands out; its lists
// are StringLists, one allocation each, because thousands of them may be held at once. A kind
// with a KeyLayout sets `layout` and `key` instead of the lists and the channel; either way the
// lists are read through the *_list() accessors below, never the fields.
struct HoldScripts {
  const Script* renew = nullptr;
  StringList renew_keys;
  StringList renew_extra;
  const Script* release = nullptr;
  StringList release_keys;
  StringList release_extra;
  // Where a forced unlock is announced ("revoked"), for LeaseOptions::listen_for_revocation.
  std::string channel;
  // Set when the hold spans several servers: the scripts then run through it instead of on the
  // record's core, which only hosts the watchdog.
  std::shared_ptr<const HoldFanout> fanout;
  // When set, the lists and the channel derive from `key` (a static table of the kind's).
  const KeyLayout* layout = nullptr;
  std::string key;

  std::vector<std::string> renew_key_list() const { return layout ? KeyLayout::build(key, layout->renew_keys) : renew_keys; }
  std::vector<std::string> release_key_list() const {
    return layout ? KeyLayout::build(key, layout->release_keys) : release_keys;
  }
  // Appended to `args` (the ARGV so far: owner, and for renewals the TTL).
  void append_renew_extra(std::vector<std::string>& args) const { append(args, renew_extra, layout ? layout->renew_extra : std::span<const KeyLayout::Item>{}); }
  void append_release_extra(std::vector<std::string>& args) const {
    append(args, release_extra, layout ? layout->release_extra : std::span<const KeyLayout::Item>{});
  }
  // The lists as visitors (KeyLayout::visit), for encode_evalsha_with.
  template <class F>
  void visit_renew_keys(F&& f) const { visit(renew_keys, layout ? layout->renew_keys : no_items(), f); }
  template <class F>
  void visit_renew_extra(F&& f) const { visit(renew_extra, layout ? layout->renew_extra : no_items(), f); }
  template <class F>
  void visit_release_keys(F&& f) const { visit(release_keys, layout ? layout->release_keys : no_items(), f); }
  template <class F>
  void visit_release_extra(F&& f) const { visit(release_extra, layout ? layout->release_extra : no_items(), f); }
  std::string channel_name() const {
    if (!layout) return channel;
    if (layout->channel_suffix.empty()) return {};
    return key + std::string(layout->channel_suffix);
  }
  bool has_channel() const noexcept { return layout ? !layout->channel_suffix.empty() : !channel.empty(); }
  // The first renew key: the key that holds the owner token.
  std::string first_renew_key() const { return layout ? KeyLayout::build(key, layout->renew_keys.first(1)).front() : std::string(renew_keys.front()); }
  // The first release key: the lock's key, which names its process-local wait queue.
  std::string first_release_key() const {
    return layout ? KeyLayout::build(key, layout->release_keys.first(1)).front() : std::string(release_keys.front());
  }

 private:
  static std::span<const KeyLayout::Item> no_items() noexcept { return {}; }
  template <class F>
  void visit(const StringList& list, std::span<const KeyLayout::Item> items, F& f) const {
    if (layout) return KeyLayout::visit(key, items, f);
    for (std::string_view a : list) f(a, std::string_view());
  }
  void append(std::vector<std::string>& args, const StringList& list, std::span<const KeyLayout::Item> items) const {
    if (layout) {
      for (std::string& s : KeyLayout::build(key, items)) args.push_back(std::move(s));
    } else {
      for (std::string_view a : list) args.emplace_back(a);
    }
  }
};

// Shared from this: a revocation notice (on_notification) hands the scheduler a reference to the
// record, as a weak_ptr kept in a std::function per record used to (16 bytes instead of 32).
class LeaseRecord final : public Notifier::Listener, public std::enable_shared_from_this<LeaseRecord> {
 public:
  enum class State : int { held, releasing, released, lost };
  using time_point = BootClock::time_point;

  // `scripts_` is shared, not copied: every lease of a lock object uses the same immutable
  // HoldScripts, which keeps a held lease small (the watchdog may keep thousands). So are the
  // events: `events_` when the caller already keeps them alive (ScriptAttemptSpec::lease), else
  // a copy is made only when there is a callback to keep.
  LeaseRecord(std::shared_ptr<ClientCore> core_, std::string name_, std::string owner_, FencingToken token_,
              std::shared_ptr<const HoldScripts> scripts_, const LeaseOptions& options, time_point sent_at,
              std::shared_ptr<const LeaseEvents> events_ = nullptr)
      : scripts_owner_(std::move(scripts_)),
        events_owner_(events_ ? std::move(events_) : share_events(options.events)),
        core(std::move(core_)),
        name(std::move(name_)),
        owner(std::move(owner_)),
        token(token_),
        scripts(*scripts_owner_),
        events(events_owner_ ? *events_owner_ : no_events()),
        policy(LeaseTiming::from(options), options.mode),
        valid_until_ns_(policy.timing().validity_from(sent_at).time_since_epoch().count()),
        listen_for_revocation(options.listen_for_revocation && scripts.has_channel()) {
    renewal.valid_until = valid_until();
  }
  LeaseRecord(std::shared_ptr<ClientCore> core_, std::string name_, std::string owner_, FencingToken token_,
              HoldScripts scripts_, const LeaseOptions& options, time_point sent_at)
      : LeaseRecord(std::move(core_), std::move(name_), std::move(owner_), token_,
                    std::make_shared<const HoldScripts>(std::move(scripts_)), options, sent_at) {}

 private:
  static std::shared_ptr<const LeaseEvents> share_events(const LeaseEvents& e) {
    if (!e.on_lost && !e.on_at_risk) return nullptr;
    return std::make_shared<const LeaseEvents>(e);
  }
  static const LeaseEvents& no_events() noexcept {
    static const LeaseEvents none;
    return none;
  }

  std::shared_ptr<const HoldScripts> scripts_owner_;
  std::shared_ptr<const LeaseEvents> events_owner_;  // null when there are no callbacks

 public:
  const std::shared_ptr<ClientCore> core;
  const std::string name;
  const std::string owner;
  const FencingToken token;
  const HoldScripts& scripts;
  const LeaseEvents& events;
  // A take of a shared hold (ReentrantMutex): the record the watchdog renews for the whole
  // hold. Lease::remaining() and extend() act on it, and the take does not count in
  // Client::active_leases() (the hold does). Set before the Lease is handed out, then constant.
  std::shared_ptr<LeaseRecord> hold;
  // A hold made of several parts (an ordered MultiLock: one per Cluster slot group), each
  // renewed by the watchdog with its own scripts: Lease::release(), extend() and remaining()
  // act on every part; this record itself is never renewed. Set before the Lease is handed out.
  std::vector<std::shared_ptr<LeaseRecord>> parts;

  // ARGV of the renew and release scripts, by the conventions above.
  std::vector<std::string> renew_args(milliseconds ttl) const {
    std::vector<std::string> args{owner, std::to_string(ttl.count())};
    scripts.append_renew_extra(args);
    return args;
  }
  std::vector<std::string> release_args() const;  // renewal_scheduler.cpp
  // The EVALSHA of scripts.release (or .renew) with these keys and arguments, written in one
  // allocation (encode_evalsha_with): what every release and renewal sends, unless the hold
  // spans several servers (scripts.fanout takes the lists).
  std::string release_payload() const;  // renewal_scheduler.cpp
  std::string renew_payload(milliseconds ttl) const;

  // --- any thread ---
  State state() const noexcept { return state_.load(); }
  time_point valid_until() const noexcept { return time_point(BootClock::duration(valid_until_ns_.load())); }
  void set_valid_until(time_point t) noexcept { valid_until_ns_.store(t.time_since_epoch().count()); }
  LossReason loss_reason() const noexcept { return static_cast<LossReason>(reason_.load()); }
  // held -> releasing. False when it was not held (lost, or released already).
  bool begin_release() noexcept {
    State s = State::held;
    return state_.compare_exchange_strong(s, State::releasing);
  }
  void finish_release() noexcept {
    State s = State::releasing;
    state_.compare_exchange_strong(s, State::released);
  }
  // held -> lost only: a loss that another record's command found (a ReentrantMutex hold's
  // renewal, for its takes) leaves a take under release to its release's own reply, which
  // tells whether the lock was still ours. True for exactly one caller, who must report it.
  bool mark_lost_if_held(LossReason why) noexcept {
    State s = State::held;
    if (!state_.compare_exchange_strong(s, State::lost)) return false;
    reason_.store(static_cast<int>(why));
    return true;
  }
  // held (or releasing) -> lost. True for exactly one caller, who must then report the loss.
  bool mark_lost(LossReason why) noexcept {
    State s = state_.load();
    while (s == State::held || s == State::releasing) {
      if (state_.compare_exchange_weak(s, State::lost)) {
        reason_.store(static_cast<int>(why));
        return true;
      }
    }
    return false;
  }

  // --- loop thread only (RenewalScheduler), except policy.extended_to() (any thread) ---
  RenewalPolicy policy;
  RenewalState renewal;  // mirrored into valid_until() for other threads
  // Loop thread, while `listening`: a revocation was announced; the scheduler checks the key
  // (renewal_scheduler.cpp).
  void on_notification(std::string_view payload) override;
  void on_resubscribed() override;

 private:
  std::atomic<State> state_{State::held};
  std::atomic<int> reason_{0};
  std::atomic<BootClock::rep> valid_until_ns_;

 public:
  // The flags sit together at the end so they share one word of padding.
  const bool listen_for_revocation;
  // --- loop thread only (RenewalScheduler) ---
  bool listening = false;  // subscribed to scripts.channel
  // Position in the scheduler's TimerQueue, kept by the queue; npos (all ones) when not queued.
  std::uint32_t slot = UINT32_MAX;
};

}  // namespace dlock::detail
