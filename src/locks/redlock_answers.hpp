// AcquireAnswers: which masters have answered one Redlock try's acquire, so that the try's
// cleanup (the release of its owner token) reaches each node only after that node's acquire.
//
// Why: a release sent at once may run before the acquire still in flight on that node. A lock's
// commands share one of the node's connections (Node::pick), but while that one is down another
// carries new ones, and the server may still run what it had read from the old one. It then
// found nothing to release, and the acquire, arriving after it, took the key, which sat out its
// TTL held by nobody (redlock_acquire.lua also refuses a key this owner left a tombstone for,
// but a tombstone is not written where another owner's release marker is). So the release goes
// out at once to the nodes that answered, and to each other node as its answer arrives,
// whatever it is (an error reply or a failed command counts: the command is no longer queued
// ahead of the release on the Client's side).
//
// A try that became a hold has the same hazard when the hold is let go quickly: its release
// goes to every node, and a node whose acquire was still in flight (the majority had answered
// without it) may take the key after the release passed. A release marker of another owner on
// that node keeps the tombstone out that would refuse it (as above). So once the try is kept,
// a node that answers after the hold was let go is released too.
//
// Any thread; `release_on(i)` is called outside the lock, at most once per node.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "renewal/lease_record.hpp"

namespace dlock::detail {

class AcquireAnswers {
 public:
  AcquireAnswers(std::size_t nodes, std::function<void(std::size_t)> release_on)
      : answered_(nodes, false), release_on_(std::move(release_on)) {}

  // Node `i`'s acquire was answered.
  void answered(std::size_t i) {
    std::function<bool()> let_go;
    {
      std::lock_guard lock(mu_);
      if (i >= answered_.size() || answered_[i]) return;
      answered_[i] = true;
      if (!released_) {
        if (!let_go_) return;
        let_go = let_go_;
      }
    }
    if (let_go && !let_go()) return;  // still held: its release, later, comes after this answer
    release_on_(i);
  }

  // The try became a hold; `let_go()` (any thread) says whether the hold has been released,
  // lost or dropped since. Call before the hold is handed out. Nodes that answered already
  // need nothing: the hold's release reaches them after their acquire.
  void kept(std::function<bool()> let_go) {
    std::lock_guard lock(mu_);
    let_go_ = std::move(let_go);
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
  std::function<bool()> let_go_;  // set once the try is kept (kept())
  std::function<void(std::size_t)> release_on_;
};

// AcquireAnswers::kept's test for a Redlock hold: let go once its record is released (or
// releasing: begin_release() comes before any release is sent), lost, or gone.
inline std::function<bool()> let_go_of(const std::shared_ptr<LeaseRecord>& rec) {
  return [held = std::weak_ptr<LeaseRecord>(rec)] {
    const auto r = held.lock();
    return !r || r->state() != LeaseRecord::State::held;
  };
}

}  // namespace dlock::detail
