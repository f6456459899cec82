// Unit tests for dlock::parse_url and ServerAddress::display() (src/util/url.cpp).
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "dlock/error.hpp"
#include "dlock/url.hpp"

namespace {

using dlock::ServerAddress;
using Transport = dlock::ServerAddress::Transport;

ServerAddress parse_ok(std::string_view url) {
  auto r = dlock::parse_url(url);
  EXPECT_TRUE(r.ok()) << "url: " << url << " error: " << r.error().what();
  return r.ok() ? r.value() : ServerAddress{};
}

// Parses a URL that must be rejected; returns the message.
std::string parse_err(std::string_view url) {
  auto r = dlock::parse_url(url);
  EXPECT_FALSE(r.ok()) << "url should be rejected: " << url;
  if (r.ok()) return {};
  EXPECT_EQ(r.code(), dlock::errc::invalid_argument) << url;
  return r.error().message;
}

// ---- accepted forms --------------------------------------------------------------------------

TEST(ParseUrl, HostOnlyUsesDefaults) {
  auto a = parse_ok("redis://localhost");
  EXPECT_EQ(a.transport, Transport::tcp);
  EXPECT_EQ(a.host, "localhost");
  EXPECT_EQ(a.port, 6379);
  EXPECT_EQ(a.db, 0);
  EXPECT_EQ(a.user, "");
  EXPECT_EQ(a.password, "");
  EXPECT_EQ(a.path, "");
}

TEST(ParseUrl, HostPortDb) {
  auto a = parse_ok("redis://cache.example.com:6380/5");
  EXPECT_EQ(a.host, "cache.example.com");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 5);
}

TEST(ParseUrl, Ipv4Host) {
  auto a = parse_ok("redis://10.0.0.7:7000");
  EXPECT_EQ(a.host, "10.0.0.7");
  EXPECT_EQ(a.port, 7000);
}

TEST(ParseUrl, HostWithUnderscoreAndDash) {
  auto a = parse_ok("redis://redis_primary-1");
  EXPECT_EQ(a.host, "redis_primary-1");
}

TEST(ParseUrl, PortBounds) {
  EXPECT_EQ(parse_ok("redis://h:1").port, 1);
  EXPECT_EQ(parse_ok("redis://h:65535").port, 65535);
  EXPECT_EQ(parse_ok("redis://h:06379").port, 6379);
}

TEST(ParseUrl, DbBounds) {
  EXPECT_EQ(parse_ok("redis://h/0").db, 0);
  EXPECT_EQ(parse_ok("redis://h:6379/15").db, 15);
  EXPECT_EQ(parse_ok("redis://h/2147483647").db, 2147483647);
}

TEST(ParseUrl, TrailingSlashMeansDbZero) {
  auto a = parse_ok("redis://h:6380/");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 0);
}

TEST(ParseUrl, PasswordOnly) {
  auto a = parse_ok("redis://:s3cret@host");
  EXPECT_EQ(a.user, "");
  EXPECT_EQ(a.password, "s3cret");
  EXPECT_EQ(a.host, "host");
  EXPECT_EQ(a.port, 6379);
}

TEST(ParseUrl, UserAndPassword) {
  auto a = parse_ok("redis://alice:wonder@host:6390/3");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.password, "wonder");
  EXPECT_EQ(a.host, "host");
  EXPECT_EQ(a.port, 6390);
  EXPECT_EQ(a.db, 3);
}

TEST(ParseUrl, UserWithEmptyPassword) {
  auto a = parse_ok("redis://alice:@host");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.password, "");
  auto b = parse_ok("redis://:@host");
  EXPECT_EQ(b.user, "");
  EXPECT_EQ(b.password, "");
}

TEST(ParseUrl, PercentDecodesUserAndPassword) {
  auto a = parse_ok("redis://al%69ce:p%40ss%3Aw%2f%25rd@host");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.password, "p@ss:w/%rd");
}

TEST(ParseUrl, PasswordWithRawSpecialCharacters) {
  // The userinfo ends at the last '@', so unencoded '@', ':' and '/' stay in the password.
  auto a = parse_ok("redis://bob:p@ss:w/rd@host:7000/2");
  EXPECT_EQ(a.user, "bob");
  EXPECT_EQ(a.password, "p@ss:w/rd");
  EXPECT_EQ(a.host, "host");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.db, 2);
}

