// dlock/duration.hpp — human-written durations ("250ms", "30s", "1m30s").
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "dlock/result.hpp"

namespace dlock {

// parse_duration()
//
// Accepts a sequence of <non-negative number><unit> groups with units ms, s, m, h, in
// decreasing order and each at most once ("1h30m", "1m30s", "250ms", "2s500ms"), or a bare
// non-negative number, which means seconds ("30" == 30s). A number may have a decimal fraction
// that comes to whole milliseconds ("1.5s", "0.25m", "1.5" == 1500ms; not "1.5ms" nor
// "0.0001"). "0" is zero. No sign, no spaces, no empty string; values beyond ~292 years (what
// fits in nanoseconds) are rejected. Errors are errc::invalid_argument with a message quoting
// the input.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// format_duration(): the canonical form parse_duration() reads back: largest units first, zero
// parts left out ("1m30s", "250ms", "0s").
std::string format_duration(std::chrono::milliseconds d);

}  // namespace dlock
