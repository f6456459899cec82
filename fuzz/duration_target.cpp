// fuzz_duration — dlock::parse_duration and dlock::format_duration (src/util/duration.cpp).
//
// Properties checked, beyond "does not crash":
//  1. parse_duration agrees with an independent reading of the documented grammar (below,
//     with 128-bit arithmetic so overflow cannot hide): same accept/reject, same value.
//  2. Every accepted value is within [0, nanoseconds::max() in ms] and round-trips:
//     parse(format(v)) == v, and format() of that is the same text (one canonical form).
//  3. Errors are invalid_argument, start with "invalid duration '", hold no raw control bytes.
//  4. format_duration() of any 64-bit count (the first 8 input bytes), negatives and
//     milliseconds::min() included, never crashes; a negative one starts with '-' and is
//     rejected by parse_duration, a non-negative one in range round-trips.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "check.hpp"
#include "dlock/duration.hpp"
#include "dlock/error.hpp"

namespace {

using std::chrono::milliseconds;

constexpr std::int64_t kMaxMillis = std::numeric_limits<std::int64_t>::max() / 1'000'000;

std::string describe(std::string_view text) { return "duration: '" + std::string(text) + "'"; }

// The grammar of dlock/duration.hpp, read independently: a bare run of digits is seconds;
// otherwise <digits><unit> groups with units h, m, s, ms, each at most once, in that order.
std::optional<std::int64_t> reference_parse(std::string_view text) {
  using Big = unsigned __int128;
  if (text.empty()) return std::nullopt;
  Big total = 0;
  int last_rank = 4;
  bool saw_unit = false;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    Big value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      // Saturate far above the bound: 20+ digit numbers are all "too large" anyway.
      if (value < (Big{1} << 100)) value = value * 10 + static_cast<unsigned>(text[i] - '0');
      ++i;
    }
    if (i == start) return std::nullopt;
    if (i == text.size()) {
      if (saw_unit) return std::nullopt;  // "1m30": a number without a unit at the end
      total = value * 1000;
      break;
    }
    std::string_view rest = text.substr(i);
    int rank;
    Big scale;
    if (rest.rfind("ms", 0) == 0) {
      rank = 0, scale = 1, i += 2;
    } else if (rest[0] == 'h') {
      rank = 3, scale = 3'600'000, i += 1;
    } else if (rest[0] == 'm') {
      rank = 2, scale = 60'000, i += 1;
    } else if (rest[0] == 's') {
      rank = 1, scale = 1'000, i += 1;
    } else {
      return std::nullopt;
    }
    if (rank >= last_rank) return std::nullopt;
    last_rank = rank;
    saw_unit = true;
    total += value * scale;
  }
  if (total > static_cast<Big>(kMaxMillis)) return std::nullopt;
  return static_cast<std::int64_t>(total);
}

bool has_control_byte(std::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) return true;
  }
  return false;
}

void check_round_trip(std::int64_t ms, const std::string& context) {
  const std::string text = dlock::format_duration(milliseconds{ms});
  auto back = dlock::parse_duration(text);
  FUZZ_CHECK(back.ok(), context + " format: " + text + " -> " + (back.ok() ? "" : back.error().message));
  FUZZ_CHECK(back->count() == ms, context + " format: " + text);
  FUZZ_CHECK(dlock::format_duration(*back) == text, context + " format: " + text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = dlock::parse_duration(text);
  auto expected = reference_parse(text);
  FUZZ_CHECK(parsed.ok() == expected.has_value(),
             describe(text) +
                 (parsed.ok() ? " accepted, the grammar rejects it" : " rejected: " + parsed.error().message));
  if (parsed.ok()) {
    const std::int64_t ms = parsed->count();
    FUZZ_CHECK(ms == *expected,
               describe(text) + " = " + std::to_string(ms) + " ms, expected " + std::to_string(*expected));
    FUZZ_CHECK(ms >= 0 && ms <= kMaxMillis, describe(text));
    check_round_trip(ms, describe(text));
  } else {
    const dlock::Error e = parsed.error();
    FUZZ_CHECK(e.code == dlock::errc::invalid_argument, describe(text));
    FUZZ_CHECK(e.message.rfind("invalid duration '", 0) == 0, describe(text) + " message: " + e.message);
    FUZZ_CHECK(!has_control_byte(e.message), describe(text) + " message: " + e.message);
  }

  // format_duration over the whole int64 range.
  if (size >= sizeof(std::int64_t)) {
    std::int64_t raw;
    std::memcpy(&raw, data, sizeof raw);
    const std::string context = "count " + std::to_string(raw);
    const std::string formatted = dlock::format_duration(milliseconds{raw});
    FUZZ_CHECK(!formatted.empty(), context);
    if (raw < 0) {
      FUZZ_CHECK(formatted[0] == '-', context + " format: " + formatted);
      FUZZ_CHECK(!dlock::parse_duration(formatted).ok(), context + " format: " + formatted);
    } else if (raw <= kMaxMillis) {
      check_round_trip(raw, context);
    } else {
      FUZZ_CHECK(!dlock::parse_duration(formatted).ok(), context + " format: " + formatted);
    }
  }
  return 0;
}
