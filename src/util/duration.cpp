// duration.cpp — dlock::parse_duration and dlock::format_duration (see dlock/duration.hpp).
//
// Decisions beyond the header's wording:
//  - The upper bound ("~292 years") is the range of std::chrono::nanoseconds, i.e.
//    9'223'372'036'854 ms (2562047h47m16s854ms), so any parsed duration converts to the
//    nanosecond clocks (BootClock, steady_clock) without overflow.
//  - Leading zeros are accepted ("007s"); units are lower case only.
//  - format_duration() writes the canonical form: hours, minutes, seconds, milliseconds, each
//    only when non-zero, and "0s" for zero ("90000ms" -> "1m30s"). parse_duration() reads every
//    such string back for 0 <= d <= the bound above. A negative duration is written with a
//    leading '-' (for messages only; parse_duration() rejects signs).
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "dlock/duration.hpp"
#include "dlock/error.hpp"
#include "dlock/result.hpp"

namespace dlock {

namespace {

using std::chrono::milliseconds;

// nanoseconds::max() in whole milliseconds.
constexpr std::int64_t kMaxMillis = std::numeric_limits<std::int64_t>::max() / 1'000'000;

constexpr std::int64_t kMillisPerSecond = 1'000;
constexpr std::int64_t kMillisPerMinute = 60 * kMillisPerSecond;
constexpr std::int64_t kMillisPerHour = 60 * kMillisPerMinute;

std::string quoted(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out = "'";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 0xF];
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

Error duration_error(std::string_view text, std::string_view what) {
  std::string msg = "invalid duration " + quoted(text) + ": ";
  msg += what;
  return Error(errc::invalid_argument, std::move(msg));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

Result<milliseconds> parse_duration(std::string_view text) {
  if (text.empty()) return duration_error(text, "empty");
  constexpr std::string_view expected =
      "expected e.g. '250ms', '30s', '1m30s', '1h' or a number of seconds ('1.5')";

  std::int64_t total = 0;
  int last_rank = 4;  // units must appear in decreasing rank: h=3, m=2, s=1, ms=0
  std::size_t i = 0;
  while (i < text.size()) {
    // <non-negative integer>
    if (!is_digit(text[i])) {
      if (text[i] == '-' || text[i] == '+') return duration_error(text, "no sign allowed");
      if (i > 0 && is_alpha(text[i])) {  // "1sec", "1hm": letters left over after a unit
        return duration_error(text, "unknown unit (expected ms, s, m or h)");
      }
      return duration_error(text, expected);
    }
    std::int64_t value = 0;
    bool too_big = false;
    while (i < text.size() && is_digit(text[i])) {
      if (!too_big) {
        value = value * 10 + (text[i] - '0');
        if (value > kMaxMillis) too_big = true;  // no unit is smaller than 1 ms
      }
      ++i;
    }
    // [.<digits>]: a decimal fraction of the unit ("1.5s", "0.25m", "1.5" seconds), as flock(1)
    // and timeout(1) take; it must come to whole milliseconds.
    std::int64_t frac = 0;
    std::int64_t frac_den = 1;
    if (i < text.size() && text[i] == ',') return duration_error(text, "a decimal fraction is written with '.'");
    if (i < text.size() && text[i] == '.') {
      ++i;
      if (i == text.size() || !is_digit(text[i])) return duration_error(text, "a digit must follow the '.'");
      while (i < text.size() && is_digit(text[i])) {
        if (frac_den >= 1000000000) return duration_error(text, "finer than a millisecond");
        frac = frac * 10 + (text[i] - '0');
        frac_den *= 10;
        ++i;
      }
    }
    // The fraction in milliseconds of a unit of `scale` ms; -1 when it is not whole.
    auto frac_ms = [&](std::int64_t scale) -> std::int64_t {
      const std::int64_t num = frac * scale;  // frac < 1e9, scale <= 3.6e6: fits
      return num % frac_den == 0 ? num / frac_den : -1;
    };
    if (i == text.size() && last_rank == 4) {
      // A bare number: seconds.
      const std::int64_t extra = frac_ms(kMillisPerSecond);
      if (extra < 0) return duration_error(text, "finer than a millisecond");
      if (too_big || value > (kMaxMillis - extra) / kMillisPerSecond) {
        return duration_error(text, "too large (the maximum is about 292 years)");
      }
      return milliseconds{value * kMillisPerSecond + extra};
    }
    if (i == text.size()) return duration_error(text, "number without a unit (ms, s, m or h)");

    // <unit>
    int rank;
    std::int64_t scale;
    if (text[i] == 'h') {
      rank = 3;
      scale = kMillisPerHour;
      i += 1;
    } else if (text[i] == 'm' && i + 1 < text.size() && text[i + 1] == 's') {
      rank = 0;
      scale = 1;
      i += 2;
    } else if (text[i] == 'm') {
      rank = 2;
      scale = kMillisPerMinute;
      i += 1;
    } else if (text[i] == 's') {
      rank = 1;
      scale = kMillisPerSecond;
      i += 1;
    } else {
      return duration_error(text, "unknown unit (expected ms, s, m or h)");
    }
    if (rank >= last_rank) {
      return duration_error(text, "units must appear at most once, in the order h, m, s, ms");
    }
    last_rank = rank;
    const std::int64_t extra = frac_ms(scale);
    if (extra < 0) return duration_error(text, "finer than a millisecond");
    if (too_big || value > (kMaxMillis - total - extra) / scale) {
      return duration_error(text, "too large (the maximum is about 292 years)");
    }
    total += value * scale + extra;
  }
  return milliseconds{total};
}

std::string format_duration(milliseconds d) {
  std::int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  // Work on the magnitude as unsigned so that milliseconds::min() is representable.
  std::uint64_t rest;
  if (ms < 0) {
    out += '-';
    rest = 0 - static_cast<std::uint64_t>(ms);
  } else {
    rest = static_cast<std::uint64_t>(ms);
  }
  auto put = [&](std::uint64_t scale, const char* unit) {
    std::uint64_t n = rest / scale;
    rest %= scale;
    if (n != 0) {
      out += std::to_string(n);
      out += unit;
    }
  };
  put(static_cast<std::uint64_t>(kMillisPerHour), "h");
  put(static_cast<std::uint64_t>(kMillisPerMinute), "m");
  put(static_cast<std::uint64_t>(kMillisPerSecond), "s");
  put(1, "ms");
  return out;
}

}  // namespace dlock
