// dlock/url.hpp — where the Redis server is: parsing connection URLs.
//
// Defines:
//   dlock::ServerAddress  a parsed server location with credentials and database
//   dlock::parse_url      redis://[[user]:password@]host[:port][/db], the same with rediss://
//                         (TLS) and TLS query parameters, and unix:///path.sock
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/options.hpp"
#include "dlock/result.hpp"

namespace dlock {

struct ServerAddress {
  enum class Transport { tcp, unix_socket };
  Transport transport = Transport::tcp;
  std::string host = "127.0.0.1";  // tcp: host name or IP literal (IPv6 without brackets)
  std::uint16_t port = 6379;       // tcp only
  std::string path;                // unix_socket only: the socket's file path
  std::string user;                // empty: AUTH with password alone (the "default" user);
                                   // set: "AUTH user password", even with an empty password
  std::string password;            // empty, and no user: no AUTH
  int db = 0;                      // SELECT index, 0..(2^31-1)
  TlsOptions tls;                  // rediss://: tls.enabled and the URL's TLS parameters

  // "host:port", "rediss://host:port" with TLS, or the socket path: for messages. Never
  // contains the password.
  std::string display() const;
};

// parse_url()
//
// Accepted forms:
//   redis://host                         port 6379, db 0
//   redis://host:port/db
//   redis://:password@host               password only (default user)
//   redis://user:password@host:port/3    ACL user
//   redis://[::1]:6380                   IPv6 literal in brackets
//   unix:///run/redis.sock               unix domain socket
//   unix:///run/redis.sock?db=2          with a database
//   rediss://host:6380/0                 TLS, verified against the system's trust store
//   rediss://host?ca=/etc/ca.pem&cert=/etc/c.pem&key=/etc/c.key&sni=redis.internal
//
// TLS query parameters (rediss:// only; each at most once; values percent-decoded, and an '@'
// in a value must be written %40): ca (TlsOptions::ca_file), capath (ca_path), cert
// (cert_file), key (key_file), sni (server_name), insecure_skip_verify=true|false (DANGER:
// accepts any certificate, see TlsOptions). cert without key (or key without cert), and
// insecure_skip_verify=true together with ca, capath or sni, are errors. Files are not
// opened here: the Client opens them and rejects unreadable ones with errc::invalid_argument.
//
// User and password are percent-decoded. Anything else (another scheme, empty host, port 0 or
// above 65535, non-numeric port or db, trailing garbage, a relative unix path, an unbracketed
// IPv6 address, a numeric host that is not plain dotted-decimal IPv4 such as 010.0.0.1) is
// errc::invalid_argument with a message that quotes the URL with its password masked.
// Never blocks; does no name resolution.
Result<ServerAddress> parse_url(std::string_view url);

}  // namespace dlock
