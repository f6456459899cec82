// Waiting in tests: poll for an event with a deadline instead of sleeping and hoping.
#pragma once

#include <chrono>
#include <cstdlib>
#include <stop_token>
#include <thread>
#include <type_traits>

namespace dlock::test {

using SteadyClock = std::chrono::steady_clock;

inline std::chrono::milliseconds ms_since(SteadyClock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t0);
}

// DLOCK_TEST_TIME_SCALE (default 1, set by scripts/sanitize): upper bounds of timed
// expectations are multiplied by it, because sanitizer builds run several times slower. Lower
// bounds never are, and no assertion is loosened by it.
inline double time_scale() {
  const char* s = std::getenv("DLOCK_TEST_TIME_SCALE");
  const double v = s != nullptr ? std::atof(s) : 1.0;
  return v >= 1.0 ? v : 1.0;
}
inline std::chrono::milliseconds scaled(std::chrono::milliseconds d) {
  return std::chrono::milliseconds(static_cast<long long>(static_cast<double>(d.count()) * time_scale()));
}

// Polls `pred` until it is true or `timeout` passes; true when it became true.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step = std::chrono::milliseconds(5)) {
  const auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
}

// At scope exit, stops a wait running on another thread (its stop_source) and, with a
// future, waits for it: a failed assertion returns early while the wait is still going.
template <class Future = void>
struct StopAtExit {
  std::stop_source& stop;
  Future* future = nullptr;
  ~StopAtExit() {
    stop.request_stop();
    if constexpr (!std::is_void_v<Future>) {
      if (future != nullptr && future->valid()) future->wait();
    }
  }
};

}  // namespace dlock::test
