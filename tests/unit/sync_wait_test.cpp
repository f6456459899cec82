// SyncWait with a LoopDriver: a blocking call runs the event loop on its own thread while it
// waits (ClientOptions::callers_run_loop). These tests drive SyncWait with a fake loop, so the
// hand-over rules are checked without a server: the waiter asks the loop first, a value set on
// the loop's own thread needs no interrupt, a value set from elsewhere interrupts the loop (or
// the waiter would sleep in it until some unrelated event), and a loop that cannot be run leaves
// the waiter to the condition variable.
#include "util/sync_wait.hpp"

#include <gtest/gtest.h>

#include <time.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

const std::atomic<bool> kNotParked{false};

// CPU time the calling thread has used.
std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// A loop that "sleeps in the kernel" (a condition variable) until interrupted or until its
// deadline, like io_context::run_one_until, and whose handlers run on the driving thread.
class FakeLoop final : public LoopDriver {
 public:
  bool can_drive = true;
  std::function<void()> handler;  // run once on the driving thread, as a loop handler would be

  std::chrono::microseconds busy_poll() const noexcept override { return 0us; }
  bool on_loop_thread() const noexcept override { return driving_thread_ == std::this_thread::get_id(); }
  void count_waiter(int delta) noexcept override { waiters += delta; }
  std::atomic<int> waiters{0};
  void interrupt() override {
    std::lock_guard lock(mu_);
    ++interrupts_;
    cv_.notify_all();
  }
  bool drive_until(const std::atomic<bool>& ready, clock::time_point deadline) override {
    ++drives_;
    if (!can_drive) return false;
    driving_thread_ = std::this_thread::get_id();
    if (handler) std::exchange(handler, nullptr)();
    std::unique_lock lock(mu_);
    const int seen = interrupts_;
    // Bounded, so a missing interrupt fails the test instead of hanging it.
    cv_.wait_until(lock, std::min(deadline, clock::now() + 5s), [&] { return ready.load() || interrupts_ != seen; });
    driving_thread_ = std::thread::id{};
    return ready.load();
  }
  int interrupts() {
    std::lock_guard lock(mu_);
    return interrupts_;
  }
  int drives() const { return drives_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int interrupts_ = 0;
  std::atomic<int> drives_{0};
  std::atomic<std::thread::id> driving_thread_{};
};

TEST(SyncWaitLoop, ValueSetByTheLoopOnTheWaitersThreadNeedsNoInterrupt) {
  FakeLoop loop;
  SyncWait<int> w;
  loop.handler = [&] { EXPECT_TRUE(w.set(7)); };
  EXPECT_EQ(w.wait(loop), 7);
  EXPECT_EQ(loop.waiters.load(), 0);  // counted in, and out again
  EXPECT_EQ(loop.drives(), 1);
  EXPECT_EQ(loop.interrupts(), 0);
}

TEST(SyncWaitLoop, ValueSetFromAnotherThreadInterruptsTheLoop) {
  FakeLoop loop;
  SyncWait<int> w;
  std::jthread setter([&] {
    while (loop.drives() == 0) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);  // the waiter is asleep in the loop by now
    w.set(3);
  });
  const auto t0 = clock::now();
  EXPECT_EQ(w.wait(loop), 3);
  // Without the interrupt the fake loop would sleep its full 5 s.
  EXPECT_LT(clock::now() - t0, 2s);
  EXPECT_EQ(loop.interrupts(), 1);
}

TEST(SyncWaitLoop, AWaiterThatCannotRunTheLoopWaitsAsBefore) {
  FakeLoop loop;
  loop.can_drive = false;
  SyncWait<int> w;
  std::jthread setter([&] {
    std::this_thread::sleep_for(20ms);
    w.set(5);
  });
  EXPECT_EQ(w.wait(loop), 5);
  EXPECT_EQ(loop.drives(), 1);
  EXPECT_EQ(loop.interrupts(), 0);  // nobody runs the loop for this waiter: nothing to interrupt
}

TEST(SyncWaitLoop, AValueSetBeforeTheWaitSkipsTheLoop) {
  FakeLoop loop;
  SyncWait<int> w;
  w.set(9);
  EXPECT_FALSE(w.set(10));  // the first value stays
  EXPECT_EQ(w.wait(loop), 9);
  EXPECT_EQ(loop.drives(), 0);
}

