// SyncWait<T>: how a blocking call waits for its asynchronous form. Set once (later sets are
// ignored), so a cancellation and a late completion can race safely.
//
// Why wait() may run the event loop itself: a blocking call made on a caller thread would otherwise
// hand its command to the Client's event-loop thread and be handed the reply back, two thread
// hand-overs per call on top of the Redis round trip. With a LoopDriver (the ClientCore), wait()
// first asks to run the Client's event loop on the calling thread until the value is set — the
// caller then writes its command and sleeps in the kernel on the sockets itself, as a plain
// blocking client does — and falls back to waiting for the loop's thread when another thread
// runs the loop (ClientOptions::callers_run_loop).
//
// Why wait() may poll first: a blocking call's reply usually comes back within one Redis round
// trip, and putting the caller to sleep on a condition variable then costs a futex wake-up on
// top of it; on a virtual machine, waking a thread on an idle vCPU costs about as much as the
// round trip itself (docs/BENCHMARKS.md). So with a `spin` budget (ClientOptions::busy_poll) the
// caller first polls an atomic flag, yielding its CPU between polls so that the event loop (and,
// on a shared machine, the server) can run, and sleeps only when the reply is slower. Every
// blocked caller polls, not one at a time: measured with 8 and 64 callers on one Client, a
// single poller left the others to a futex wake-up each, and that hand-over, not the CPU,
// was the limit (8 callers: 31k pairs/s with one poller, 52k with all in a quick A/B; 0.70× ->
// 0.99× the 8-connection floor in full runs; docs/BENCHMARKS.md). The cost stays bounded: at
// most `spin` of polling per blocking call, yielding throughout.
//
// Why a wait can be parked: polling only pays while a reply is due. An acquisition whose try
// found the lock busy (or that queues behind another waiter of its process) waits for a
// release, which may take seconds; its caller polling on meanwhile only takes the CPU from the
// threads that must run for the lock to change hands: the holder's process releasing it and
// the next holder's process taking it. Measured on the 2-vCPU bench machine, 8 workers in 2
// processes on one lock: with no caller polling at all FairLock's handoff p50 was 85-90 us
// against 100-145 us with it; parking the waiting callers raised every kind's utilisation by
// 0.4-1.5 points (Mutex 90.3 -> 91.0%, FairLock 89.4 -> 90.5%; docs/BENCHMARKS.md). So the
// operation calls park() when it starts waiting, and the caller sleeps at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace dlock::detail {

// Something that can run an event loop on the calling thread (ClientCore).
class LoopDriver {
 public:
  // How long a waiter polls before it sleeps (ClientOptions::busy_poll).
  virtual std::chrono::microseconds busy_poll() const noexcept = 0;
  // Runs the event loop on the calling thread until `ready` is true, `deadline` has passed or
  // the loop stopped. False, at once, when this thread may not run it now (another thread does);
  // the caller then waits as usual.
  virtual bool drive_until(const std::atomic<bool>& ready, std::chrono::steady_clock::time_point deadline) = 0;
  // True on a thread that runs this loop now.
  virtual bool on_loop_thread() const noexcept = 0;
  // A blocking caller starts (+1) or ends (-1) waiting on this loop.
  virtual void count_waiter(int delta) noexcept = 0;
  // Wakes a thread that runs the loop and sleeps in the kernel, so it sees `ready` (a value set
  // from outside the loop: a cancellation).
  virtual void interrupt() = 0;

 protected:
  ~LoopDriver() = default;
};

namespace sync_wait_detail {
// Polls `ready` for up to `budget`, yielding between polls, and not once `parked` is true; true
// when `ready` became true.
inline bool poll_until(const std::atomic<bool>& ready, const std::atomic<bool>& parked,
                       std::chrono::microseconds budget) {
  if (ready.load(std::memory_order_acquire)) return true;
  if (budget.count() <= 0) return false;
  const auto end = std::chrono::steady_clock::now() + budget;
  bool got = false;
  do {
    for (int i = 0; i < 16 && !got; ++i) {
      std::this_thread::yield();
      got = ready.load(std::memory_order_acquire);
    }
  } while (!got && !parked.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < end);
  return got;
}
}  // namespace sync_wait_detail

template <class T>
class SyncWait {
 public:
  // The awaited operation has started a wait of unknown length (see above): the caller stops
  // polling and sleeps until set. Any thread. Never undone: waking the caller to poll again
  // while a woken wait's next try is in flight made Mutex handoffs slower, not faster (measured).
  void park() noexcept { parked_.store(true, std::memory_order_release); }
  // Returns false when a value was already set.
  bool set(T value) {
    {
      std::lock_guard lock(mu_);
      if (value_) return false;
      value_.emplace(std::move(value));
      ready_.store(true, std::memory_order_release);
      // Set from outside the loop that the waiter runs (else the waiter's own loop set it): the
      // waiter may be asleep in that loop's kernel wait. Under mu_, so the waiter cannot have
      // returned (and its Client gone) before the interrupt is posted.
      if (driver_ != nullptr && !driver_->on_loop_thread()) driver_->interrupt();
    }
    cv_.notify_all();
    return true;
  }
  // Blocks until set, running `loop` on this thread meanwhile when it may (see above).
  T wait(LoopDriver& loop) {
    WaiterCount counted(loop);
    drive(loop, std::chrono::steady_clock::time_point::max());
    return wait(loop.busy_poll());
  }
  template <class Rep, class Period>
  std::optional<T> wait_for(std::chrono::duration<Rep, Period> timeout, LoopDriver& loop) {
    WaiterCount counted(loop);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    drive(loop, deadline);
    const auto left = deadline - std::chrono::steady_clock::now();
    return wait_for(std::max<std::chrono::steady_clock::duration>(left, std::chrono::steady_clock::duration::zero()),
                    loop.busy_poll());
  }
  // Blocks until set. Polls for up to `spin` first (see above).
  T wait(std::chrono::microseconds spin = {}) {
    sync_wait_detail::poll_until(ready_, parked_, spin);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return value_.has_value(); });
    return std::move(*value_);
  }
  // The value, or nullopt when `timeout` passed first.
  template <class Rep, class Period>
  std::optional<T> wait_for(std::chrono::duration<Rep, Period> timeout, std::chrono::microseconds spin = {}) {
    sync_wait_detail::poll_until(ready_, parked_, std::min<std::chrono::microseconds>(
                                             spin, std::chrono::duration_cast<std::chrono::microseconds>(timeout)));
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return value_.has_value(); })) return std::nullopt;
    return std::move(*value_);
  }

 private:
  struct WaiterCount {
    LoopDriver& loop;
    explicit WaiterCount(LoopDriver& l) : loop(l) { loop.count_waiter(1); }
    ~WaiterCount() { loop.count_waiter(-1); }
    WaiterCount(const WaiterCount&) = delete;
    WaiterCount& operator=(const WaiterCount&) = delete;
  };

  void drive(LoopDriver& loop, std::chrono::steady_clock::time_point deadline) {
    {
      std::lock_guard lock(mu_);
      if (value_) return;
      driver_ = &loop;
    }
    loop.drive_until(ready_, deadline);
    std::lock_guard lock(mu_);
    driver_ = nullptr;
  }

  std::mutex mu_;
  LoopDriver* driver_ = nullptr;  // the loop this waiter runs, while it does (under mu_)
  std::condition_variable cv_;
  std::optional<T> value_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> parked_{false};
};

}  // namespace dlock::detail
