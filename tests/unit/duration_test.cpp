// Unit tests for dlock::parse_duration and dlock::format_duration (src/util/duration.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "dlock/duration.hpp"
#include "dlock/error.hpp"

namespace {

using std::chrono::milliseconds;

// nanoseconds::max() in whole milliseconds: the documented "~292 years" bound.
constexpr std::int64_t kMaxMs = 9'223'372'036'854;

std::int64_t parse_ms(std::string_view text) {
  auto r = dlock::parse_duration(text);
  EXPECT_TRUE(r.ok()) << "'" << text << "': " << r.error().what();
  return r.ok() ? r.value().count() : -1;
}

std::string parse_err(std::string_view text) {
  auto r = dlock::parse_duration(text);
  EXPECT_FALSE(r.ok()) << "should be rejected: '" << text << "'";
  if (r.ok()) return {};
  EXPECT_EQ(r.code(), dlock::errc::invalid_argument) << text;
  return r.error().message;
}

// ---- parse_duration: accepted ----------------------------------------------------------------

TEST(ParseDuration, SingleUnits) {
  EXPECT_EQ(parse_ms("250ms"), 250);
  EXPECT_EQ(parse_ms("30s"), 30'000);
  EXPECT_EQ(parse_ms("5m"), 300'000);
  EXPECT_EQ(parse_ms("2h"), 7'200'000);
  EXPECT_EQ(parse_ms("1ms"), 1);
}

TEST(ParseDuration, Combinations) {
  EXPECT_EQ(parse_ms("1h30m"), 5'400'000);
  EXPECT_EQ(parse_ms("1m30s"), 90'000);
  EXPECT_EQ(parse_ms("2s500ms"), 2'500);
  EXPECT_EQ(parse_ms("1h2m3s4ms"), 3'723'004);
  EXPECT_EQ(parse_ms("1h4ms"), 3'600'004);
  EXPECT_EQ(parse_ms("3m7ms"), 180'007);
  EXPECT_EQ(parse_ms("1h1s"), 3'601'000);
}

TEST(ParseDuration, BareIntegerIsSeconds) {
  EXPECT_EQ(parse_ms("30"), 30'000);
  EXPECT_EQ(parse_ms("1"), 1'000);
  EXPECT_EQ(parse_ms("0"), 0);
  EXPECT_EQ(parse_ms("00"), 0);
}

TEST(ParseDuration, Zero) {
  EXPECT_EQ(parse_ms("0s"), 0);
  EXPECT_EQ(parse_ms("0ms"), 0);
  EXPECT_EQ(parse_ms("0h0m0s0ms"), 0);
}

TEST(ParseDuration, ComponentsNeedNotBeNormalised) {
  EXPECT_EQ(parse_ms("90s"), 90'000);
  EXPECT_EQ(parse_ms("1500ms"), 1'500);
  EXPECT_EQ(parse_ms("1m90s"), 150'000);
  EXPECT_EQ(parse_ms("007s"), 7'000);
}

TEST(ParseDuration, UpToTheNanosecondRange) {
  EXPECT_EQ(parse_ms("9223372036854ms"), kMaxMs);
  EXPECT_EQ(parse_ms("2562047h47m16s854ms"), kMaxMs);
  EXPECT_EQ(parse_ms("9223372036s"), 9'223'372'036'000);
  EXPECT_EQ(parse_ms("9223372036"), 9'223'372'036'000);
  EXPECT_EQ(parse_ms("2562047h"), 2'562'047LL * 3'600'000);
  // The bound is exactly what nanoseconds can hold.
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(std::chrono::nanoseconds::max()).count(), kMaxMs);
}

// ---- parse_duration: rejected ----------------------------------------------------------------

TEST(ParseDuration, RejectsEmpty) {
  EXPECT_EQ(parse_err(""), "invalid duration '': empty");
}

TEST(ParseDuration, RejectsSigns) {
  EXPECT_EQ(parse_err("-1s"), "invalid duration '-1s': no sign allowed");
  EXPECT_EQ(parse_err("+1s"), "invalid duration '+1s': no sign allowed");
  EXPECT_EQ(parse_err("-5"), "invalid duration '-5': no sign allowed");
  EXPECT_EQ(parse_err("1m-5s"), "invalid duration '1m-5s': no sign allowed");
}

TEST(ParseDuration, RejectsSpaces) {
  const std::string expected =
      "expected e.g. '250ms', '30s', '1m30s', '1h' or a number of seconds ('1.5')";
  EXPECT_EQ(parse_err(" 1s"), "invalid duration ' 1s': " + expected);
  EXPECT_EQ(parse_err("1s "), "invalid duration '1s ': " + expected);
  EXPECT_EQ(parse_err("1 s"), "invalid duration '1 s': unknown unit (expected ms, s, m or h)");
  EXPECT_EQ(parse_err("1m 30s"), "invalid duration '1m 30s': " + expected);
  EXPECT_EQ(parse_err("1s\n"), "invalid duration '1s\\x0A': " + expected);
}

// As flock -w 1.5 and timeout 1.5 take them: decimal fractions of any unit, to the millisecond.
TEST(ParseDuration, AcceptsDecimalFractionsToTheMillisecond) {
  EXPECT_EQ(parse_ms("1.5s"), 1500);
  EXPECT_EQ(parse_ms("1.5"), 1500);
  EXPECT_EQ(parse_ms("0.5"), 500);
  EXPECT_EQ(parse_ms("0.001"), 1);
  EXPECT_EQ(parse_ms("0.25m"), 15000);
  EXPECT_EQ(parse_ms("1.5h"), 5400000);
  EXPECT_EQ(parse_ms("1.5m30s"), 120000);
  EXPECT_EQ(parse_ms("2.000ms"), 2);
  EXPECT_EQ(parse_ms("0.5s250ms"), 750);
}

TEST(ParseDuration, RejectsFractionsFinerThanAMillisecondOrMalformed) {
  EXPECT_EQ(parse_err("1.5ms"), "invalid duration '1.5ms': finer than a millisecond");
  EXPECT_EQ(parse_err("0.0001"), "invalid duration '0.0001': finer than a millisecond");
  EXPECT_EQ(parse_err("1.2345s"), "invalid duration '1.2345s': finer than a millisecond");
  EXPECT_EQ(parse_err("0.1234567891s"), "invalid duration '0.1234567891s': finer than a millisecond");
  EXPECT_EQ(parse_err("1,5s"), "invalid duration '1,5s': a decimal fraction is written with '.'");
  EXPECT_EQ(parse_err("1.s"), "invalid duration '1.s': a digit must follow the '.'");
  EXPECT_EQ(parse_err("1."), "invalid duration '1.': a digit must follow the '.'");
  EXPECT_EQ(parse_err(".5s"),
            "invalid duration '.5s': expected e.g. '250ms', '30s', '1m30s', '1h' or a number of seconds ('1.5')");
  EXPECT_EQ(parse_err("1.5.5s"), "invalid duration '1.5.5s': unknown unit (expected ms, s, m or h)");
}

TEST(ParseDuration, RejectsUnknownOrMissingUnits) {
  EXPECT_EQ(parse_err("1d"), "invalid duration '1d': unknown unit (expected ms, s, m or h)");
  EXPECT_EQ(parse_err("1S"), "invalid duration '1S': unknown unit (expected ms, s, m or h)");
  EXPECT_EQ(parse_err("1us"), "invalid duration '1us': unknown unit (expected ms, s, m or h)");
  EXPECT_EQ(parse_err("1sec"), "invalid duration '1sec': unknown unit (expected ms, s, m or h)");
  EXPECT_EQ(parse_err("1m30"), "invalid duration '1m30': number without a unit (ms, s, m or h)");
  EXPECT_EQ(parse_err("s"),
            "invalid duration 's': expected e.g. '250ms', '30s', '1m30s', '1h' or a number of seconds ('1.5')");
  EXPECT_EQ(parse_err("ms"),
            "invalid duration 'ms': expected e.g. '250ms', '30s', '1m30s', '1h' or a number of seconds ('1.5')");
  EXPECT_EQ(parse_err("1hm"), "invalid duration '1hm': unknown unit (expected ms, s, m or h)");
  EXPECT_EQ(parse_err("1msx"), "invalid duration '1msx': unknown unit (expected ms, s, m or h)");
  EXPECT_EQ(parse_err("1s!"),
            "invalid duration '1s!': expected e.g. '250ms', '30s', '1m30s', '1h' or a number of seconds ('1.5')");
}

TEST(ParseDuration, RejectsWrongOrderAndRepeats) {
  const std::string what = "units must appear at most once, in the order h, m, s, ms";
  EXPECT_EQ(parse_err("30s1m"), "invalid duration '30s1m': " + what);
  EXPECT_EQ(parse_err("1s1s"), "invalid duration '1s1s': " + what);
  EXPECT_EQ(parse_err("1ms1s"), "invalid duration '1ms1s': " + what);
  EXPECT_EQ(parse_err("1m1h"), "invalid duration '1m1h': " + what);
  EXPECT_EQ(parse_err("1h1h"), "invalid duration '1h1h': " + what);
  EXPECT_EQ(parse_err("5ms5ms"), "invalid duration '5ms5ms': " + what);
}

TEST(ParseDuration, RejectsOverflow) {
  const std::string what = "too large (the maximum is about 292 years)";
  EXPECT_EQ(parse_err("9223372036855ms"), "invalid duration '9223372036855ms': " + what);
  EXPECT_EQ(parse_err("2562047h47m16s855ms"), "invalid duration '2562047h47m16s855ms': " + what);
  EXPECT_EQ(parse_err("2562048h"), "invalid duration '2562048h': " + what);
  EXPECT_EQ(parse_err("9223372037s"), "invalid duration '9223372037s': " + what);
  EXPECT_EQ(parse_err("9223372037"), "invalid duration '9223372037': " + what);
  EXPECT_EQ(parse_err("153722868m"), "invalid duration '153722868m': " + what);
  // Far beyond int64: must not wrap around to a small value.
  EXPECT_EQ(parse_err("99999999999999999999999999999ms"),
            "invalid duration '99999999999999999999999999999ms': " + what);
  EXPECT_EQ(parse_err("18446744073709551616"), "invalid duration '18446744073709551616': " + what);
  EXPECT_EQ(parse_err("18446744073709551617ms"), "invalid duration '18446744073709551617ms': " + what);
}

// ---- format_duration -------------------------------------------------------------------------

TEST(FormatDuration, CanonicalForms) {
  EXPECT_EQ(dlock::format_duration(milliseconds{0}), "0s");
  EXPECT_EQ(dlock::format_duration(milliseconds{1}), "1ms");
  EXPECT_EQ(dlock::format_duration(milliseconds{250}), "250ms");
  EXPECT_EQ(dlock::format_duration(milliseconds{1'000}), "1s");
  EXPECT_EQ(dlock::format_duration(milliseconds{30'000}), "30s");
  EXPECT_EQ(dlock::format_duration(milliseconds{90'000}), "1m30s");
  EXPECT_EQ(dlock::format_duration(milliseconds{2'500}), "2s500ms");
  EXPECT_EQ(dlock::format_duration(milliseconds{60'000}), "1m");
  EXPECT_EQ(dlock::format_duration(milliseconds{3'600'000}), "1h");
  EXPECT_EQ(dlock::format_duration(milliseconds{5'400'000}), "1h30m");
  EXPECT_EQ(dlock::format_duration(milliseconds{3'600'004}), "1h4ms");
  EXPECT_EQ(dlock::format_duration(milliseconds{3'723'004}), "1h2m3s4ms");
  EXPECT_EQ(dlock::format_duration(milliseconds{86'400'000}), "24h");
  EXPECT_EQ(dlock::format_duration(milliseconds{kMaxMs}), "2562047h47m16s854ms");
}

TEST(FormatDuration, Negative) {
  EXPECT_EQ(dlock::format_duration(milliseconds{-1'500}), "-1s500ms");
  EXPECT_EQ(dlock::format_duration(milliseconds::min()), "-2562047788015h12m55s808ms");
  EXPECT_EQ(dlock::format_duration(milliseconds::max()), "2562047788015h12m55s807ms");
}

TEST(FormatDuration, RoundTrip) {
  const std::int64_t fixed[] = {0,           1,          9,           10,          999,
                                1'000,       1'001,      59'999,      60'000,      60'001,
                                3'599'999,   3'600'000,  3'600'001,   86'399'999,  86'400'000,
                                123'456'789, kMaxMs - 1, kMaxMs,      1'000'000'000'000};
  for (std::int64_t v : fixed) {
    std::string text = dlock::format_duration(milliseconds{v});
    EXPECT_EQ(parse_ms(text), v) << text;
  }
  // A deterministic spread over the whole range, at several magnitudes.
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 20'000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::uint64_t modulus = 1;
    for (int k = 0; k < i % 14; ++k) modulus *= 10;  // 1 .. 10^13
    auto v = static_cast<std::int64_t>(x % (modulus * 10));
    if (v > kMaxMs) v %= kMaxMs + 1;
    std::string text = dlock::format_duration(milliseconds{v});
    ASSERT_EQ(parse_ms(text), v) << text;
  }
}

TEST(FormatDuration, ParseThenFormatIsCanonical) {
  EXPECT_EQ(dlock::format_duration(dlock::parse_duration("90s").value()), "1m30s");
  EXPECT_EQ(dlock::format_duration(dlock::parse_duration("1500ms").value()), "1s500ms");
  EXPECT_EQ(dlock::format_duration(dlock::parse_duration("30").value()), "30s");
  EXPECT_EQ(dlock::format_duration(dlock::parse_duration("0").value()), "0s");
  EXPECT_EQ(dlock::format_duration(dlock::parse_duration("120m").value()), "2h");
}

}  // namespace