TEST(ParseUrl, Ipv6Literal) {
  auto a = parse_ok("redis://[::1]:6380");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 6380);
  auto b = parse_ok("redis://[2001:db8::42]");
  EXPECT_EQ(b.host, "2001:db8::42");
  EXPECT_EQ(b.port, 6379);
  auto c = parse_ok("redis://:pw@[fe80:0:0:0:202:b3ff:fe1e:8329]:1/9");
  EXPECT_EQ(c.host, "fe80:0:0:0:202:b3ff:fe1e:8329");
  EXPECT_EQ(c.port, 1);
  EXPECT_EQ(c.db, 9);
  EXPECT_EQ(c.password, "pw");
  EXPECT_EQ(parse_ok("redis://[::ffff:192.0.2.1]").host, "::ffff:192.0.2.1");
  EXPECT_EQ(parse_ok("redis://[::]").host, "::");
}

TEST(ParseUrl, SchemeIsCaseInsensitive) {
  EXPECT_EQ(parse_ok("REDIS://h:1").port, 1);
  EXPECT_EQ(parse_ok("Unix:///s.sock").path, "/s.sock");
}

TEST(ParseUrl, UnixSocket) {
  auto a = parse_ok("unix:///run/redis.sock");
  EXPECT_EQ(a.transport, Transport::unix_socket);
  EXPECT_EQ(a.path, "/run/redis.sock");
  EXPECT_EQ(a.db, 0);
  EXPECT_EQ(a.user, "");
  EXPECT_EQ(a.password, "");
}

TEST(ParseUrl, UnixSocketWithDb) {
  auto a = parse_ok("unix:///run/redis.sock?db=2");
  EXPECT_EQ(a.transport, Transport::unix_socket);
  EXPECT_EQ(a.path, "/run/redis.sock");
  EXPECT_EQ(a.db, 2);
}

TEST(ParseUrl, UnixSocketWithCredentials) {
  auto a = parse_ok("unix://alice:p%40ss@/var/run/redis/redis.sock?db=1");
  EXPECT_EQ(a.transport, Transport::unix_socket);
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.password, "p@ss");
  EXPECT_EQ(a.path, "/var/run/redis/redis.sock");
  EXPECT_EQ(a.db, 1);
  auto b = parse_ok("unix://:pw@/s.sock");
  EXPECT_EQ(b.user, "");
  EXPECT_EQ(b.password, "pw");
  EXPECT_EQ(b.path, "/s.sock");
}

TEST(ParseUrl, UnixSocketPathMayContainAt) {
  auto a = parse_ok("unix:///tmp/user@host/redis.sock");
  EXPECT_EQ(a.path, "/tmp/user@host/redis.sock");
  EXPECT_EQ(a.password, "");
}

// ---- display() -------------------------------------------------------------------------------

TEST(ServerAddressDisplay, HostPort) {
  EXPECT_EQ(parse_ok("redis://:secret@example.com:6380/2").display(), "example.com:6380");
  EXPECT_EQ(parse_ok("redis://h").display(), "h:6379");
}

TEST(ServerAddressDisplay, Ipv6InBrackets) {
  EXPECT_EQ(parse_ok("redis://[::1]:6380").display(), "[::1]:6380");
}

TEST(ServerAddressDisplay, UnixPath) {
  EXPECT_EQ(parse_ok("unix://:secret@/run/redis.sock?db=3").display(), "/run/redis.sock");
}

TEST(ServerAddressDisplay, DefaultConstructed) {
  EXPECT_EQ(ServerAddress{}.display(), "127.0.0.1:6379");
}

TEST(ServerAddressDisplay, NeverContainsPassword) {
  ServerAddress a;
  a.user = "alice";
  a.password = "hunter2";
  EXPECT_EQ(a.display().find("hunter2"), std::string::npos);
}

// ---- rejections ------------------------------------------------------------------------------

TEST(ParseUrl, RejectsEmpty) {
  EXPECT_EQ(parse_err(""), "redis URL '': empty");
}

TEST(ParseUrl, RejectsOtherSchemes) {
  EXPECT_EQ(parse_err("http://host:6379"),
            "redis URL 'http://host:6379': unsupported scheme 'http' (expected redis:// or unix://)");
  EXPECT_NE(parse_err("redis-cluster://h1,h2").find("unsupported scheme 'redis-cluster'"), std::string::npos);
  EXPECT_NE(parse_err("rediss://host").find("unsupported scheme 'rediss'"), std::string::npos);
  EXPECT_NE(parse_err("redis-sentinel://host").find("unsupported scheme"), std::string::npos);
}

TEST(ParseUrl, RejectsMissingScheme) {
  EXPECT_EQ(parse_err("localhost:6379"),
            "redis URL 'localhost:6379': missing scheme (expected redis:// or unix://)");
  parse_err("redis:/host");
  parse_err("redis:host");
  parse_err("//host");
  parse_err("://host");
}

