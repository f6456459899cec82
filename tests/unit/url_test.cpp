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
            "redis URL 'http://host:6379': unsupported scheme 'http' (expected redis://, rediss:// or unix://)");
  EXPECT_NE(parse_err("redis-cluster://h1,h2").find("unsupported scheme 'redis-cluster'"), std::string::npos);
  EXPECT_NE(parse_err("redis-sentinel://host").find("unsupported scheme"), std::string::npos);
}

TEST(ParseUrl, RejectsMissingScheme) {
  EXPECT_EQ(parse_err("localhost:6379"),
            "redis URL 'localhost:6379': missing scheme (expected redis://, rediss:// or unix://)");
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
            "redis URL 'redis://::1:6380': an IPv6 address must be written in brackets, e.g. "
            "redis://[::1]:6379");
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

// The resolver reads these as octal, hex or a single number (getaddrinfo takes inet_aton's
// forms): 010.0.0.1 would connect to 8.0.0.1.
TEST(ParseUrl, RejectsNumericHostsThatAreNotPlainDottedDecimal) {
  const std::string why =
      "' is not a plain dotted-decimal IPv4 address (write four numbers 0-255 without leading zeros: "
      "resolvers read forms such as 010.0.0.1, 0x7f.1 or 2130706433 as octal, hex or one number)";
  EXPECT_EQ(parse_err("redis://010.0.0.1"), "redis URL 'redis://010.0.0.1': '010.0.0.1" + why);
  EXPECT_EQ(parse_err("redis://:pw@127.1:6380"), "redis URL 'redis://:***@127.1:6380': '127.1" + why);
  for (const char* host : {"0x7f.0.0.1", "0X7F.1", "2130706433", "127.0.0.01", "00", "1.2.65535", "0"}) {
    parse_err(std::string("redis://") + host);
  }
  // Names that merely contain digits (the resolver does not read them as numbers either), and
  // plain dotted-decimal addresses, are accepted.
  for (const char* host : {"10.0.0.1", "0.0.0.0", "255.255.255.255", "redis-01", "10.0.0.1.nip.io", "0x7f.example",
                           "db.0xcafeg", "1e100.net", "01.example", "123456789012", "1.2.3.4.5", "09.1.2.3",
                           "256.0.0.1"}) {
    EXPECT_EQ(parse_ok(std::string("redis://") + host).host, host);
  }
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
      "rediss://:" + pw + "@h?ca=",
      "rediss://:" + pw + "@h?cert=/c.pem",
      "rediss://alice:" + pw + "@h?ca=/x@y.pem",
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

// ---- rediss:// (TLS) ---------------------------------------------------------------------------

TEST(ParseUrlTls, PlainRedisHasTlsOff) {
  auto a = parse_ok("redis://h:6379");
  EXPECT_FALSE(a.tls.enabled);
  EXPECT_EQ(a.display(), "h:6379");
}

TEST(ParseUrlTls, RedissTurnsTlsOnWithDefaults) {
  auto a = parse_ok("rediss://cache.example.com:6380/2");
  EXPECT_EQ(a.transport, Transport::tcp);
  EXPECT_TRUE(a.tls.enabled);
  EXPECT_EQ(a.host, "cache.example.com");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 2);
  EXPECT_EQ(a.tls.ca_file, "");
  EXPECT_EQ(a.tls.ca_path, "");
  EXPECT_EQ(a.tls.cert_file, "");
  EXPECT_EQ(a.tls.key_file, "");
  EXPECT_EQ(a.tls.server_name, "");
  EXPECT_FALSE(a.tls.insecure_skip_verify);
  EXPECT_EQ(parse_ok("REDISS://h").tls.enabled, true);
  EXPECT_EQ(parse_ok("rediss://h").port, 6379);
}

TEST(ParseUrlTls, DisplaySaysTls) {
  EXPECT_EQ(parse_ok("rediss://h:6380").display(), "rediss://h:6380");
  EXPECT_EQ(parse_ok("rediss://[::1]:7000").display(), "rediss://[::1]:7000");
  EXPECT_EQ(parse_ok("rediss://:pw@h?ca=/ca.pem").display(), "rediss://h:6379");
}

