// SyncWait<T>: how a blocking call waits for its asynchronous form. Set once (later sets are
// ignored), so a cancellation and a late completion can race safely.
//
// Why wait() may poll first: a blocking call's reply usually comes back within one Redis round
// trip, and putting the caller to sleep on a condition variable then costs a futex wake-up on
// top of it; on a virtual machine, waking a thread on an idle vCPU costs about as much as the
// round trip itself (docs/BENCHMARKS.md). So with a `spin` budget (ClientOptions::busy_poll) the
// caller first polls an atomic flag, yielding its CPU between polls so that the event loop (and,
// on a shared machine, the server) can run, and sleeps only when the reply is slower. Only one
// caller in the process polls at a time: with many callers the CPU is better left to the event
// loop, and their calls are pipelined anyway.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace dlock::detail {

namespace sync_wait_detail {
inline std::atomic<int> pollers{0};

// Polls `ready` for up to `budget`; true when it became true. At most one thread polls at a
// time; the others return false at once (and sleep).
inline bool poll_until(const std::atomic<bool>& ready, std::chrono::microseconds budget) {
  if (ready.load(std::memory_order_acquire)) return true;
  if (budget.count() <= 0) return false;
  int idle = 0;
  if (!pollers.compare_exchange_strong(idle, 1, std::memory_order_acquire)) return false;
  const auto end = std::chrono::steady_clock::now() + budget;
  bool got = false;
  do {
    for (int i = 0; i < 16 && !got; ++i) {
      std::this_thread::yield();
      got = ready.load(std::memory_order_acquire);
    }
  } while (!got && std::chrono::steady_clock::now() < end);
  pollers.store(0, std::memory_order_release);
  return got;
}
}  // namespace sync_wait_detail

template <class T>
class SyncWait {
 public:
  // Returns false when a value was already set.
  bool set(T value) {
    {
      std::lock_guard lock(mu_);
      if (value_) return false;
      value_.emplace(std::move(value));
      ready_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    return true;
  }
  // Blocks until set. Polls for up to `spin` first (see above).
  T wait(std::chrono::microseconds spin = {}) {
    sync_wait_detail::poll_until(ready_, spin);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return value_.has_value(); });
    return std::move(*value_);
  }
  // The value, or nullopt when `timeout` passed first.
  template <class Rep, class Period>
  std::optional<T> wait_for(std::chrono::duration<Rep, Period> timeout, std::chrono::microseconds spin = {}) {
    sync_wait_detail::poll_until(ready_, std::min<std::chrono::microseconds>(
                                             spin, std::chrono::duration_cast<std::chrono::microseconds>(timeout)));
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return value_.has_value(); })) return std::nullopt;
    return std::move(*value_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> value_;
  std::atomic<bool> ready_{false};
};

}  // namespace dlock::detail
