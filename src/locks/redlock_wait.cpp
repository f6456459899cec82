#include "locks/redlock_wait.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include "client_core.hpp"
#include "notify/notifier.hpp"

namespace dlock::detail {

// Registered with every node's Notifier; its notifications run on that node's loop thread, and
// what they decide is posted to the home loop.
struct RedlockWakeups::Listener final : Notifier::Listener, std::enable_shared_from_this<RedlockWakeups::Listener> {
  std::mutex mu;
  std::size_t answered = 0;  // subscriptions confirmed or failed
  // The last releases seen ("released <token>"), with how many nodes announced each.
  struct Seen {
    std::string message;
    std::size_t copies = 0;
  };
  std::array<Seen, 8> recent;
  std::size_t next_recent = 0;
  std::size_t quorum = 1;
  std::size_t nodes = 1;
  // Weak: work posted to the home Client's own queue must not keep it alive.
  std::weak_ptr<ClientCore> home;
  std::function<void()> wake;
  std::function<void()> subscribed;
  // Set (on the home loop) when the RedlockWakeups goes: callbacks posted before that find it.
  std::atomic<bool> retired{false};

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
        it = recent.begin() + static_cast<std::ptrdiff_t>(next_recent++ % recent.size());
        it->message.assign(message);
        it->copies = 0;
      }
      if (++it->copies != quorum) return;
    }
    to_home(&Listener::wake);
  }
  void on_resubscribed() override { to_home(&Listener::wake); }
  void confirmed() {
    {
      std::lock_guard lock(mu);
      if (++answered != nodes) return;
    }
    to_home(&Listener::subscribed);
  }

  // The callbacks are set at construction and never changed, so reading them here is safe.
  void to_home(std::function<void()> Listener::*which) {
    auto h = home.lock();
    if (!h) return;
    auto run = [self = shared_from_this(), which] {
      if (!self->retired.load(std::memory_order_acquire) && (*self).*which) ((*self).*which)();
    };
    if (h->on_loop_thread()) {
      run();
    } else {
      h->post(std::move(run));
    }
  }
};

RedlockWakeups::RedlockWakeups(const RedlockNodes& nodes, std::string channel, std::function<void()> wake,
                               std::function<void()> subscribed)
    : nodes_(nodes), channel_(std::move(channel)), listener_(std::make_shared<Listener>()) {
  listener_->quorum = nodes_.quorum();
  listener_->nodes = nodes_.size();
  listener_->home = nodes_.cores.front();
  listener_->wake = std::move(wake);
  listener_->subscribed = std::move(subscribed);
  // The posted work holds its core weakly: a subscription has no say in how long that Client
  // lives (one whose loop has ended fails it at once: Notifier::subscribe).
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
  listener_->retired.store(true, std::memory_order_release);
  for (const auto& core : nodes_.cores) {
    core->post([weak = std::weak_ptr<ClientCore>(core), l = listener_, ch = channel_] {
      if (auto c = weak.lock()) c->notifier().unsubscribe(ch, l.get());
    });
  }
}

}  // namespace dlock::detail
