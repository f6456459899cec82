// A TCP port number from text: decimal digits only, 1..65535.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dlock::detail {

inline std::optional<std::uint16_t> parse_port(std::string_view s) noexcept {
  unsigned v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v == 0 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

}  // namespace dlock::detail