TEST(SyncWaitLoop, WaitForEndsAtItsDeadlineWhileRunningTheLoop) {
  FakeLoop loop;
  SyncWait<int> w;
  const auto t0 = clock::now();
  EXPECT_FALSE(w.wait_for(100ms, loop).has_value());
  const auto took = clock::now() - t0;
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 2s);
  EXPECT_EQ(loop.drives(), 1);
  // A value set later is still delivered once.
  EXPECT_TRUE(w.set(1));
  EXPECT_EQ(w.wait(loop), 1);
}

// Every blocked caller polls for its reply (ClientOptions::busy_poll), not one at a time: with
// one poller, the other callers of a busy Client each paid a futex wake-up per call, and 8
// callers made 31k pairs/s where all polling made 52k (docs/BENCHMARKS.md).
TEST(SyncWaitPoll, EveryBlockedCallerPollsAtOnce) {
  constexpr int kCallers = 4;
  std::array<std::atomic<bool>, kCallers> ready{};
  std::array<std::atomic<int>, kCallers> got{};
  std::atomic<int> started{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      started.fetch_add(1);
      got[i] = sync_wait_detail::poll_until(ready[i], kNotParked, std::chrono::microseconds(5s)) ? 1 : 2;
    });
  }
  while (started.load() < kCallers) std::this_thread::yield();
  std::this_thread::sleep_for(20ms);  // every caller is polling now (or gave up at once)
  for (int i = 0; i < kCallers; ++i) {
    EXPECT_EQ(got[i].load(), 0) << "caller " << i << " stopped polling before its value came";
    ready[i].store(true);
  }
  for (auto& t : callers) t.join();
  for (int i = 0; i < kCallers; ++i) EXPECT_EQ(got[i].load(), 1) << "caller " << i;
}

TEST(SyncWaitPoll, NoBudgetNoPolling) {
  std::atomic<bool> ready{false};
  const auto t0 = clock::now();
  EXPECT_FALSE(sync_wait_detail::poll_until(ready, kNotParked, 0us));
  EXPECT_LT(clock::now() - t0, 1s);
  ready = true;
  EXPECT_TRUE(sync_wait_detail::poll_until(ready, kNotParked, 0us));  // already set: no poll needed
}

TEST(SyncWaitPoll, PollingEndsAtItsBudget) {
  std::atomic<bool> ready{false};
  const auto t0 = clock::now();
  EXPECT_FALSE(sync_wait_detail::poll_until(ready, kNotParked, std::chrono::microseconds(20ms)));
  EXPECT_GE(clock::now() - t0, 20ms);
}

// A parked wait stops polling at once: its operation waits for a release, which may take long,
// and the polling would only take the CPU from the threads that hand the lock over.
TEST(SyncWaitPoll, ParkingEndsPollingAtOnce) {
  std::atomic<bool> ready{false};
  std::atomic<bool> parked{false};
  std::atomic<int> got{0};
  std::thread caller([&] { got = sync_wait_detail::poll_until(ready, parked, std::chrono::microseconds(5s)) ? 1 : 2; });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(got.load(), 0) << "stopped polling before it was parked";
  const auto t0 = clock::now();
  parked = true;
  caller.join();
  EXPECT_EQ(got.load(), 2);
  EXPECT_LT(clock::now() - t0, 2s);  // not the 5 s budget
  parked = false;
  ready = true;
  EXPECT_TRUE(sync_wait_detail::poll_until(ready, parked, 0us));
}

// SyncWait::park(): the waiter, polling with a large budget, sleeps on its condition variable
// from then on (no CPU) and still receives the value.
TEST(SyncWaitPoll, AParkedWaiterSleepsUntilItsValueIsSet) {
  SyncWait<int> w;
  std::atomic<bool> started{false};
  std::chrono::nanoseconds cpu{};
  int value = 0;
  std::thread caller([&] {
    started = true;
    const auto c0 = thread_cpu_time();
    value = w.wait(std::chrono::microseconds(10s));
    cpu = thread_cpu_time() - c0;
  });
  while (!started) std::this_thread::yield();
  std::this_thread::sleep_for(20ms);
  w.park();
  std::this_thread::sleep_for(500ms);  // polling on, the caller would use most of this
  const auto t0 = clock::now();
  EXPECT_TRUE(w.set(7));
  caller.join();
  EXPECT_EQ(value, 7);
  EXPECT_LT(clock::now() - t0, 2s);
  EXPECT_LT(cpu, 250ms) << "the caller went on polling after park()";
}

}  // namespace
}  // namespace dlock::detail
