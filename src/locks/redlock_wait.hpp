// What a Redlock waiter sleeps on: the lock's channel on EVERY node. A release wakes it once a
// majority of nodes announced it (redlock_wait.cpp says why), any other message at once. Held by
// the process-local queue of the lock's waiters (redlock_turns.hpp) while anyone waits; the head
// waiter's thread blocks on a condition variable, bounded by its deadline, the holders' TTL and
// the recheck interval.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "locks/redlock_fanout.hpp"
#include "notify/notifier.hpp"

namespace dlock::detail {

class RedlockWakeups {
 public:
  // Subscribes to `channel` on every node (posted to each node's loop thread).
  RedlockWakeups(const RedlockNodes& nodes, std::string channel);
  // Unsubscribes everywhere (posted; the listener stays alive until each node has done it).
  ~RedlockWakeups();
  RedlockWakeups(const RedlockWakeups&) = delete;
  RedlockWakeups& operator=(const RedlockWakeups&) = delete;

  // Waits until every node confirmed (or failed) the subscription, `until`, or a stop request.
  void await_subscribed(std::chrono::steady_clock::time_point until, const std::stop_token& stop);
  // Counts the notifications (and resubscriptions) seen so far.
  std::uint64_t generation() const;
  // Sleeps until the generation moves past `seen`, `until`, or a stop request. True when woken
  // by a notification.
  bool sleep(std::uint64_t seen, std::chrono::steady_clock::time_point until, const std::stop_token& stop);
  // Sleeps until `until` or a stop request, deaf to notifications.
  void pause(std::chrono::steady_clock::time_point until, const std::stop_token& stop);

 private:
  struct Listener;
  RedlockNodes nodes_;
  std::string channel_;
  std::shared_ptr<Listener> listener_;
};

}  // namespace dlock::detail
