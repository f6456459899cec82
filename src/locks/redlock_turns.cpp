#include "locks/redlock_turns.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace dlock::detail {

std::shared_ptr<RedlockTurns> RedlockTurns::of(const void* first_node, const std::string& key) {
  static std::mutex mu;
  static std::map<std::pair<const void*, std::string>, std::weak_ptr<RedlockTurns>> registry;
  std::lock_guard lock(mu);
  auto& slot = registry[{first_node, key}];
  if (auto t = slot.lock()) return t;
  // Drop the entries of queues nobody uses any more, so the registry does not grow with every
  // name ever waited for.
  std::erase_if(registry, [](const auto& kv) { return kv.second.expired(); });
  auto t = std::make_shared<RedlockTurns>();
  registry[{first_node, key}] = t;
  return t;
}

RedlockTurns::Place::Place(std::shared_ptr<RedlockTurns> turns) : turns_(std::move(turns)) {
  std::lock_guard lock(turns_->mu_);
  ticket_ = turns_->next_ticket_++;
  turns_->queue_.push_back(ticket_);
}

RedlockTurns::Place::~Place() {
  std::unique_ptr<RedlockWakeups> unsubscribe;  // destroyed outside the lock
  {
    std::lock_guard lock(turns_->mu_);
    auto& q = turns_->queue_;
    const bool was_head = !q.empty() && q.front() == ticket_;
    q.erase(std::find(q.begin(), q.end(), ticket_));
    if (was_head) {
      turns_->last_head_took_it_ = took_it_;
      // Taken before the caller can release the lease it just got: its release cannot be missed.
      if (took_it_ && turns_->wakeups_) turns_->handover_generation_ = turns_->wakeups_->generation();
    }
    if (q.empty()) {
      turns_->last_head_took_it_ = false;
      unsubscribe = std::move(turns_->wakeups_);
    }
  }
  turns_->cv_.notify_all();
}

bool RedlockTurns::Place::await_head(std::optional<Steady::time_point> until, const std::stop_token& stop) {
  std::unique_lock lock(turns_->mu_);
  auto is_head = [&] { return turns_->queue_.front() == ticket_; };
  bool head = until ? turns_->cv_.wait_until(lock, stop, *until, is_head) : turns_->cv_.wait(lock, stop, is_head);
  if (!head) return false;
  after_holder_ = turns_->last_head_took_it_;
  handover_generation_ = turns_->handover_generation_;
  turns_->last_head_took_it_ = false;
  return true;
}

RedlockTurns::Steady::duration RedlockTurns::Place::last_try_round_trip() const {
  std::lock_guard lock(turns_->mu_);
  return turns_->last_try_;
}

void RedlockTurns::Place::note_try_round_trip(Steady::duration d) {
  std::lock_guard lock(turns_->mu_);
  turns_->last_try_ = d;
}

RedlockWakeups* RedlockTurns::Place::wakeups() const {
  std::lock_guard lock(turns_->mu_);
  return turns_->wakeups_.get();
}

RedlockWakeups& RedlockTurns::Place::subscribe(const RedlockNodes& nodes, const std::string& channel) {
  std::lock_guard lock(turns_->mu_);
  if (!turns_->wakeups_) turns_->wakeups_ = std::make_unique<RedlockWakeups>(nodes, channel);
  return *turns_->wakeups_;
}

}  // namespace dlock::detail