TEST(ParseUrlTls, AllParameters) {
  auto a = parse_ok("rediss://alice:pw@10.0.0.7:6380/3?ca=/etc/ca.pem&capath=/etc/cas&cert=/etc/c.pem"
                    "&key=/etc/c.key&sni=redis.internal");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.password, "pw");
  EXPECT_EQ(a.host, "10.0.0.7");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 3);
  EXPECT_EQ(a.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(a.tls.ca_path, "/etc/cas");
  EXPECT_EQ(a.tls.cert_file, "/etc/c.pem");
  EXPECT_EQ(a.tls.key_file, "/etc/c.key");
  EXPECT_EQ(a.tls.server_name, "redis.internal");
  EXPECT_FALSE(a.tls.insecure_skip_verify);
}

TEST(ParseUrlTls, QueryWithoutDbOrPort) {
  auto a = parse_ok("rediss://h?sni=x.example");
  EXPECT_EQ(a.host, "h");
  EXPECT_EQ(a.port, 6379);
  EXPECT_EQ(a.tls.server_name, "x.example");
  EXPECT_EQ(parse_ok("rediss://h/?ca=/a").tls.ca_file, "/a");
  EXPECT_EQ(parse_ok("rediss://h:1/4?ca=/a").db, 4);
}

TEST(ParseUrlTls, ValuesArePercentDecoded) {
  auto a = parse_ok("rediss://h?ca=/my%20certs/ca%2Bx.pem&cert=/a%40b/c.pem&key=/k%26.pem");
  EXPECT_EQ(a.tls.ca_file, "/my certs/ca+x.pem");
  EXPECT_EQ(a.tls.cert_file, "/a@b/c.pem");
  EXPECT_EQ(a.tls.key_file, "/k&.pem");
  // '+' is a plus, not a space: these are paths, not form data.
  EXPECT_EQ(parse_ok("rediss://h?ca=/a+b.pem").tls.ca_file, "/a+b.pem");
}

TEST(ParseUrlTls, PasswordWithQuestionMarkStillParses) {
  // The userinfo ends at the last '@', so an unencoded '?' in the password is not a query.
  auto a = parse_ok("rediss://:p?w@h?ca=/ca.pem");
  EXPECT_EQ(a.password, "p?w");
  EXPECT_EQ(a.host, "h");
  EXPECT_EQ(a.tls.ca_file, "/ca.pem");
}

TEST(ParseUrlTls, InsecureSkipVerifyValues) {
  EXPECT_TRUE(parse_ok("rediss://h?insecure_skip_verify=true").tls.insecure_skip_verify);
  EXPECT_TRUE(parse_ok("rediss://h?insecure_skip_verify=1").tls.insecure_skip_verify);
  EXPECT_FALSE(parse_ok("rediss://h?insecure_skip_verify=false").tls.insecure_skip_verify);
  EXPECT_FALSE(parse_ok("rediss://h?insecure_skip_verify=0&ca=/ca.pem").tls.insecure_skip_verify);
  EXPECT_EQ(parse_err("rediss://h?insecure_skip_verify=yes"),
            "redis URL 'rediss://h?insecure_skip_verify=yes': insecure_skip_verify must be true or false, got 'yes'");
}

TEST(ParseUrlTls, RejectsBadCombinations) {
  EXPECT_EQ(parse_err("rediss://h?cert=/c.pem"),
            "redis URL 'rediss://h?cert=/c.pem': cert given without key (a client certificate needs both)");
  EXPECT_EQ(parse_err("rediss://h?key=/k.pem"),
            "redis URL 'rediss://h?key=/k.pem': key given without cert (a client certificate needs both)");
  for (const char* extra : {"ca=/ca.pem", "capath=/cas", "sni=x.example"}) {
    std::string url = std::string("rediss://h?insecure_skip_verify=true&") + extra;
    EXPECT_NE(parse_err(url).find("insecure_skip_verify=true cannot be combined with ca, capath or sni"),
              std::string::npos)
        << url;
  }
}