TEST(ParseUrl, RejectsMissingHost) {
  EXPECT_EQ(parse_err("redis://"), "redis URL 'redis://': missing host");
  EXPECT_EQ(parse_err("redis://:6379"), "redis URL 'redis://:6379': missing host");
  EXPECT_EQ(parse_err("redis:///0"), "redis URL 'redis:///0': missing host");
  EXPECT_EQ(parse_err("redis://:pw@"), "redis URL 'redis://:***@': missing host");
  EXPECT_EQ(parse_err("redis://:pw@:6379/1"), "redis URL 'redis://:***@:6379/1': missing host");
  EXPECT_EQ(parse_err("redis://[]:6379"), "redis URL 'redis://[]:6379': missing host");
}

TEST(ParseUrl, RejectsBadPort) {
  EXPECT_EQ(parse_err("redis://:pw@h:99999"), "redis URL 'redis://:***@h:99999': port must be 1-65535");
  EXPECT_EQ(parse_err("redis://h:0"), "redis URL 'redis://h:0': port must be 1-65535");
  EXPECT_EQ(parse_err("redis://h:65536"), "redis URL 'redis://h:65536': port must be 1-65535");
  EXPECT_EQ(parse_err("redis://h:99999999999999999999999"),
            "redis URL 'redis://h:99999999999999999999999': port must be 1-65535");
  EXPECT_EQ(parse_err("redis://h:abc"), "redis URL 'redis://h:abc': port must be a number 1-65535, got 'abc'");
  EXPECT_EQ(parse_err("redis://h:-1"), "redis URL 'redis://h:-1': port must be a number 1-65535, got '-1'");
  EXPECT_EQ(parse_err("redis://h:+80"), "redis URL 'redis://h:+80': port must be a number 1-65535, got '+80'");
  EXPECT_EQ(parse_err("redis://h:63 79"),
            "redis URL 'redis://h:63 79': contains a space or control character at offset 12");
  EXPECT_EQ(parse_err("redis://h:"),
            "redis URL 'redis://h:': port is empty (omit the ':' for the default 6379)");
  EXPECT_EQ(parse_err("redis://[::1]:0"), "redis URL 'redis://[::1]:0': port must be 1-65535");
  EXPECT_EQ(parse_err("redis://[::1]:x"), "redis URL 'redis://[::1]:x': port must be a number 1-65535, got 'x'");
}

TEST(ParseUrl, RejectsBadDb) {
  EXPECT_EQ(parse_err("redis://h/-1"), "redis URL 'redis://h/-1': db must be a number 0-2147483647, got '-1'");
  EXPECT_EQ(parse_err("redis://h/abc"), "redis URL 'redis://h/abc': db must be a number 0-2147483647, got 'abc'");
  EXPECT_EQ(parse_err("redis://h/2147483648"), "redis URL 'redis://h/2147483648': db must be 0-2147483647");
  EXPECT_EQ(parse_err("redis://h/99999999999999999999999"),
            "redis URL 'redis://h/99999999999999999999999': db must be 0-2147483647");
  EXPECT_EQ(parse_err("unix:///s.sock?db=-1"),
            "redis URL 'unix:///s.sock?db=-1': db must be a number 0-2147483647, got '-1'");
  EXPECT_EQ(parse_err("unix:///s.sock?db=x"),
            "redis URL 'unix:///s.sock?db=x': db must be a number 0-2147483647, got 'x'");
  EXPECT_EQ(parse_err("unix:///s.sock?db=2147483648"),
            "redis URL 'unix:///s.sock?db=2147483648': db must be 0-2147483647");
  EXPECT_EQ(parse_err("unix:///s.sock?db="),
            "redis URL 'unix:///s.sock?db=': db must be a number 0-2147483647, got ''");
}

TEST(ParseUrl, RejectsTrailingJunk) {
  EXPECT_EQ(parse_err("redis://h:6379/0/extra"),
            "redis URL 'redis://h:6379/0/extra': db must be a number 0-2147483647, got '0/extra'");
  EXPECT_EQ(parse_err("redis://h/1x"), "redis URL 'redis://h/1x': db must be a number 0-2147483647, got '1x'");
  EXPECT_EQ(parse_err("redis://h:6379x"), "redis URL 'redis://h:6379x': port must be a number 1-65535, got '6379x'");
  EXPECT_EQ(parse_err("redis://h?db=1"),
            "redis URL 'redis://h?db=1': query strings and fragments are not supported in redis:// URLs "
            "(write the db as /N)");
  parse_err("redis://h#frag");
  EXPECT_EQ(parse_err("redis://[::1]x"), "redis URL 'redis://[::1]x': unexpected 'x' after IPv6 address");
  EXPECT_EQ(parse_err("unix:///s.sock?db=2&x=1"),
            "redis URL 'unix:///s.sock?db=2&x=1': db must be a number 0-2147483647, got '2&x=1'");
  EXPECT_EQ(parse_err("unix:///s.sock?timeout=1"),
            "redis URL 'unix:///s.sock?timeout=1': the only query parameter supported is db=N");
  EXPECT_EQ(parse_err("unix:///s.sock?"), "redis URL 'unix:///s.sock?': the only query parameter supported is db=N");
  parse_err("unix:///s.sock#x");
}

