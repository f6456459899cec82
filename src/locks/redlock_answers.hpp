// AcquireAnswers: which masters have answered one Redlock try's acquire, so that the try's
// cleanup (the release of its owner token) reaches each node only after that node's acquire.
//
// Why: a release sent at once may run before the acquire still in flight on that node. A lock's
// commands share one of the node's connections (Node::pick), but while that one is down another
// carries new ones, and the server may still run what it had read from the old one. It then
// found nothing to release, and the acquire, arriving after it, took the key, which sat out its
// TTL held by nobody (redlock_acquire.lua also refuses a key this owner left a tombstone or
// release marker for, but a tombstone is not written where another owner's marker is). So the
// release goes out at once to the nodes that answered, and to each other node as its answer
// arrives, whatever it is (an error reply or a failed command counts: the command is no longer
// queued ahead of the release on the Client's side).
//
// A node whose acquire took nothing (busy, a key of another type, this owner's tombstone) is
// never released: there is nothing of this try's there, and the release would only cost a
// command on every lost contest.
//
// A try that became a hold has the same hazard when the hold is let go quickly: its release
// goes to every node, and a node whose acquire was still in flight (the majority had answered
// without it) may take the key after the release passed. A release marker of another owner on
// that node keeps the tombstone out that would refuse it (as above). So once the try is kept,
// a node that took the key and answers after the hold was let go is released again, unless
// the hold's own release is known to have come after its acquire there: it answered 1 or 2
// (it found the key, or its own marker). A 1 can also come from a key the hold's renewal set
// there before the acquire arrived (redlock_renew.lua, reply 3); the acquire then finds this
// owner's marker and takes nothing, so the inference holds. Usually that release is still in
// flight on the same connection when the acquire's answer arrives, or about to be sent (the
// hold is releasing); the decision then waits for its answer (hold_release_sent,
// hold_released). A decision still waiting when the object ends (that release was never sent)
// releases; one answering after a release whose answers will not be heard (the Client shuts
// down: hold_release_unheard) is released at once.
// Once the hold ended without a release of its own here (lost, or gone), the node is released
// at once. In the uncontended Redlock bench this second release was most of the commands above
// 2 per node and pair (docs/BENCHMARKS.md).
//
// The same bookkeeping serves the fencing catch-up: a try that counted without a write-back
// round (a majority answered the token it chose, redlock_attempt.cpp) still sends the token to
// every node behind it (one that granted a lower token, was busy or failed), each once its
// answer is in, so that every reachable node knows the token as after a write-back round.
//
// Any thread; `release_on(i)` and `write_back_on(i, token)` are called outside the lock, each
// at most once per node (`release_on` may be called from the destructor).
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

// What one node's acquire did.
struct NodeAnswer {
  enum class Kind {
    unknown,  // an error reply or a failed command: it may have taken the key
    took,     // took the key, with `token`
    nothing,  // took nothing: busy, another type, or this owner's tombstone
  };
  Kind kind = Kind::unknown;
  std::uint64_t token = 0;

  static NodeAnswer took_with(std::uint64_t t) { return {Kind::took, t}; }
  static NodeAnswer took_nothing() { return {Kind::nothing, 0}; }
  static NodeAnswer not_known() { return {}; }
};

// Where a kept hold stands, for a node that answers late (AcquireAnswers::kept).
enum class HoldNow {
  held,       // its release, later, comes after this answer
  releasing,  // its release is about to be sent, or was
  ended,      // released, lost or gone: no release of its own is coming any more
};

class AcquireAnswers {
 public:
  // `write_back_on` may be empty when catch_up() is never called.
  AcquireAnswers(std::size_t nodes, std::function<void(std::size_t)> release_on,
                 std::function<void(std::size_t, std::uint64_t)> write_back_on = {})
      : nodes_(nodes),
        release_on_(std::move(release_on)),
        write_back_on_(std::move(write_back_on)) {}

  AcquireAnswers(const AcquireAnswers&) = delete;
  AcquireAnswers& operator=(const AcquireAnswers&) = delete;

