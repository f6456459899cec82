// How long a process that has just released a lock, while waiters of other processes were woken
// for it, holds its own next try on that lock back: two of its own round trips, so that a
// waiter elsewhere (notified as the release ran, then one try of its own) can take it first;
// at least 100 us, so a very fast round trip still leaves room on a loaded machine, and at most
// 2 ms, the price of a handoff within this process when the others were too slow. Used by the
// WaitQueue kinds (ClientCore::note_release) and by Redlock (redlock.cpp).
#pragma once

#include <algorithm>
#include <chrono>

namespace dlock::detail {

template <class Duration>
Duration hold_back_after_release(Duration round_trip) {
  return std::clamp<Duration>(2 * round_trip, std::chrono::microseconds(100), std::chrono::milliseconds(2));
}

}  // namespace dlock::detail
