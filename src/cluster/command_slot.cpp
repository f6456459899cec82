#include "cluster/command_slot.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

#include "util/slot.hpp"

namespace dlock::detail {
namespace {

// Reads "<prefix><integer>\r\n" at `pos`.
bool read_header(std::string_view p, std::size_t& pos, char prefix, long long& value) {
  if (pos >= p.size() || p[pos] != prefix) return false;
  auto end = p.find("\r\n", pos + 1);
  if (end == std::string_view::npos) return false;
  auto [ptr, ec] = std::from_chars(p.data() + pos + 1, p.data() + end, value);
  if (ec != std::errc() || ptr != p.data() + end) return false;
  pos = end + 2;
  return true;
}

bool read_bulk(std::string_view p, std::size_t& pos, std::string_view& out) {
  long long len = 0;
  if (!read_header(p, pos, '$', len) || len < 0) return false;
  const auto n = static_cast<std::size_t>(len);
  if (p.size() - pos < n + 2) return false;
  out = p.substr(pos, n);
  pos += n + 2;
  return true;
}

// The command name in upper case, without allocating (no command has a longer name; a longer
// one comes out empty and is routed by its first argument).
struct Upper {
  std::array<char, 16> buf{};
  std::size_t len = 0;
  explicit Upper(std::string_view s) {
    if (s.size() > buf.size()) return;
    for (char c : s) buf[len++] = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  std::string_view view() const { return {buf.data(), len}; }
};

constexpr std::array<std::string_view, 22> keyless = {
    "PING",   "ECHO",   "INFO",      "TIME",   "CONFIG",  "CLUSTER", "CLIENT", "COMMAND",
    "SCRIPT", "DBSIZE", "SCAN",      "ROLE",   "HELLO",   "AUTH",    "SELECT", "PUBLISH",
    "PUBSUB", "MEMORY", "READONLY",  "ASKING", "WAIT",    "FUNCTION"};

}  // namespace

std::optional<std::uint16_t> command_slot(std::string_view payload) {
  std::size_t pos = 0;
  long long argc = 0;
  if (!read_header(payload, pos, '*', argc) || argc < 1) return std::nullopt;
  std::string_view name;
  if (!read_bulk(payload, pos, name)) return std::nullopt;
  const Upper upper_name(name);
  const std::string_view cmd = upper_name.view();
  std::string_view arg;
  if (cmd == "PUBSUB") {
    // PUBSUB SHARDNUMSUB <channel>: counted by the shard that owns the channel's slot.
    std::string_view sub;
    if (argc < 3 || !read_bulk(payload, pos, sub) || Upper(sub).view() != "SHARDNUMSUB" || !read_bulk(payload, pos, arg)) {
      return std::nullopt;
    }
    return key_slot(arg);
  }
  if (std::find(keyless.begin(), keyless.end(), cmd) != keyless.end()) return std::nullopt;
  if (cmd == "EVAL" || cmd == "EVALSHA" || cmd == "EVAL_RO" || cmd == "EVALSHA_RO" || cmd == "FCALL" ||
      cmd == "FCALL_RO") {
    // EVALSHA sha numkeys key...
    std::string_view numkeys;
    if (argc < 4 || !read_bulk(payload, pos, arg) || !read_bulk(payload, pos, numkeys)) return std::nullopt;
    if (numkeys.empty() || numkeys == "0") return std::nullopt;
    if (!read_bulk(payload, pos, arg)) return std::nullopt;
    return key_slot(arg);
  }
  if (argc < 2 || !read_bulk(payload, pos, arg)) return std::nullopt;
  return key_slot(arg);
}

}  // namespace dlock::detail