TEST(ParseUrlTls, RejectsMalformedQueries) {
  EXPECT_EQ(parse_err("rediss://h?"), "redis URL 'rediss://h?': empty query after '?'");
  EXPECT_EQ(parse_err("rediss://h?ca"), "redis URL 'rediss://h?ca': parameter 'ca' needs a value");
  EXPECT_EQ(parse_err("rediss://h?ca="), "redis URL 'rediss://h?ca=': parameter 'ca' needs a value");
  EXPECT_EQ(parse_err("rediss://h?ca=/a&ca=/b"), "redis URL 'rediss://h?ca=/a&ca=/b': parameter 'ca' given twice");
  EXPECT_EQ(parse_err("rediss://h?ca=/a&"), "redis URL 'rediss://h?ca=/a&': unknown parameter '' "
                                            "(expected ca, capath, cert, key, sni or insecure_skip_verify)");
  EXPECT_EQ(parse_err("rediss://h?db=2"), "redis URL 'rediss://h?db=2': unknown parameter 'db' "
                                          "(expected ca, capath, cert, key, sni or insecure_skip_verify)");
  EXPECT_EQ(parse_err("rediss://h?CA=/a").find("unknown parameter 'CA'") != std::string::npos, true);
  EXPECT_EQ(parse_err("rediss://h?ca=/a%2"), "redis URL 'rediss://h?ca=/a%2': malformed %-escape in parameter 'ca'");
  EXPECT_EQ(parse_err("rediss://h?sni=a%00b"), "redis URL 'rediss://h?sni=a%00b': parameter 'sni' contains a NUL byte");
  EXPECT_EQ(parse_err("rediss://h?ca=/a#x"), "redis URL 'rediss://h?ca=/a#x': fragments are not supported in redis URLs");
  // Host and port rules are those of redis://.
  EXPECT_EQ(parse_err("rediss://:6380?ca=/a"), "redis URL 'rediss://:6380?ca=/a': missing host");
  EXPECT_EQ(parse_err("rediss://h:0?ca=/a"), "redis URL 'rediss://h:0?ca=/a': port must be 1-65535");
}

TEST(ParseUrlTls, UnencodedAtInQueryIsRejectedAndMasked) {
  // The '@' in the value is taken as the end of the userinfo: rejected, never mis-parsed, and
  // the message masks everything before it rather than show a password.
  std::string msg = parse_err("rediss://:secret@h?ca=/a@b/ca.pem");
  EXPECT_EQ(msg, "redis URL 'rediss://:***@b/ca.pem': an '@' in a query parameter must be written %40");
  // Would otherwise parse as host "y.pem" with password "pw@h?ca=/x".
  EXPECT_EQ(parse_err("rediss://alice:pw@h?cert=/c.pem&key=/x@y.pem"),
            "redis URL 'rediss://alice:***@y.pem': an '@' in a query parameter must be written %40");
  // Encoded, it is a value like any other.
  EXPECT_EQ(parse_ok("rediss://:secret@h?ca=/a%40b/ca.pem").tls.ca_file, "/a@b/ca.pem");
}

TEST(ParseUrlTls, TlsParameterOnPlainRedisSaysRediss) {
  EXPECT_EQ(parse_err("redis://h?ca=/ca.pem"), "redis URL 'redis://h?ca=/ca.pem': TLS parameter 'ca' needs a rediss:// URL");
  EXPECT_EQ(parse_err("redis://h?insecure_skip_verify=true"),
            "redis URL 'redis://h?insecure_skip_verify=true': TLS parameter 'insecure_skip_verify' needs a rediss:// URL");
  EXPECT_NE(parse_err("unix:///s.sock?ca=/ca.pem").find("the only query parameter supported is db=N"), std::string::npos);
}

}  // namespace
