// url.cpp — dlock::parse_url and ServerAddress::display() (see dlock/url.hpp).
//
// Grammar accepted (scheme names are case-insensitive, as RFC 3986 says; nothing else is):
//
//   redis://[userinfo@]host[:port][/[db]]
//   rediss://[userinfo@]host[:port][/[db]][?param=value[&param=value]...]
//   unix://[userinfo@]/abs/path.sock[?db=N]
//
//   userinfo  = [user] ":" password     percent-decoded; "%" must start a valid %XX escape
//   host      = name | IPv4 | "[" IPv6 "]"   name: letters, digits, '-', '.', '_'
//   port      = 1-65535 (decimal digits only)
//   db        = 0-2147483647 (decimal digits only); "redis://h/" (empty db) means db 0
//
// Decisions beyond the header's wording:
//  - Credentials in unix:// URLs are accepted ("unix://user:pass@/run/redis.sock"): AUTH works
//    over a unix socket just as over TCP, and it keeps one spelling for both transports.
//  - The userinfo ends at the LAST '@' of a redis:// URL (host, port and db never contain '@'),
//    so a password containing an unencoded '@', ':' or '/' still parses. In a unix:// URL it
//    ends at the last "@/" (the socket path may itself contain '@').
//  - Userinfo without a ':' ("redis://word@host") is rejected rather than taken as a user
//    name: some clients read that form as a password, and a password mistaken for a user name
//    would end up in logs. Write ":password@" or "user:password@" (the password may be empty,
//    e.g. "redis://alice:@host" when ClientOptions::password supplies it).
//  - No query string or fragment in redis:// URLs; in unix:// URLs only "?db=N". A TLS
//    parameter on a redis:// URL gets its own message ("needs rediss://").
//  - rediss:// query: the TLS parameters of dlock/url.hpp, '&'-separated, each once, with a
//    non-empty value. '+' is not a space (these are paths, not form data). The query starts at
//    the first '?' after the userinfo, and the userinfo still ends at the LAST '@' of the URL
//    (so passwords keep their lenient rules), hence an '@' in a query value must be %40. A
//    userinfo that contains "?<tls parameter>=" is rejected with that hint instead of being
//    mis-parsed (a password containing such text literally must %-encode its '?'). Masking
//    uses the same split, so it then hides more of the URL, never less.
//  - TLS option combinations that cannot be what the user meant are rejected here, where the
//    message can quote the URL: cert without key (or the reverse), and insecure_skip_verify
//    with ca, capath or sni.
//  - A space, a control character (0x00-0x1F, 0x7F) anywhere is rejected before anything else.
//  - Every error message is "redis URL '<url>': <what is wrong>" where <url> has the password
//    (everything in the userinfo after its first ':', or the whole userinfo if it has no ':')
//    replaced by "***", and control characters shown as \xNN. The password never appears, even
//    when the URL is malformed, because masking uses the same userinfo split as parsing.
#include <cctype>
#include <climits>
#include <iterator>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <arpa/inet.h>
#include <netinet/in.h>

#if __has_include(<sys/un.h>)
#include <sys/un.h>
#define DLOCK_HAVE_SOCKADDR_UN 1
#endif

#include "dlock/error.hpp"
#include "dlock/result.hpp"
#include "dlock/url.hpp"

