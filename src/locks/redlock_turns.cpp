#include "locks/redlock_turns.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

namespace dlock::detail {

std::shared_ptr<RedlockTurns> RedlockTurns::of(const ClientCore* home, const std::string& key) {
  static std::mutex mu;
  static std::map<std::pair<const ClientCore*, std::string>, std::weak_ptr<RedlockTurns>> registry;
  std::lock_guard lock(mu);
  auto& slot = registry[{home, key}];
  if (auto t = slot.lock()) return t;
  // Drop the entries of queues nobody uses any more, so the registry does not grow with every
  // name ever waited for.
  std::erase_if(registry, [](const auto& kv) { return kv.second.expired(); });
  auto t = std::make_shared<RedlockTurns>();
  registry[{home, key}] = t;
  return t;
}

bool RedlockTurns::push(std::shared_ptr<Waiter> w) {
  waiters_.push_back(std::move(w));
  return waiters_.size() == 1;
}

void RedlockTurns::remove(const Waiter* w, bool took_it, bool handover_pending) {
  auto it = std::find_if(waiters_.begin(), waiters_.end(), [w](const auto& p) { return p.get() == w; });
  if (it == waiters_.end()) return;
  const bool was_head = it == waiters_.begin();
  std::shared_ptr<Waiter> keep = std::move(*it);  // destroyed after the queue is consistent
  waiters_.erase(it);
  if (was_head && handover_pending) {
    last_head_took_it_ = true;  // and handover_generation_ stays the holder's
  } else if (was_head) {
    last_head_took_it_ = took_it;
    // Taken before the caller can release the lease it just got: its release cannot be missed.
    if (took_it) handover_generation_ = generation_;
  }
  if (waiters_.empty()) {
    last_head_took_it_ = false;
    wakeups_.reset();  // unsubscribes on every node
    return;
  }
  if (was_head) promote();
}

// The next head starts now, from within remove(): the queue is consistent already. A head that
// leaves at once (its deadline passed, its Client shuts down) calls remove() again from its
// on_head(); that nested call only notes the change and this loop starts the one after, so a
// queue of thousands that empties at once does not recurse thousands of calls deep.
void RedlockTurns::promote() {
  if (promoting_) {
    head_changed_ = true;
    return;
  }
  promoting_ = true;
  do {
    head_changed_ = false;
    std::shared_ptr<Waiter> next = waiters_.front();  // keeps it alive should it leave at once
    next->on_head();
  } while (head_changed_ && !waiters_.empty());
  promoting_ = false;
}

bool RedlockTurns::take_after_holder(std::uint64_t& handover_generation) noexcept {
  handover_generation = handover_generation_;
  return std::exchange(last_head_took_it_, false);
}

void RedlockTurns::subscribe(const RedlockNodes& nodes, const std::string& channel) {
  if (wakeups_) return;
  // Weak: the subscriptions are the queue's, and the callbacks must not keep it alive.
  std::weak_ptr<RedlockTurns> weak = weak_from_this();
  wakeups_ = std::make_unique<RedlockWakeups>(
      nodes, channel,
      [weak] {
        if (auto t = weak.lock()) t->wake();
      },
      [weak] {
        if (auto t = weak.lock()) t->all_subscribed();
      });
}

void RedlockTurns::wake() {
  ++generation_;
  if (!waiters_.empty()) {
    std::shared_ptr<Waiter> head = waiters_.front();
    head->on_wake();
  }
}

void RedlockTurns::all_subscribed() {
  if (!waiters_.empty()) {
    std::shared_ptr<Waiter> head = waiters_.front();
    head->on_subscribed();
  }
}

}  // namespace dlock::detail
