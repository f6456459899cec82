// What a Redlock waiter sleeps on: the lock's channel on EVERY node. A release wakes it once a
// majority of nodes announced it (redlock_wait.cpp says why), any other message at once. Held by
// the process-local queue of the lock's waiters (redlock_turns.hpp) while anyone waits; the
// queue's head sleeps on a timer of the home Client's loop (redlock_acquire.cpp), bounded by its
// deadline, the holders' TTL and the recheck interval, and these callbacks cut the sleep short.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "locks/redlock_fanout.hpp"

namespace dlock::detail {

class RedlockWakeups {
 public:
  // Subscribes to `channel` on every node (posted to each node's loop thread). Both callbacks
  // are posted to the loop thread of nodes.cores[0] (the home Client): `wake` for every wake-up
  // (a release a majority announced, any other message, a resubscription: messages may have
  // been lost), `subscribed` once, when every node confirmed or failed its subscription.
  RedlockWakeups(const RedlockNodes& nodes, std::string channel, std::function<void()> wake,
                 std::function<void()> subscribed);
  // Unsubscribes everywhere (posted; the listener stays alive until each node has done it). No
  // callback runs after this returns on the home loop thread (they check a flag there).
  ~RedlockWakeups();
  RedlockWakeups(const RedlockWakeups&) = delete;
  RedlockWakeups& operator=(const RedlockWakeups&) = delete;

 private:
  struct Listener;
  RedlockNodes nodes_;
  std::string channel_;
  std::shared_ptr<Listener> listener_;
};

}  // namespace dlock::detail