namespace dlock {

namespace {

enum class Scheme { redis, rediss, unix_socket, other };

struct SchemeSplit {
  Scheme scheme = Scheme::other;
  std::string_view name;  // the scheme text, empty when there is no valid "scheme://"
  std::string_view rest;  // what follows "://" (the whole URL when there is no scheme)
};

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_control_or_space(char c) {
  auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7F;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// Splits off "scheme://" when the text before "://" is a syntactically valid scheme
// (ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )); otherwise the whole URL is `rest`, so that
// masking never mistakes a password for a scheme.
SchemeSplit split_scheme(std::string_view url) {
  SchemeSplit s;
  s.rest = url;
  auto sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0 || !is_alpha(url[0])) return s;
  for (std::size_t i = 1; i < sep; ++i) {
    char c = url[i];
    if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') return s;
  }
  s.name = url.substr(0, sep);
  s.rest = url.substr(sep + 3);
  if (iequals(s.name, "redis")) {
    s.scheme = Scheme::redis;
  } else if (iequals(s.name, "rediss")) {
    s.scheme = Scheme::rediss;
  } else if (iequals(s.name, "unix")) {
    s.scheme = Scheme::unix_socket;
  }
  return s;
}

// Length of the userinfo at the start of `rest` (without its '@'), or nullopt when there is
// none. Used both for parsing and for masking, so the two always agree.
std::optional<std::size_t> userinfo_length(Scheme scheme, std::string_view rest) {
  if (scheme == Scheme::unix_socket) {
    if (!rest.empty() && rest[0] == '/') return std::nullopt;  // unix:///path: no userinfo
    auto at_slash = rest.rfind("@/");
    if (at_slash != std::string_view::npos) return at_slash;
  }
  auto at = rest.rfind('@');
  if (at == std::string_view::npos) return std::nullopt;
  return at;
}

// The URL as it may appear in a message: password replaced by "***", control characters and
// bytes that would break the quoting shown as \xNN.
std::string masked(std::string_view url) {
  SchemeSplit s = split_scheme(url);
  std::string shown;
  std::size_t rest_offset = url.size() - s.rest.size();
  if (auto len = userinfo_length(s.scheme, s.rest)) {
    std::string_view userinfo = s.rest.substr(0, *len);
    auto colon = userinfo.find(':');
    shown.append(url.substr(0, rest_offset));
    if (colon == std::string_view::npos) {
      shown.append("***");
    } else {
      shown.append(userinfo.substr(0, colon + 1));
      shown.append("***");
    }
    shown.append(s.rest.substr(*len));
  } else {
    shown.assign(url);
  }
  std::string out;
  out.reserve(shown.size());
  static constexpr char hex[] = "0123456789ABCDEF";
  for (char c : shown) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

Error url_error(std::string_view url, std::string_view what) {
  std::string msg = "redis URL '";
  msg += masked(url);
  msg += "': ";
  msg += what;
  return Error(errc::invalid_argument, std::move(msg));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in`; nullopt when a '%' is not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (in.size() - i < 3) return std::nullopt;
    int hi = hex_value(in[i + 1]);
    int lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// Parses a decimal number made only of digits, at most `max`. nullopt when empty, not all
// digits, or above `max`.
std::optional<std::uint64_t> parse_decimal(std::string_view text, std::uint64_t max) {
  if (text.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : text) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
    if (v > max) return std::nullopt;
  }
  return v;
}

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text)
    if (!is_digit(c)) return false;
  return true;
}

// A dotted-decimal IPv4 address: four numbers 0-255, no leading zeros.
bool valid_ipv4(std::string_view s) {
  int parts = 0;
  std::size_t i = 0;
  while (true) {
    std::size_t start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    std::string_view part = s.substr(start, i - start);
    if (part.empty() || part.size() > 3) return false;
    if (part.size() > 1 && part[0] == '0') return false;  // no octal-looking octets
    if (std::stoi(std::string(part)) > 255) return false;
    ++parts;
    if (i == s.size()) break;
    if (s[i] != '.' || parts == 4) return false;
    ++i;
  }
  return parts == 4;
}

// A textual IPv6 address (RFC 4291 section 2.2): up to eight groups of 1-4 hex digits, at most
// one "::", optionally ending in a dotted IPv4 address that counts as two groups.
bool valid_ipv6(std::string_view s) {
  if (s.empty()) return false;
  int groups = 0;
  bool double_colon = false;
  std::size_t i = 0;
  if (s.substr(0, 2) == "::") {
    double_colon = true;
    i = 2;
    if (i == s.size()) return true;  // "::"
  } else if (s[0] == ':') {
    return false;
  }
  while (i < s.size()) {
    std::size_t start = i;
    while (i < s.size() && hex_value(s[i]) >= 0) ++i;
    if (i < s.size() && s[i] == '.') {
      // Embedded IPv4: must be the last piece.
      if (!valid_ipv4(s.substr(start))) return false;
      groups += 2;
      i = s.size();
      break;
    }
    std::size_t len = i - start;
    if (len == 0 || len > 4) return false;
    ++groups;
    if (i == s.size()) break;
    if (s[i] != ':') return false;
    ++i;
    if (i < s.size() && s[i] == ':') {
      if (double_colon) return false;
      double_colon = true;
      ++i;
      if (i == s.size()) break;  // trailing "::"
    } else if (i == s.size()) {
      return false;  // trailing single ':'
    }
  }
  return double_colon ? groups <= 7 : groups == 8;
}

// Whether the system resolver reads `host` as an IPv4 number rather than a name: getaddrinfo
// takes every form inet_aton(3) accepts ("010.0.0.1" is 8.0.0.1, "127.1" is 127.0.0.1,
// "0x7f.1", "2130706433"). Asking inet_aton itself keeps names it does not read as numbers
// (a container's all-digit host name above 2^32, "1.2.3.4.5") resolvable as names.
bool numeric_host(std::string_view host) {
  in_addr addr{};
  return inet_aton(std::string(host).c_str(), &addr) != 0;
}

bool valid_host_char(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_';
}

constexpr std::size_t kMaxHostLength = 255;

Result<int> parse_db(std::string_view url, std::string_view text) {
  if (!all_digits(text)) return url_error(url, "db must be a number 0-2147483647, got '" + std::string(text) + "'");
  auto v = parse_decimal(text, static_cast<std::uint64_t>(INT_MAX));
  if (!v) return url_error(url, "db must be 0-2147483647");
  return static_cast<int>(*v);
}

// Splits the userinfo off `rest` into `addr`; returns the remainder (after '@').
Result<std::string_view> take_userinfo(std::string_view url, Scheme scheme, std::string_view rest,
                                       ServerAddress& addr) {
  auto len = userinfo_length(scheme, rest);
  if (!len) return rest;
  std::string_view userinfo = rest.substr(0, *len);
  auto colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    return url_error(url, "credentials must be written ':password@' or 'user:password@'");
  }
  auto user = percent_decode(userinfo.substr(0, colon));
  if (!user) return url_error(url, "malformed %-escape in user name");
  auto password = percent_decode(userinfo.substr(colon + 1));
  if (!password) return url_error(url, "malformed %-escape in password");
  addr.user = std::move(*user);
  addr.password = std::move(*password);
  return rest.substr(*len + 1);
}

constexpr std::string_view kTlsParameters[] = {"ca", "capath", "cert", "key", "sni", "insecure_skip_verify"};

bool is_tls_parameter(std::string_view name) {
  for (auto p : kTlsParameters)
    if (p == name) return true;
  return false;
}

// Fills `tls` from a rediss:// query "k=v&k=v".
Result<void> parse_tls_query(std::string_view url, std::string_view query, TlsOptions& tls) {
  if (query.empty()) return url_error(url, "empty query after '?'");
  bool seen[std::size(kTlsParameters)] = {};
  while (true) {
    auto amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    auto eq = item.find('=');
    std::string_view name = item.substr(0, eq);
    std::size_t index = 0;
    while (index < std::size(kTlsParameters) && kTlsParameters[index] != name) ++index;
    if (index == std::size(kTlsParameters)) {
      return url_error(url, "unknown parameter '" + std::string(name) +
                                "' (expected ca, capath, cert, key, sni or insecure_skip_verify)");
    }
    if (seen[index]) return url_error(url, "parameter '" + std::string(name) + "' given twice");
    seen[index] = true;
    if (eq == std::string_view::npos || eq + 1 == item.size()) {
      return url_error(url, "parameter '" + std::string(name) + "' needs a value");
    }
    auto value = percent_decode(item.substr(eq + 1));
    if (!value) return url_error(url, "malformed %-escape in parameter '" + std::string(name) + "'");
    if (value->find('\0') != std::string::npos) {
      return url_error(url, "parameter '" + std::string(name) + "' contains a NUL byte");
    }
    if (name == "ca") tls.ca_file = std::move(*value);
    else if (name == "capath") tls.ca_path = std::move(*value);
    else if (name == "cert") tls.cert_file = std::move(*value);
    else if (name == "key") tls.key_file = std::move(*value);
    else if (name == "sni") tls.server_name = std::move(*value);
    else if (*value == "true" || *value == "1") tls.insecure_skip_verify = true;
    else if (*value == "false" || *value == "0") tls.insecure_skip_verify = false;
    else return url_error(url, "insecure_skip_verify must be true or false, got '" + *value + "'");
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return {};
}

Result<void> check_tls_combination(std::string_view url, const TlsOptions& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return url_error(url, tls.cert_file.empty() ? "key given without cert (a client certificate needs both)"
                                                : "cert given without key (a client certificate needs both)");
  }
  if (tls.insecure_skip_verify && (!tls.ca_file.empty() || !tls.ca_path.empty() || !tls.server_name.empty())) {
    return url_error(url, "insecure_skip_verify=true cannot be combined with ca, capath or sni: "
                          "they would not be checked");
  }
  return {};
}

Result<ServerAddress> parse_tcp(std::string_view url, std::string_view rest, bool tls) {
  if (auto len = userinfo_length(Scheme::rediss, rest); tls && len) {
    std::string_view userinfo = rest.substr(0, *len);
    for (auto p : kTlsParameters) {
      std::string param = "?";  // (not "?" + std::string(p): GCC 12 -O2 warns -Wrestrict on it)
      param.append(p).append("=");
      if (userinfo.find(param) != std::string_view::npos) {
        return url_error(url, "an '@' in a query parameter must be written %40");
      }
    }
  }
  ServerAddress addr;
  addr.transport = ServerAddress::Transport::tcp;
  auto after_user = take_userinfo(url, tls ? Scheme::rediss : Scheme::redis, rest, addr);
  if (!after_user) return after_user.error();
  rest = *after_user;

  if (rest.find('#') != std::string_view::npos) {
    return url_error(url, "fragments are not supported in redis URLs");
  }
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (!tls) {
      std::string_view first = query.substr(0, query.find_first_of("=&"));
      if (is_tls_parameter(first)) {
        return url_error(url, "TLS parameter '" + std::string(first) + "' needs a rediss:// URL");
      }
      return url_error(url, "query strings and fragments are not supported in redis:// URLs (write the db as /N)");
    }
    if (auto ok = parse_tls_query(url, query, addr.tls); !ok) return ok.error();
  }
  if (tls) {
    addr.tls.enabled = true;
    if (auto ok = check_tls_combination(url, addr.tls); !ok) return ok.error();
  }
  auto slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  std::optional<std::string_view> db_text;
  if (slash != std::string_view::npos) db_text = rest.substr(slash + 1);

  // Host.
  std::string_view host;
  std::string_view after_host;
  if (!hostport.empty() && hostport[0] == '[') {
    auto close = hostport.find(']');
    if (close == std::string_view::npos) return url_error(url, "missing ']' after IPv6 address");
    host = hostport.substr(1, close - 1);
    if (host.empty()) return url_error(url, "missing host");
    if (host.find('%') != std::string_view::npos) {
      return url_error(url, "IPv6 zone identifiers are not supported");
    }
    if (!valid_ipv6(host)) return url_error(url, "invalid IPv6 address '" + std::string(host) + "'");
    after_host = hostport.substr(close + 1);
    if (!after_host.empty() && after_host[0] != ':') {
      return url_error(url, "unexpected '" + std::string(after_host) + "' after IPv6 address");
    }
  } else {
    auto colon = hostport.find(':');
    host = hostport.substr(0, colon);
    if (colon != std::string_view::npos) after_host = hostport.substr(colon);
    // Before "missing host": "redis://::1:6380" has an empty host only because it is an
    // unbracketed IPv6 address.
    if (hostport.find(',') != std::string_view::npos) {
      return url_error(url, "one server per redis:// URL: several hosts are a redis-cluster:// or "
                            "redis-sentinel:// URL (or, for the CLI, --redlock with one URL per master)");
    }
    if (after_host.size() > 1 && after_host.substr(1).find(':') != std::string_view::npos) {
      // Hex digits and colons only (no dots before the first colon): unbracketed IPv6.
      const bool ipv6_like = host.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
      if (ipv6_like) return url_error(url, "an IPv6 address must be written in brackets, e.g. redis://[::1]:6379");
      return url_error(url, "more than one port after host '" + std::string(host) + "'");
    }
    if (host.empty()) return url_error(url, "missing host");
    for (char c : host) {
      if (!valid_host_char(c)) {
        return url_error(url, "invalid character '" + std::string(1, c) + "' in host");
      }
    }
    if (host.size() > kMaxHostLength) return url_error(url, "host name is longer than 255 characters");
    if (numeric_host(host) && !valid_ipv4(host)) {
      return url_error(url, "'" + std::string(host) +
                                "' is not a plain dotted-decimal IPv4 address (write four numbers 0-255 "
                                "without leading zeros: resolvers read forms such as 010.0.0.1, 0x7f.1 or "
                                "2130706433 as octal, hex or one number)");
    }
  }
  addr.host = std::string(host);

  // Port.
  if (!after_host.empty()) {
    std::string_view port_text = after_host.substr(1);  // after ':'
    if (!all_digits(port_text)) {
      if (port_text.empty()) return url_error(url, "port is empty (omit the ':' for the default 6379)");
      return url_error(url, "port must be a number 1-65535, got '" + std::string(port_text) + "'");
    }
    auto port = parse_decimal(port_text, 65535);
    if (!port || *port == 0) return url_error(url, "port must be 1-65535");
    addr.port = static_cast<std::uint16_t>(*port);
  }

  // Database: "/N", or "/" alone for 0.
  if (db_text && !db_text->empty()) {
    auto db = parse_db(url, *db_text);
    if (!db) return db.error();
    addr.db = *db;
  }
  return addr;
}

Result<ServerAddress> parse_unix(std::string_view url, std::string_view rest) {
  ServerAddress addr;
  addr.transport = ServerAddress::Transport::unix_socket;
  addr.host.clear();
  auto after_user = take_userinfo(url, Scheme::unix_socket, rest, addr);
  if (!after_user) return after_user.error();
  rest = *after_user;

  if (rest.find('#') != std::string_view::npos) {
    return url_error(url, "fragments are not supported in unix:// URLs");
  }
  auto q = rest.find('?');
  std::string_view path = rest.substr(0, q);
  if (path.empty()) return url_error(url, "missing socket path");
  if (path[0] != '/') {
    return url_error(url, "socket path must be absolute, e.g. unix:///run/redis.sock");
  }
  if (path == "/") return url_error(url, "missing socket path");
#ifdef DLOCK_HAVE_SOCKADDR_UN
  constexpr std::size_t max_path = sizeof(sockaddr_un{}.sun_path) - 1;
  if (path.size() > max_path) {
    return url_error(url, "socket path is longer than the " + std::to_string(max_path) +
                              " bytes a unix socket address can hold");
  }
#endif
  addr.path = std::string(path);

  if (q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    constexpr std::string_view key = "db=";
    if (query.substr(0, key.size()) != key) {
      return url_error(url, "the only query parameter supported is db=N");
    }
    auto db = parse_db(url, query.substr(key.size()));
    if (!db) return db.error();
    addr.db = *db;
  }
  return addr;
}

}  // namespace

std::string ServerAddress::display() const {
  if (transport == Transport::unix_socket) return path;
  std::string out = tls.enabled ? "rediss://" : "";
  if (host.find(':') != std::string::npos) {
    out += "[" + host + "]";
  } else {
    out += host;
  }
  out += ':';
  out += std::to_string(port);
  return out;
}

Result<ServerAddress> parse_url(std::string_view url) {
  if (url.empty()) return url_error(url, "empty");
  for (std::size_t i = 0; i < url.size(); ++i) {
    if (is_control_or_space(url[i])) {
      return url_error(url, "contains a space or control character at offset " + std::to_string(i));
    }
  }
  SchemeSplit s = split_scheme(url);
  switch (s.scheme) {
    case Scheme::redis:
      return parse_tcp(url, s.rest, false);
    case Scheme::rediss:
      return parse_tcp(url, s.rest, true);
    case Scheme::unix_socket:
      return parse_unix(url, s.rest);
    case Scheme::other:
      break;
  }
  if (s.name.empty()) return url_error(url, "missing scheme (expected redis://, rediss:// or unix://)");
  return url_error(url, "unsupported scheme '" + std::string(s.name) + "' (expected redis://, rediss:// or unix://)");
}

}  // namespace dlock
