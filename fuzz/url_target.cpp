// fuzz_url — dlock::parse_url (src/util/url.cpp) on arbitrary text.
//
// Properties checked, beyond "does not crash":
//  1. Success yields a usable address: tcp has a host of valid characters (or an IPv6 literal)
//     and a port 1-65535; unix has an absolute path other than "/"; db >= 0.
//  2. display() depends only on where the server is: it is the same with the credentials
//     cleared, so it cannot leak them.
//  3. Round trip: the address written back as a canonical URL (credentials fully %-encoded)
//     parses to the same address.
//  4. Scheme names are case-insensitive: the input with its scheme upper-cased parses the same.
//  5. Errors are invalid_argument, start with "redis URL '", and hold no raw control bytes.
//  6. A password never reaches a message: the input is also parsed with "u:<marker>@" put in
//     front of what follows the scheme, which by the grammar always lands in the password
//     (the userinfo ends at the last '@'; for unix:// at the last "@/", or the last '@'), and
//     neither display() nor the error message may contain the marker.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "check.hpp"
#include "dlock/error.hpp"
#include "dlock/url.hpp"

namespace {

using dlock::ServerAddress;

constexpr std::string_view kMarker = "pw-SECRET-7Q";

std::string describe(std::string_view url) { return "url: '" + std::string(url) + "'"; }

bool same_address(const ServerAddress& a, const ServerAddress& b) {
  return a.transport == b.transport && a.host == b.host && a.port == b.port && a.path == b.path &&
         a.user == b.user && a.password == b.password && a.db == b.db;
}

std::string percent_encode_all(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    out += '%';
    out += hex[u >> 4];
    out += hex[u & 0xF];
  }
  return out;
}

// The canonical spelling of `a`, written by hand (the library has no formatter).
std::string canonical_url(const ServerAddress& a) {
  std::string userinfo;
  if (!a.user.empty() || !a.password.empty()) {
    userinfo = percent_encode_all(a.user) + ":" + percent_encode_all(a.password) + "@";
  }
  if (a.transport == ServerAddress::Transport::unix_socket) {
    return "unix://" + userinfo + a.path + "?db=" + std::to_string(a.db);
  }
  const bool v6 = a.host.find(':') != std::string::npos;
  return "redis://" + userinfo + (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port) + "/" +
         std::to_string(a.db);
}

bool has_control_byte(std::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) return true;
  }
  return false;
}

void check_error(std::string_view url, const dlock::Error& e) {
  FUZZ_CHECK(e.code == dlock::errc::invalid_argument, describe(url));
  FUZZ_CHECK(e.message.rfind("redis URL '", 0) == 0, describe(url) + " message: " + e.message);
  FUZZ_CHECK(!has_control_byte(e.message), describe(url));
}

void check_address(std::string_view url, const ServerAddress& a) {
  FUZZ_CHECK(a.db >= 0, describe(url));
  if (a.transport == ServerAddress::Transport::tcp) {
    FUZZ_CHECK(!a.host.empty(), describe(url));
    FUZZ_CHECK(a.port != 0, describe(url));
    FUZZ_CHECK(a.path.empty(), describe(url));
    if (a.host.find(':') == std::string::npos) {
      FUZZ_CHECK(a.host.size() <= 255, describe(url));
      for (char c : a.host) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '.' || c == '_';
        FUZZ_CHECK(ok, describe(url) + " host: " + a.host);
      }
    }
  } else {
    FUZZ_CHECK(a.path.size() > 1 && a.path[0] == '/', describe(url) + " path: " + a.path);
    FUZZ_CHECK(a.path.find_first_of("?#") == std::string::npos, describe(url) + " path: " + a.path);
  }

  ServerAddress anonymous = a;
  anonymous.user = "someone-else";
  anonymous.password = "another-password";
  FUZZ_CHECK(a.display() == anonymous.display(), describe(url) + " display: " + a.display());

  const std::string canonical = canonical_url(a);
  auto again = dlock::parse_url(canonical);
  FUZZ_CHECK(again.ok(), describe(url) + " canonical: " + canonical + " -> " +
                             (again.ok() ? std::string() : again.error().message));
  FUZZ_CHECK(same_address(a, *again), describe(url) + " canonical: " + canonical);
}

// `url` with its scheme (the text before "://") upper-cased; empty when it has none.
std::string upper_scheme(std::string_view url) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos) return {};
  std::string out(url);
  for (std::size_t i = 0; i < sep; ++i) {
    if (out[i] >= 'a' && out[i] <= 'z') out[i] = static_cast<char>(out[i] - 'a' + 'A');
  }
  return out;
}

void check_marker_never_shown(std::string_view url) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos || url.find(kMarker) != std::string_view::npos) return;
  const std::string injected =
      std::string(url.substr(0, sep + 3)) + "u:" + std::string(kMarker) + "@" + std::string(url.substr(sep + 3));
  auto r = dlock::parse_url(injected);
  if (r.ok()) {
    FUZZ_CHECK(r->user == "u", describe(injected));
    FUZZ_CHECK(r->password.find(kMarker) == 0, describe(injected) + " password: " + r->password);
    FUZZ_CHECK(r->display().find(kMarker) == std::string::npos, describe(injected));
  } else {
    FUZZ_CHECK(r.error().message.find(kMarker) == std::string::npos,
               describe(injected) + " message: " + r.error().message);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view url(reinterpret_cast<const char*>(data), size);
  auto r = dlock::parse_url(url);
  if (r.ok()) {
    check_address(url, *r);
  } else {
    check_error(url, r.error());
  }

  if (std::string upper = upper_scheme(url); !upper.empty()) {
    auto u = dlock::parse_url(upper);
    FUZZ_CHECK(u.ok() == r.ok(), describe(url));
    if (r.ok()) FUZZ_CHECK(same_address(*r, *u), describe(url));
  }

  check_marker_never_shown(url);
  return 0;
}
