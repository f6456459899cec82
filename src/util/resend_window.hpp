// ResendWindow: when an idempotent command whose outcome is unknown is sent again
// (locks/idempotent_call.hpp). Pure logic; the clock is passed in.
//
// The first unknown outcome opens a window of reconnect.max + connect_timeout: long enough for
// the connection's next reconnect attempt, whatever its backoff stood at. The pauses between
// tries start at 5 ms (a blip heals in milliseconds) and double up to 100 ms (a longer outage
// costs at most ten local fast-failing tries a second); the last one ends with the window.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "dlock/clock.hpp"
#include "dlock/options.hpp"

namespace dlock::detail {

class ResendWindow {
 public:
  explicit ResendWindow(const ClientOptions& o) : span_(o.reconnect.max + o.connect_timeout) {}

  // The pause before the next try, or nothing once the window has closed. The first call
  // opens it at `now`.
  std::optional<BootClock::duration> next_pause(BootClock::time_point now = BootClock::now()) {
    if (!open_) {
      open_ = true;
      end_ = now + span_;
    }
    if (now >= end_) return std::nullopt;
    const BootClock::duration p = std::min<BootClock::duration>(pause_, end_ - now);
    pause_ = std::min(2 * pause_, std::chrono::milliseconds(100));
    return p;
  }

 private:
  std::chrono::milliseconds span_;  // each option is at most max_duration: no overflow
  bool open_ = false;
  BootClock::time_point end_{};
  std::chrono::milliseconds pause_{5};
};

}  // namespace dlock::detail
