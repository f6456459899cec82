// The waiters of one Redlock in this process take turns (a process-local FIFO, as Mutex's
// WaitQueue): only the head contends on the nodes, the others wait until it leaves. Without
// it every waiting caller fans a try out to every node on every release, and all but one of
// those tries are lost (a herd of 3 commands per waiter per release, measured in
// docs/BENCHMARKS.md). The head also keeps the lock's subscriptions (RedlockWakeups) for the
// whole queue, so a busy lock costs one SUBSCRIBE per node while anyone here waits, not one per
// wait.
//
// A Redlock is identified by its first node's Client (the home Client) and its key: Redlock
// objects built over the same Clients with the same name share one RedlockTurns. Everything but
// of() runs on the home Client's loop thread, where every Redlock wait runs (redlock_acquire.cpp),
// so the queue needs no lock and never blocks a thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "locks/redlock_wait.hpp"

namespace dlock::detail {

class ClientCore;

class RedlockTurns final : public std::enable_shared_from_this<RedlockTurns> {
 public:
  using Duration = std::chrono::nanoseconds;

  // What the queue tells a waiter (on the home loop thread).
  struct Waiter {
    virtual ~Waiter() = default;
    virtual void on_head() = 0;        // it is the head now (not called from push())
    virtual void on_wake() = 0;        // the head only: a wake-up (RedlockWakeups)
    virtual void on_subscribed() = 0;  // the head only: every node answered the subscription
  };

  // The queue of the Redlock on `home` named by `key`, created on first use; dropped when nobody
  // holds a reference. Any thread.
  static std::shared_ptr<RedlockTurns> of(const ClientCore* home, const std::string& key);

  // Joins at the back; true when the waiter is the head at once.
  bool push(std::shared_ptr<Waiter> w);
  // Leaves (a waiter not in the queue is ignored). `took_it`: the head leaves holding the lock,
  // so the next head waits for its release instead of trying (a try now could only fail).
  // `handover_pending`: the head leaves (its deadline passed, it was stopped) while it still
  // waited for such a release, without a try of its own: the next head waits for it in turn.
  void remove(const Waiter* w, bool took_it, bool handover_pending = false);
  bool is_head(const Waiter* w) const noexcept { return !waiters_.empty() && waiters_.front().get() == w; }

  // For a new head: whether the head before it left holding the lock, and the wake-up
  // generation when it did (a release since then has moved past it). Read once.
  bool take_after_holder(std::uint64_t& handover_generation) noexcept;
  // Counts the wake-ups seen so far (a release announced by a majority, any other message, a
  // resubscription).
  std::uint64_t generation() const noexcept { return generation_; }
  // How long the heads' tries take (the last one measured), for the hold-back after a handover.
  Duration last_try_round_trip() const noexcept { return last_try_; }
  void note_try_round_trip(Duration d) noexcept { last_try_ = d; }
  // Whether the queue listens on the lock's channel on every node; subscribe() starts it (the
  // head, when its try found the lock busy); the subscriptions stay while anyone waits.
  bool subscribed() const noexcept { return wakeups_ != nullptr; }
  void subscribe(const RedlockNodes& nodes, const std::string& channel);

 private:
  void wake();
  void all_subscribed();
  void promote();

  std::deque<std::shared_ptr<Waiter>> waiters_;
  bool promoting_ = false;    // promote() is running
  bool head_changed_ = false;  // ... and a nested remove() took the head it started
  bool last_head_took_it_ = false;
  std::uint64_t handover_generation_ = 0;  // generation_ when that head left
  std::uint64_t generation_ = 0;
  Duration last_try_{0};
  std::unique_ptr<RedlockWakeups> wakeups_;  // while the queue is not empty
};

}  // namespace dlock::detail
