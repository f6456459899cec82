// bench/rate_window.hpp — operations per second of N looping threads over one timed window.
//
// Threads loop until stop() and call done(i) after each operation. measure() lets them warm up,
// then counts the operations completed between two snapshots taken by the caller's clock; the
// warm-up and the tail (operations in flight when the window closes) are not counted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "clock.hpp"

namespace bench {

class RateWindow {
 public:
  explicit RateWindow(int threads) : counters_(static_cast<std::size_t>(threads)) {}

  bool stopped() const noexcept { return stop_.load(std::memory_order_relaxed); }
  bool measuring() const noexcept { return measuring_.load(std::memory_order_relaxed); }
  void done(int thread) noexcept { counters_[static_cast<std::size_t>(thread)].n.fetch_add(1, std::memory_order_relaxed); }
  void error(int) noexcept { errors_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t errors() const noexcept { return errors_.load(); }

  struct Result {
    double per_second = 0;
    std::uint64_t operations = 0;
    double seconds = 0;
  };

  // Blocks for warmup + duration seconds, then sets stop. `at_start`/`at_end` run right at the
  // window's edges (for INFO commandstats snapshots).
  template <class F1 = void (*)(), class F2 = void (*)()>
  Result measure(double warmup, double duration, F1 at_start = [] {}, F2 at_end = [] {}) {
    sleep_s(warmup);
    at_start();
    const std::uint64_t c0 = total();
    const std::int64_t t0 = now_ns();
    measuring_.store(true);
    sleep_s(duration);
    const std::uint64_t c1 = total();
    const std::int64_t t1 = now_ns();
    measuring_.store(false);
    at_end();
    stop_.store(true);
    Result r;
    r.operations = c1 - c0;
    r.seconds = seconds_between(t0, t1);
    r.per_second = static_cast<double>(r.operations) / r.seconds;
    return r;
  }

 private:
  static void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }
  std::uint64_t total() const noexcept {
    std::uint64_t n = 0;
    for (const auto& c : counters_) n += c.n.load(std::memory_order_relaxed);
    return n;
  }

  struct alignas(64) Counter {
    std::atomic<std::uint64_t> n{0};
  };
  std::vector<Counter> counters_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> measuring_{false};
  std::atomic<std::uint64_t> errors_{0};
};

}  // namespace bench
