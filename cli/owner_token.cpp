#include "owner_token.hpp"

#include <charconv>
#include <ctime>

#include "dlock/duration.hpp"

namespace dlock::cli {

namespace {

std::optional<long long> parse_number(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

std::optional<OwnerInfo> parse_owner_token(std::string_view token) {
  if (token.size() < 34 || token[32] != '@') return std::nullopt;
  for (std::size_t i = 0; i < 32; ++i) {
    if (!is_hex(token[i])) return std::nullopt;
  }
  std::string_view rest = token.substr(33);
  const auto first = rest.find(':');
  if (first == std::string_view::npos || first == 0) return std::nullopt;
  OwnerInfo info;
  info.host = std::string(rest.substr(0, first));
  for (unsigned char c : info.host) {
    if (c <= 0x20 || c == 0x7f) return std::nullopt;
  }
  std::string_view tail = rest.substr(first + 1);
  const auto second = tail.find(':');
  auto pid = parse_number(tail.substr(0, second));
  if (!pid) return std::nullopt;
  info.pid = *pid;
  if (second != std::string_view::npos) {
    auto since = parse_number(tail.substr(second + 1));
    if (!since) return std::nullopt;
    info.since_unix_ms = *since;
  }
  return info;
}

long long held_for_ms(long long since_unix_ms) {
  const long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  return now > since_unix_ms ? now - since_unix_ms : 0;
}

std::string describe_holder(const std::optional<OwnerInfo>& info) {
  if (!info) return "(not a dlock owner token)";
  return info->host + ":" + std::to_string(info->pid);
}

std::string human_duration(long long ms) {
  if (ms < 0) return "-" + human_duration(-ms);
  if (ms >= 3600 * 1000LL) ms -= ms % (60 * 1000);
  else if (ms >= 10 * 1000) ms -= ms % 1000;
  else if (ms >= 1000) ms -= ms % 100;  // "1s500ms" -> 1.5 s shown as "1s500ms"
  return dlock::format_duration(std::chrono::milliseconds(ms));
}

std::string iso_time(long long unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  if (gmtime_r(&secs, &tm) == nullptr) return "?";
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return "?";
  return buf;
}

}  // namespace dlock::cli
