// util/backoff.hpp — capped exponential backoff with full jitter, for reconnects.
//
// Delay number n (n = attempts() before the call, starting at 0) is
//
//     cap   = min(max, initial * multiplier^n)
//     delay = max(floor, floor_to_ms(u * cap))     u from uniform01(), in [0, 1)
//     floor = min(initial / 2, max)                 (so a down server is not hammered)
//
// Pure logic: the random source is injected, so tests can pin u. Not thread-safe; one Backoff
// per connection, used from the event-loop thread.
//
// Policies outside the sensible range are normalised rather than rejected: negative initial or
// max count as 0, max below initial caps everything at max, a multiplier below 1 or NaN counts
// as 1 (constant backoff), and a uniform01() result outside [0, 1] (or NaN) is clamped to it.
// The attempt counter saturates instead of wrapping, and the cap is computed in double so that
// multiplier^n overflowing to infinity just means "max".
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "dlock/options.hpp"
#include "util/jitter_rng.hpp"

namespace dlock::detail {

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy) noexcept
      : initial_(std::max<std::int64_t>(policy.initial.count(), 0)),
        max_(std::max<std::int64_t>(policy.max.count(), 0)),
        multiplier_(policy.multiplier >= 1.0 ? policy.multiplier : 1.0) {}  // NaN fails >= too

  // Next delay, then attempts() + 1. See the formula above.
  std::chrono::milliseconds next(const std::function<double()>& uniform01) {
    const std::int64_t floor_ms = std::min(initial_ / 2, max_);
    const double u = clamp01(uniform01());
    const double cap = cap_ms(attempt_);
    if (attempt_ != std::numeric_limits<unsigned>::max()) ++attempt_;
    const double jittered = std::floor(u * cap);
    std::int64_t delay;
    // cap <= max_, but double(max_) may round up past INT64_MAX: compare before converting.
    if (jittered >= static_cast<double>(max_)) {
      delay = max_;
    } else {
      delay = static_cast<std::int64_t>(jittered);
    }
    return std::chrono::milliseconds{std::max(delay, floor_ms)};
  }

  // Next delay with this thread's jitter generator (util/jitter_rng.hpp).
  std::chrono::milliseconds next() { return next(&thread_uniform01); }

  // After a success: the next delay is the first one again.
  void reset() noexcept { attempt_ = 0; }

  // Delays handed out since construction or the last reset() (saturating).
  unsigned attempts() const noexcept { return attempt_; }

 private:
  static double clamp01(double u) noexcept {
    if (!(u > 0.0)) return 0.0;  // also NaN
    return u > 1.0 ? 1.0 : u;
  }

  // min(max, initial * multiplier^n) in milliseconds, as a double.
  double cap_ms(unsigned n) const noexcept {
    const double max_d = static_cast<double>(max_);
    if (initial_ == 0) return 0.0;  // avoid 0 * inf
    const double grown = static_cast<double>(initial_) * std::pow(multiplier_, static_cast<double>(n));
    return std::isnan(grown) ? max_d : std::min(grown, max_d);
  }

  static double thread_uniform01() {
    auto& rng = jitter_rng();
    // The top 53 bits as a fraction: exactly uniform on [0, 1), never 1.0 (unlike some
    // std::uniform_real_distribution implementations).
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
  }

  std::int64_t initial_;  // ms, >= 0
  std::int64_t max_;      // ms, >= 0
  double multiplier_;     // >= 1 (or +inf)
  unsigned attempt_ = 0;
};

}  // namespace dlock::detail