  // A node whose release waited for the hold's, which never answered there: released now.
  ~AcquireAnswers() {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i].owed) continue;
      try {
        release_on_(i);
      } catch (...) {  // out of memory: the key expires at its TTL
      }
    }
  }

  // Node `i`'s acquire was answered.
  void answered(std::size_t i, NodeAnswer a = {}) {
    const std::function<HoldNow()>* hold_now = nullptr;  // set once by kept(), then never changed
    std::optional<std::uint64_t> write_back;
    bool release = false;
    {
      std::lock_guard lock(mu_);
      if (i >= nodes_.size() || nodes_[i].answered) return;
      Node& n = nodes_[i];
      n.answered = true;
      n.answer = a;
      if (chosen_ && behind(a, *chosen_)) write_back = chosen_;
      if (a.kind != NodeAnswer::Kind::nothing) {
        if (released_) release = true;
        else if (hold_now_) hold_now = &hold_now_;
      }
    }
    if (write_back) write_back_on_(i, *write_back);
    if (hold_now != nullptr) release = after_the_hold(i, (*hold_now)());
    if (release) release_on_(i);
  }

  // The kept hold's release is about to go to every node (any retry of it too).
  void hold_release_sent() {
    std::lock_guard lock(mu_);
    for (Node& n : nodes_) {
      if (n.hold_release != HoldRelease::took_effect) n.hold_release = HoldRelease::in_flight;
    }
  }

  // Node `i` answered the hold's release; `took_effect`: it answered 1 or 2, so it ran after
  // the node's acquire. A node whose release of this try waited for that answer gets it now
  // if it did not.
  void hold_released(std::size_t i, bool took_effect) {
    bool release = false;
    {
      std::lock_guard lock(mu_);
      if (i >= nodes_.size()) return;
      Node& n = nodes_[i];
      if (n.hold_release == HoldRelease::took_effect) return;
      n.hold_release = took_effect ? HoldRelease::took_effect : HoldRelease::no_effect;
      release = n.owed && !took_effect;
      n.owed = false;
    }
    if (release) release_on_(i);
  }

  // The kept hold's release went out where its answers are not heard (the home Client shuts
  // down: ClientCore::release_held sends it without run()). A node that answers after it was
  // sent may have taken the key after it passed, and nothing would decide it until this object
  // ends with the Lease (which may be long after): it is released at once. A node waiting
  // already had answered before the release was sent, which then reaches it after its acquire:
  // nothing more is owed to it.
  void hold_release_unheard() {
    std::lock_guard lock(mu_);
    unheard_ = true;
    for (Node& n : nodes_) n.owed = false;
  }

  // The try counted with `token` and wrote it back nowhere: the nodes behind it that answered
  // already get it now, the others when they answer.
  void catch_up(std::uint64_t token) {
    std::vector<std::size_t> late;
    {
      std::lock_guard lock(mu_);
      chosen_ = token;
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i].answered && behind(nodes_[i].answer, token)) late.push_back(i);
      }
    }
    for (std::size_t i : late) write_back_on_(i, token);
  }

  // The try became a hold; `hold_now()` (any thread) says where it stands. Call once, before
  // the hold is handed out. Nodes that answered already need nothing: the hold's release
  // reaches them after their acquire.
  void kept(std::function<HoldNow()> hold_now) {
    std::lock_guard lock(mu_);
    hold_now_ = std::move(hold_now);
  }

  // The try is given up: release on every node that answered (and may have taken the key), and
  // on the others once they do. Idempotent.
  void release() {
    std::vector<std::size_t> now;
    {
      std::lock_guard lock(mu_);
      if (released_) return;
      released_ = true;
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i].answered && nodes_[i].answer.kind != NodeAnswer::Kind::nothing) now.push_back(i);
      }
    }
    for (std::size_t i : now) release_on_(i);
  }

 private:
  enum class HoldRelease { not_sent, in_flight, took_effect, no_effect };
  struct Node {
    bool answered = false;
    NodeAnswer answer;
    HoldRelease hold_release = HoldRelease::not_sent;
    bool owed = false;  // released once the hold's release answers, unless it took effect
  };

  // A node that granted nothing (busy, failed) or a lower token; one that granted a higher
  // token (its counter was ahead, and it answered after the verdict) needs nothing.
  static bool behind(const NodeAnswer& a, std::uint64_t token) {
    return a.kind != NodeAnswer::Kind::took || a.token < token;
  }

  // Node `i`, which may hold the key, answered after the try was kept: whether to release it
  // now. Not while the hold is held, nor where the hold's release took effect; later
  // (hold_released, or the destructor) while that release is in flight or about to be sent.
  bool after_the_hold(std::size_t i, HoldNow now) {
    if (now == HoldNow::held) return false;
    std::lock_guard lock(mu_);
    Node& n = nodes_[i];
    switch (n.hold_release) {
      case HoldRelease::took_effect: return false;
      case HoldRelease::no_effect: return true;
      case HoldRelease::in_flight:
      case HoldRelease::not_sent: break;
    }
    if (unheard_ || (n.hold_release == HoldRelease::not_sent && now == HoldNow::ended)) return true;
    n.owed = true;
    return false;
  }

  std::mutex mu_;
  std::vector<Node> nodes_;
  std::optional<std::uint64_t> chosen_;  // set by catch_up()
  bool released_ = false;
  bool unheard_ = false;  // hold_release_unheard()
  std::function<HoldNow()> hold_now_;  // set once the try is kept (kept())
  std::function<void(std::size_t)> release_on_;
  std::function<void(std::size_t, std::uint64_t)> write_back_on_;
};

// AcquireAnswers::kept's view of a Redlock hold: held, releasing (begin_release() comes before
// any release is sent), or ended (released, lost, or its record gone).
inline std::function<HoldNow()> hold_now_of(const std::shared_ptr<LeaseRecord>& rec) {
  return [held = std::weak_ptr<LeaseRecord>(rec)] {
    const auto r = held.lock();
    if (!r) return HoldNow::ended;
    switch (r->state()) {
      case LeaseRecord::State::held: return HoldNow::held;
      case LeaseRecord::State::releasing: return HoldNow::releasing;
      case LeaseRecord::State::released:
      case LeaseRecord::State::lost: break;
    }
    return HoldNow::ended;
  };
}

}  // namespace dlock::detail
