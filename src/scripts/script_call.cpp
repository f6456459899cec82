#include "scripts/script_call.hpp"

#include <cstring>

#include "io/command.hpp"

namespace dlock::detail {

namespace {

// A visitor over a list of strings, for encode_evalsha_with.
template <class List>
auto each_of(const List& list) {
  return [&list](auto&& f) {
    for (const auto& a : list) f(std::string_view(a), std::string_view());
  };
}

}  // namespace

std::string encode_evalsha(const Script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args) {
  return encode_evalsha_with(s, each_of(keys), each_of(args));
}

std::string encode_evalsha(const Script& s, const std::vector<std::string>& keys,
                           const std::vector<std::string>& args) {
  return encode_evalsha_with(s, each_of(keys), each_of(args));
}

std::string evalsha_to_eval(const Script& s, const std::string& payload) {
  // "*N\r\n$7\r\nEVALSHA\r\n$40\r\n<sha1>\r\n<rest>": keep the header and the rest, swap the
  // first two arguments.
  const std::size_t header_end = payload.find("\r\n") + 2;
  const std::string prefix = "$7\r\nEVALSHA\r\n$40\r\n";
  const std::size_t rest = header_end + prefix.size() + 40 + 2;
  const std::size_t len = std::strlen(s.source);
  std::string out;
  out.reserve(payload.size() + len + 16);
  out.append(payload, 0, header_end);
  out += "$4\r\nEVAL\r\n$";
  out += std::to_string(len);
  out += "\r\n";
  out.append(s.source, len);
  out += "\r\n";
  out.append(payload, rest, std::string::npos);
  return out;
}

bool eval_refused(const Reply& r) {
  return r.is_error() && r.error_prefix() == "NOPERM" && r.str().find("'eval' command") != std::string::npos;
}

}  // namespace dlock::detail
