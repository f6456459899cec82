#include "locks/redlock_wait.hpp"

#include <algorithm>
#include <array>

#include "client_core.hpp"

namespace dlock::detail {

struct RedlockWakeups::Listener final : Notifier::Listener {
  mutable std::mutex mu;
  std::condition_variable_any cv;
  std::uint64_t generation = 0;
  std::size_t answered = 0;  // subscriptions confirmed or failed
  // The last releases seen ("released <token>"), with how many nodes announced each.
  struct Seen {
    std::string message;
    std::size_t copies = 0;
  };
  std::array<Seen, 8> recent;
  std::size_t next_recent = 0;
  std::size_t quorum = 1;

  // Any other message on the lock's channel ("revoked", a foreign client's) may mean it is free,
  // and a resubscription means messages were missed: try again at once.
  // A release is published by every node that held the key, each as it deletes it; the lock can
  // be taken only once a majority has. So the copies of one release (named by its token) wake
  // the waiter once, when the quorum-th arrives: a try at the first copy would mostly find the
  // other nodes still held and split. When fewer nodes announce it (some lost the key), the
  // waiter's recheck finds the lock free.
  void on_notification(std::string_view message) override {
    if (message.starts_with("released ")) {
      std::lock_guard lock(mu);
      auto it = std::find_if(recent.begin(), recent.end(), [&](const Seen& s) { return s.message == message; });
      if (it == recent.end()) {
        it = recent.begin() + (next_recent++ % recent.size());
        it->message.assign(message);
        it->copies = 0;
      }
      if (++it->copies != quorum) return;
    }
    bump();
  }
  void on_resubscribed() override { bump(); }
  void bump() {
    {
      std::lock_guard lock(mu);
      ++generation;
    }
    cv.notify_all();
  }
  void confirmed() {
    {
      std::lock_guard lock(mu);
      ++answered;
    }
    cv.notify_all();
  }
};

RedlockWakeups::RedlockWakeups(const RedlockNodes& nodes, std::string channel)
    : nodes_(nodes), channel_(std::move(channel)), listener_(std::make_shared<Listener>()) {
  listener_->quorum = nodes_.quorum();
  // The posted work holds its core weakly: a Client shut down before it runs never runs it,
  // and a strong reference kept in its own queue would keep it alive for ever.
  for (const auto& core : nodes_.cores) {
    core->post([weak = std::weak_ptr<ClientCore>(core), l = listener_, ch = channel_] {
      auto c = weak.lock();
      if (!c) return;
      // A failed subscription is retried by the Notifier once the node is back; meanwhile the
      // recheck interval bounds the wait.
      c->notifier().subscribe(ch, l.get(), [l](const Error&) { l->confirmed(); });
    });
  }
}

RedlockWakeups::~RedlockWakeups() {
  for (const auto& core : nodes_.cores) {
    core->post([weak = std::weak_ptr<ClientCore>(core), l = listener_, ch = channel_] {
      if (auto c = weak.lock()) c->notifier().unsubscribe(ch, l.get());
    });
  }
}

void RedlockWakeups::await_subscribed(std::chrono::steady_clock::time_point until, const std::stop_token& stop) {
  std::unique_lock lock(listener_->mu);
  listener_->cv.wait_until(lock, stop, until, [&] { return listener_->answered >= nodes_.size(); });
}

std::uint64_t RedlockWakeups::generation() const {
  std::lock_guard lock(listener_->mu);
  return listener_->generation;
}

bool RedlockWakeups::sleep(std::uint64_t seen, std::chrono::steady_clock::time_point until,
                           const std::stop_token& stop) {
  std::unique_lock lock(listener_->mu);
  return listener_->cv.wait_until(lock, stop, until, [&] { return listener_->generation != seen; });
}

void RedlockWakeups::pause(std::chrono::steady_clock::time_point until, const std::stop_token& stop) {
  std::unique_lock lock(listener_->mu);
  listener_->cv.wait_until(lock, stop, until, [] { return false; });
}

}  // namespace dlock::detail
