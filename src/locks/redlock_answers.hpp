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
// The same bookkeeping serves the fencing catch-up: a try that counted without a write-back
// round (a majority answered the token it chose, redlock_attempt.cpp) still sends the token to
// every node behind it (one that granted a lower token, was busy or failed), each once its
// answer is in, so that every reachable node knows the token as after a write-back round.
//
// Any thread; `release_on(i)` and `write_back_on(i, token)` are called outside the lock, each
// at most once per node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "renewal/lease_record.hpp"

namespace dlock::detail {

class AcquireAnswers {
 public:
  // `write_back_on` may be empty when catch_up() is never called.
  AcquireAnswers(std::size_t nodes, std::function<void(std::size_t)> release_on,
                 std::function<void(std::size_t, std::uint64_t)> write_back_on = {})
      : answered_(nodes, false),
        granted_(nodes),
        release_on_(std::move(release_on)),
        write_back_on_(std::move(write_back_on)) {}

  // Node `i`'s acquire was answered; `granted`: the fencing token it granted, if it did.
  void answered(std::size_t i, std::optional<std::uint64_t> granted = std::nullopt) {
    std::function<bool()> let_go;
    std::optional<std::uint64_t> write_back;
    bool release = false;
    {
      std::lock_guard lock(mu_);
      if (i >= answered_.size() || answered_[i]) return;
      answered_[i] = true;
      granted_[i] = granted;
      if (chosen_ && behind(granted, *chosen_)) write_back = chosen_;
      if (released_) release = true;
      else let_go = let_go_;
    }
    if (write_back) write_back_on_(i, *write_back);
    // A kept hold still held: its release, later, comes after this answer.
    if (release || (let_go && let_go())) release_on_(i);
  }

  // The try counted with `token` and wrote it back nowhere: the nodes behind it that answered
  // already get it now, the others when they answer.
  void catch_up(std::uint64_t token) {
    std::vector<std::size_t> late;
    {
      std::lock_guard lock(mu_);
      chosen_ = token;
      for (std::size_t i = 0; i < answered_.size(); ++i) {
        if (answered_[i] && behind(granted_[i], token)) late.push_back(i);
      }
    }
    for (std::size_t i : late) write_back_on_(i, token);
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
  // A node that granted nothing (busy, failed) or a lower token; one that granted a higher
  // token (its counter was ahead, and it answered after the verdict) needs nothing.
  static bool behind(const std::optional<std::uint64_t>& granted, std::uint64_t token) {
    return !granted || *granted < token;
  }

  std::mutex mu_;
  std::vector<bool> answered_;
  std::vector<std::optional<std::uint64_t>> granted_;
  std::optional<std::uint64_t> chosen_;  // set by catch_up()
  bool released_ = false;
  std::function<bool()> let_go_;  // set once the try is kept (kept())
  std::function<void(std::size_t)> release_on_;
  std::function<void(std::size_t, std::uint64_t)> write_back_on_;
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
