// ThreadHolds: the holds a lock object took through the standard members (lock/try_lock...,
// lock_shared...), one per thread, as std::timed_mutex semantics require (the thread that
// locked unlocks). Shared by every lock kind's std adapter, so their users are not second-class:
// each thread can ask for its token, its loss state and the error of its last unlock.
//
// A hold carries a mode tag for kinds with more than one way to hold (SharedMutex: exclusive or
// shared); single-mode kinds leave it at 0.
#pragma once

#include <algorithm>
#include <mutex>
#include <string>
#include <system_error>
#include <optional>
#include <thread>
#include <vector>

#include "dlock/lease.hpp"
#include "dlock/options.hpp"

namespace dlock::detail {

class ThreadHolds {
 public:
  ~ThreadHolds() { release_all(); }

  // True when the calling thread holds a lease (of `mode`, when given) not known to be lost.
  bool holds(std::optional<int> mode = std::nullopt) const {
    std::lock_guard lock(mu_);
    const Hold* h = mine();
    return h != nullptr && (!mode || h->mode == *mode) && h->lease.held();
  }
  // Records the calling thread's new hold (a previous, ended one is dropped).
  void store(Lease lease, int mode = 0) {
    std::lock_guard lock(mu_);
    Hold* h = mine();
    if (h == nullptr) h = &holds_.emplace_back(Hold{std::this_thread::get_id(), mode, {}, {}, false, {}});
    h->mode = mode;
    h->token = lease.token();
    h->lost = false;
    h->last_error = {};
    h->lease = std::move(lease);
  }
  // Takes the calling thread's lease of `mode` out (nullopt when it has none), leaving its token
  // and state for the caller to store() back (SharedMutex::downgrade).
  std::optional<Lease> take_mine(int mode) {
    std::lock_guard lock(mu_);
    Hold* h = mine();
    if (h == nullptr || h->mode != mode || !h->lease) return std::nullopt;
    return std::move(h->lease);
  }
  // Releases the calling thread's hold (of `mode`, when given; blocking, never throws) and
  // records the outcome. False when there was no such hold (nothing was done).
  bool release_mine(std::optional<int> mode = std::nullopt) noexcept {
    Lease lease;
    {
      std::lock_guard lock(mu_);
      Hold* h = mine();
      if (h == nullptr || (mode && h->mode != *mode) || !h->lease) return false;
      lease = std::move(h->lease);
    }
    Result<void> r = lease.release();  // outside the lock: it blocks for a round trip
    std::lock_guard lock(mu_);
    if (Hold* h = mine()) {
      h->last_error = r.error();
      h->lost = lease.lost() || r.code() == errc::lock_lost;
    }
    return true;
  }
  // Records an error for the calling thread without touching its hold (a mismatched unlock).
  void note_error(Error e) {
    std::lock_guard lock(mu_);
    Hold* h = mine();
    if (h == nullptr) h = &holds_.emplace_back(Hold{std::this_thread::get_id(), 0, {}, {}, false, {}});
    h->last_error = std::move(e);
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
    int mode = 0;
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

// The standard adapter's lock() for the non-reentrant kinds: waiting for our own hold would only
// end when it is lost, so a second lock() by the holding thread throws instead. Other failures
// throw std::system_error, as the standard's lock() must.
template <class Acquire>
void std_lock(ThreadHolds& holds, int mode, const std::string& what, Acquire&& acquire) {
  if (holds.holds()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            what + " is already held by this thread");
  }
  Result<Lease> r = acquire(WaitOptions{});
  if (!r) throw_error(r.code(), r.error().what());
  holds.store(std::move(*r), mode);
}

// try_lock / try_lock_for: false when busy or timed out (or already held by this thread).
template <class Acquire>
bool std_timed_try(ThreadHolds& holds, int mode, milliseconds d, Acquire&& acquire) {
  if (holds.holds()) return false;
  WaitOptions wait;  // not WaitOptions{d, {}}: that would make the recheck interval zero
  wait.timeout = std::max(d, milliseconds(0));
  Result<Lease> r = acquire(wait);
  if (!r) {
    if (r.code() == errc::busy || r.code() == errc::timeout) return false;
    throw_error(r.code(), r.error().what());
  }
  holds.store(std::move(*r), mode);
  return true;
}

}  // namespace dlock::detail
