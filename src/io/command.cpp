#include "io/command.hpp"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <new>

namespace dlock::detail {

std::string format_command(std::span<const std::string_view> args) {
  std::vector<const char*> argv(args.size());
  std::vector<size_t> lens(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    argv[i] = args[i].data();
    lens[i] = args[i].size();
  }
  char* out = nullptr;
  int n = redisFormatCommandArgv(&out, static_cast<int>(args.size()), argv.data(), lens.data());
  if (n < 0) throw std::bad_alloc();
  std::string s(out, static_cast<std::size_t>(n));
  std::free(out);
  return s;
}

std::string format_command(std::initializer_list<std::string_view> args) {
  return format_command(std::span<const std::string_view>(args.begin(), args.size()));
}

std::string format_command(const std::vector<std::string>& args) {
  std::vector<std::string_view> v(args.begin(), args.end());
  return format_command(std::span<const std::string_view>(v));
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
