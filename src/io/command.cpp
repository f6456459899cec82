#include "io/command.hpp"

#include <charconv>
#include <initializer_list>
#include <string_view>
#include <cstring>

namespace dlock::detail {

// Every command of every lock operation goes through here, so it is written out by hand:
// hiredis's formatter spent about 8,000 instructions a command in sprintf and its own
// allocations (callgrind, one acquire+release pair on one thread), a quarter of the client's
// work per pair. This one sizes the payload first, allocates once and writes in place.
namespace {

constexpr std::size_t digits(std::size_t n) noexcept {
  std::size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

// Writes "<marker><n>\r\n" at `at`, which has room for it (header sizes are counted first).
char* write_header(char* at, char marker, std::size_t n) noexcept {
  *at++ = marker;
  at = std::to_chars(at, at + 20, n).ptr;
  *at++ = '\r';
  *at++ = '\n';
  return at;
}

}  // namespace

std::size_t RespWriter::bulk_size(std::size_t len) noexcept { return 1 + digits(len) + 2 + len + 2; }

RespWriter::RespWriter(std::size_t count, std::size_t bulk_bytes) {
  out_.resize(1 + digits(count) + 2 + bulk_bytes);
  at_ = write_header(out_.data(), '*', count);
}

void RespWriter::bulk(std::string_view arg) noexcept { bulk(arg, {}); }

void RespWriter::bulk(std::string_view head, std::string_view tail) noexcept {
  at_ = write_header(at_, '$', head.size() + tail.size());
  if (!head.empty()) std::memcpy(at_, head.data(), head.size());
  at_ += head.size();
  if (!tail.empty()) std::memcpy(at_, tail.data(), tail.size());
  at_ += tail.size();
  *at_++ = '\r';
  *at_++ = '\n';
}

std::string RespWriter::take() && {
  // Fewer bytes than counted would leave zeros on the wire: trim rather than send them (a
  // caller's count that is off is a bug; the tests compare with hiredis's encoding).
  out_.resize(static_cast<std::size_t>(at_ - out_.data()));
  return std::move(out_);
}

std::string format_command(std::span<const std::string_view> args) {
  std::size_t size = 0;
  for (std::string_view a : args) size += RespWriter::bulk_size(a.size());
  RespWriter w(args.size(), size);
  for (std::string_view a : args) w.bulk(a);
  return std::move(w).take();
}

std::string format_command(std::initializer_list<std::string_view> args) {
  return format_command(std::span<const std::string_view>(args.begin(), args.size()));
}

std::string format_command(const std::vector<std::string>& args) {
  std::size_t size = 0;
  for (const std::string& a : args) size += RespWriter::bulk_size(a.size());
  RespWriter w(args.size(), size);
  for (const std::string& a : args) w.bulk(a);
  return std::move(w).take();
}

bool refused_before_running(const Reply& reply) {
  if (!reply.is_error()) return false;
  const std::string_view p = reply.error_prefix();
  for (std::string_view refused : {"READONLY", "LOADING", "MASTERDOWN", "BUSY", "NOSCRIPT", "NOAUTH", "CLUSTERDOWN",
                                   "TRYAGAIN", "MOVED", "ASK", "CROSSSLOT"}) {
    if (p == refused) return true;
  }
  return false;
}

std::error_code classify_error_reply(const Reply& reply) {
  std::string_view p = reply.error_prefix();
  std::string_view s = reply.str();
  if (p == "WRONGTYPE") return errc::wrong_type;
  if (p == "NOAUTH" || p == "NOPERM" || p == "WRONGPASS") return errc::auth;
  // A Lua runtime error carries the command's own error inside; prefer that classification.
  if (s.find("WRONGTYPE") != std::string_view::npos) return errc::wrong_type;
  if (s.find("NOPERM") != std::string_view::npos) return errc::auth;
  // How Redis 7.0 (command, key) and 7.2+ ("ACL failure in script") report an ACL denial
  // inside a script.
  if (s.find("can't run this command") != std::string_view::npos ||
      s.find("can't access at least one of the") != std::string_view::npos ||
      s.find("ACL failure in script") != std::string_view::npos ||
      s.find("No permissions to access") != std::string_view::npos)
    return errc::auth;
  // The server refusing work it cannot do now (memory full under noeviction, a read-only
  // replica, still loading), also when a script's command hit it: errc::server, as documented,
  // not errc::script (the script is fine; retrying later can succeed).
  if (p == "OOM" || p == "READONLY" || p == "LOADING" || p == "MASTERDOWN" ||
      s.find("OOM command not allowed") != std::string_view::npos)
    return errc::server;
  if (s.find("user_script") != std::string_view::npos || s.find("Error running script") != std::string_view::npos)
    return errc::script;
  return errc::server;
}

}  // namespace dlock::detail
