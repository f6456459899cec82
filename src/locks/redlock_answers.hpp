// AcquireAnswers: which masters have answered one Redlock try's acquire, so that the try's
// cleanup (the release of its owner token) reaches each node only after that node's acquire.
//
// Why: with ClientOptions::connections_per_node >= 2 a release sent at once may leave on
// another connection of the node than the acquire still in flight, and run first. It then
// found nothing to release, and the acquire, arriving after it, took the key, which sat out its
// TTL held by nobody (redlock_acquire.lua also refuses a key this owner left a tombstone for,
// but a tombstone is not written where another owner's release marker is). So the release goes
// out at once to the nodes that answered, and to each other node as its answer arrives,
// whatever it is (an error reply or a failed command counts: the command is no longer queued
// ahead of the release on the Client's side).
//
// Any thread; `release_on(i)` is called outside the lock, at most once per node.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

namespace dlock::detail {

class AcquireAnswers {
 public:
  AcquireAnswers(std::size_t nodes, std::function<void(std::size_t)> release_on)
      : answered_(nodes, false), release_on_(std::move(release_on)) {}

  // Node `i`'s acquire was answered.
  void answered(std::size_t i) {
    {
      std::lock_guard lock(mu_);
      if (i >= answered_.size() || answered_[i]) return;
      answered_[i] = true;
      if (!released_) return;
    }
    release_on_(i);
  }

  // The try is given up: release on every node that answered, and on the others once they do.
  // Idempotent.
  void release() {
    std::vector<std::size_t> now;
    {
      std::lock_guard lock(mu_);
      if (released_) return;
      released_ = true;
      for (std::size_t i = 0; i < answered_.size(); ++i) {
        if (answered_[i]) now.push_back(i);
      }
    }
    for (std::size_t i : now) release_on_(i);
  }

 private:
  std::mutex mu_;
  std::vector<bool> answered_;
  bool released_ = false;
  std::function<void(std::size_t)> release_on_;
};

}  // namespace dlock::detail
