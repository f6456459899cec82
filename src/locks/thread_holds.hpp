// ThreadHolds: the holds a lock object took through the standard members (lock/try_lock...),
// one per thread, as std::timed_mutex semantics require (the thread that locked unlocks).
// Shared by every lock kind's std adapter, so their users are not second-class: each thread can
// ask for its token, its loss state and the error of its last unlock.
#pragma once

#include <mutex>
#include <thread>
#include <vector>

#include "dlock/lease.hpp"

namespace dlock::detail {

class ThreadHolds {
 public:
  ~ThreadHolds() { release_all(); }

  // True when the calling thread holds a lease that is not known to be lost.
  bool holds() const {
    std::lock_guard lock(mu_);
    const Hold* h = mine();
    return h != nullptr && h->lease.held();
  }
  // Records the calling thread's new hold.
  void store(Lease lease) {
    std::lock_guard lock(mu_);
    Hold* h = mine();
    if (h == nullptr) h = &holds_.emplace_back(Hold{std::this_thread::get_id(), {}, {}, false, {}});
    h->token = lease.token();
    h->lost = false;
    h->last_error = {};
    h->lease = std::move(lease);
  }
  // Releases the calling thread's hold (blocking, never throws) and records the outcome.
  void release_mine() noexcept {
    Lease lease;
    {
      std::lock_guard lock(mu_);
      Hold* h = mine();
      if (h == nullptr) return;
      lease = std::move(h->lease);
    }
    Result<void> r = lease.release();  // outside the lock: it blocks for a round trip
    std::lock_guard lock(mu_);
    if (Hold* h = mine()) {
      h->last_error = r.error();
      h->lost = lease.lost() || r.code() == errc::lock_lost;
    }
  }
  void release_all() noexcept {
    std::vector<Hold> all;
    {
      std::lock_guard lock(mu_);
      all.swap(holds_);
    }
    for (auto& h : all) (void)h.lease.release();
  }

  FencingToken token() const {
    std::lock_guard lock(mu_);
    const Hold* h = mine();
    return h != nullptr ? h->token : FencingToken{};
  }
  bool lost() const {
    std::lock_guard lock(mu_);
    const Hold* h = mine();
    return h != nullptr && (h->lost || h->lease.lost());
  }
  milliseconds remaining() const {
    std::lock_guard lock(mu_);
    const Hold* h = mine();
    return h != nullptr ? h->lease.remaining() : milliseconds(0);
  }
  Error last_error() const {
    std::lock_guard lock(mu_);
    const Hold* h = mine();
    return h != nullptr ? h->last_error : Error{};
  }

 private:
  struct Hold {
    std::thread::id thread;
    Lease lease;
    FencingToken token;
    bool lost = false;
    Error last_error;
  };
  Hold* mine() const {
    const auto me = std::this_thread::get_id();
    for (auto& h : holds_) {
      if (h.thread == me) return &h;
    }
    return nullptr;
  }

  mutable std::mutex mu_;
  mutable std::vector<Hold> holds_;
};

}  // namespace dlock::detail