TEST(ParseUrl, RejectsBadHost) {
  EXPECT_EQ(parse_err("redis://ho%73t"), "redis URL 'redis://ho%73t': invalid character '%' in host");
  EXPECT_EQ(parse_err("redis://h!"), "redis URL 'redis://h!': invalid character '!' in host");
  EXPECT_EQ(parse_err("redis://h]:1"), "redis URL 'redis://h]:1': invalid character ']' in host");
  EXPECT_EQ(parse_err("redis://[::1"), "redis URL 'redis://[::1': missing ']' after IPv6 address");
  EXPECT_EQ(parse_err("redis://::1:6380"),
            "redis URL 'redis://::1:6380': missing host");
  EXPECT_EQ(parse_err("redis://fe80::1:6380"),
            "redis URL 'redis://fe80::1:6380': an IPv6 address must be written in brackets, e.g. "
            "redis://[::1]:6379");
  EXPECT_EQ(parse_err("redis://[1:2:3]"), "redis URL 'redis://[1:2:3]': invalid IPv6 address '1:2:3'");
  parse_err("redis://[::1::2]");
  parse_err("redis://[12345::]");
  parse_err("redis://[g::1]");
  parse_err("redis://[1:2:3:4:5:6:7:8:9]");
  parse_err("redis://[::ffff:256.0.0.1]");
  parse_err("redis://[:1]");
  parse_err("redis://[1:]");
  parse_err("redis://[localhost]");
  EXPECT_EQ(parse_err("redis://[fe80::1%25eth0]"),
            "redis URL 'redis://[fe80::1%25eth0]': IPv6 zone identifiers are not supported");
  const std::string long_host(256, 'a');
  EXPECT_EQ(parse_err("redis://" + long_host),
            "redis URL 'redis://" + long_host + "': host name is longer than 255 characters");
  EXPECT_EQ(parse_ok("redis://" + long_host.substr(1) + ":1").host, long_host.substr(1));
}

TEST(ParseUrl, RejectsUnixRelativeOrMissingPath) {
  EXPECT_EQ(parse_err("unix://run/redis.sock"),
            "redis URL 'unix://run/redis.sock': socket path must be absolute, e.g. unix:///run/redis.sock");
  EXPECT_EQ(parse_err("unix://redis.sock"),
            "redis URL 'unix://redis.sock': socket path must be absolute, e.g. unix:///run/redis.sock");
  EXPECT_EQ(parse_err("unix://"), "redis URL 'unix://': missing socket path");
  EXPECT_EQ(parse_err("unix:///"), "redis URL 'unix:///': missing socket path");
  EXPECT_EQ(parse_err("unix://?db=1"), "redis URL 'unix://?db=1': missing socket path");
  EXPECT_EQ(parse_err("unix://:pw@"), "redis URL 'unix://:***@': missing socket path");
  EXPECT_EQ(parse_err("unix://:pw@run/redis.sock"),
            "redis URL 'unix://:***@run/redis.sock': socket path must be absolute, e.g. unix:///run/redis.sock");
}

TEST(ParseUrl, RejectsOverlongUnixPath) {
  std::string ok_path = "/" + std::string(106, 'a');  // 107 bytes: fits sun_path[108] with NUL
  EXPECT_EQ(parse_ok("unix://" + ok_path).path, ok_path);
  std::string long_path = "/" + std::string(107, 'a');
  EXPECT_NE(parse_err("unix://" + long_path).find("socket path is longer than the 107 bytes"), std::string::npos);
}

