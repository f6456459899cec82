// Waiting in tests: poll for an event with a deadline instead of sleeping and hoping.
#pragma once

#include <chrono>
#include <thread>

namespace dlock::test {

using SteadyClock = std::chrono::steady_clock;

inline std::chrono::milliseconds ms_since(SteadyClock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t0);
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

}  // namespace dlock::test
