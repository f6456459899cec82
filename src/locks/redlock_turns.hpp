// The waiters of one Redlock in this process take turns (a process-local FIFO, as Mutex's
// WaitQueue): only the head contends on the nodes, the others block until it leaves. Without
// it every waiting thread fans a try out to every node on every release, and all but one of
// those tries are lost (a herd of 3 commands per waiter per release, measured in
// docs/BENCHMARKS.md). The head also keeps the lock's subscriptions (RedlockWakeups) for the
// whole queue, so a busy lock costs one SUBSCRIBE per node while anyone here waits, not one per
// wait.
//
// A Redlock is identified by its first node's Client and its key: Redlock objects built over
// the same Clients with the same name share one RedlockTurns. Waits are blocking (Redlock has
// no asynchronous form), so the queue blocks caller threads, bounded by their deadline and
// stop_token.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "locks/redlock_wait.hpp"

namespace dlock::detail {

class RedlockTurns {
 public:
  using Steady = std::chrono::steady_clock;

  // The queue of the Redlock on `first_node` named by `key`, created on first use; dropped when
  // nobody holds a reference.
  static std::shared_ptr<RedlockTurns> of(const void* first_node, const std::string& key);

  // One waiter's place: joins at construction, leaves at destruction (any thread).
  class Place {
   public:
    explicit Place(std::shared_ptr<RedlockTurns> turns);
    ~Place();
    Place(const Place&) = delete;
    Place& operator=(const Place&) = delete;
    // Blocks until this place is the head, `until` (nullopt: no deadline) or a stop request.
    // True when it is the head.
    bool await_head(std::optional<Steady::time_point> until, const std::stop_token& stop);
    // Whether the waiter before this one left holding the lock (so a try now would only fail),
    // and the wake-up generation when it left: a release since then has moved past it.
    bool after_holder() const noexcept { return after_holder_; }
    std::uint64_t handover_generation() const noexcept { return handover_generation_; }
    // How long the heads' tries take (the last one measured), for the hold-back in redlock.cpp.
    Steady::duration last_try_round_trip() const;
    void note_try_round_trip(Steady::duration d);
    // Marks that this waiter leaves holding the lock.
    void took_it() noexcept { took_it_ = true; }
    // The queue's subscriptions on every node; created by the head at its first wait. Head only.
    RedlockWakeups* wakeups() const;
    RedlockWakeups& subscribe(const RedlockNodes& nodes, const std::string& channel);

   private:
    std::shared_ptr<RedlockTurns> turns_;
    std::uint64_t ticket_;
    bool after_holder_ = false;
    std::uint64_t handover_generation_ = 0;
    bool took_it_ = false;
  };

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::uint64_t> queue_;
  std::uint64_t next_ticket_ = 0;
  bool last_head_took_it_ = false;
  std::uint64_t handover_generation_ = 0;  // wakeups_'s generation when that head left
  Steady::duration last_try_{0};
  std::unique_ptr<RedlockWakeups> wakeups_;  // while the queue is not empty
};

}  // namespace dlock::detail