TEST(ParseUrl, RejectsSpacesAndControlCharacters) {
  EXPECT_EQ(parse_err(" redis://h"), "redis URL ' redis://h': contains a space or control character at offset 0");
  EXPECT_EQ(parse_err("redis://h "), "redis URL 'redis://h ': contains a space or control character at offset 9");
  EXPECT_EQ(parse_err("redis://h\t:1"),
            "redis URL 'redis://h\\x09:1': contains a space or control character at offset 9");
  EXPECT_EQ(parse_err("redis://h\n"), "redis URL 'redis://h\\x0A': contains a space or control character at offset 9");
  EXPECT_EQ(parse_err(std::string_view("redis://h\0x", 11)),
            "redis URL 'redis://h\\x00x': contains a space or control character at offset 9");
  EXPECT_EQ(parse_err("redis://h\x7f"), "redis URL 'redis://h\\x7F': contains a space or control character at offset 9");
  EXPECT_EQ(parse_err("unix:///my redis.sock"),
            "redis URL 'unix:///my redis.sock': contains a space or control character at offset 10");
  EXPECT_EQ(parse_err("redis://:pass word@h"),
            "redis URL 'redis://:***@h': contains a space or control character at offset 13");
}

TEST(ParseUrl, RejectsMalformedPercentEscapes) {
  EXPECT_EQ(parse_err("redis://:abc%4@h"), "redis URL 'redis://:***@h': malformed %-escape in password");
  EXPECT_EQ(parse_err("redis://:abc%@h"), "redis URL 'redis://:***@h': malformed %-escape in password");
  EXPECT_EQ(parse_err("redis://:%zz@h"), "redis URL 'redis://:***@h': malformed %-escape in password");
  EXPECT_EQ(parse_err("redis://:%4g@h"), "redis URL 'redis://:***@h': malformed %-escape in password");
  EXPECT_EQ(parse_err("redis://us%er:pw@h"), "redis URL 'redis://us%er:***@h': malformed %-escape in user name");
  EXPECT_EQ(parse_err("unix://:%x@/s.sock"), "redis URL 'unix://:***@/s.sock': malformed %-escape in password");
}

TEST(ParseUrl, RejectsUserinfoWithoutColon) {
  EXPECT_EQ(parse_err("redis://secretword@h"),
            "redis URL 'redis://***@h': credentials must be written ':password@' or 'user:password@'");
}

// ---- password masking ------------------------------------------------------------------------

TEST(ParseUrl, MessagesNeverContainThePassword) {
  const std::string pw = "Zq9xPW";
  const std::string bad_urls[] = {
      "redis://:" + pw + "@h:99999",
      "redis://alice:" + pw + "@h:0/1",
      "redis://alice:" + pw + "@h:6379/-1",
      "redis://alice:" + pw + "@h:6379/x",
      "redis://alice:" + pw + "@",
      "redis://alice:" + pw + "@[::1",
      "redis://alice:" + pw + "@h?db=1",
      "redis://alice:" + pw + "%zz@h",
      "redis://alice:" + pw + "@h!",
      "redis://alice:" + pw + " @h",
      "redis://alice:" + pw + "\n@h",
      "redis://alice:a@" + pw + "@bad host",
      "redis://alice:a/" + pw + "@h:0",
      "redis://" + pw + "@h",
      "http://alice:" + pw + "@h",
      "rediss://:" + pw + "@h",
      "redis-cluster://:" + pw + "@h1,h2",
      "alice:" + pw + "@h:6379",
      ":" + pw + "@h://x",
      "redis:/:" + pw + "@h",
      "unix://:" + pw + "@relative.sock",
      "unix://alice:" + pw + "@/s.sock?db=x",
      "unix://:" + pw + "@",
      "unix://alice:" + pw + "@/a@/s.sock?db=-1",
  };
  for (const auto& url : bad_urls) {
    std::string msg = parse_err(url);
    EXPECT_FALSE(msg.empty()) << url;
    EXPECT_EQ(msg.find(pw), std::string::npos) << "password leaked for " << url << ": " << msg;
    EXPECT_NE(msg.find("***"), std::string::npos) << "no mask for " << url << ": " << msg;
  }
}

TEST(ParseUrl, DecodedPasswordNotInMessageEither) {
  // "%53ecret" decodes to "Secret"; neither form may appear.
  std::string msg = parse_err("redis://u:%53ecret@h:70000");
  EXPECT_EQ(msg, "redis URL 'redis://u:***@h:70000': port must be 1-65535");
  EXPECT_EQ(msg.find("ecret"), std::string::npos);
}

TEST(ParseUrl, UnixPathWithAtIsNotMasked) {
  // No userinfo in unix:///..., so an '@' in the path is not a credential.
  EXPECT_EQ(parse_err("unix:///tmp/a@b.sock?db=x"),
            "redis URL 'unix:///tmp/a@b.sock?db=x': db must be a number 0-2147483647, got 'x'");
}

}  // namespace
