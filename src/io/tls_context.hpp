// TLS configuration: from TlsOptions to an OpenSSL context, and from OpenSSL's failures to
// messages that say what failed verification.
//
// Kept apart from the socket code (io/stream.*) so that the rules about certificates live in
// one place: which trust store, which client certificate, which name is verified.
#pragma once

#include <memory>
#include <string>
#include <system_error>

#include "dlock/options.hpp"
#include "dlock/result.hpp"
#include "dlock/url.hpp"

namespace asio::ssl {
class context;
}
using SSL = struct ssl_st;

namespace dlock::detail {

// resolve_tls()
//
// Merges `overrides` (ClientOptions::tls) into address.tls: a non-empty string field of
// `overrides` replaces the URL's, `enabled` and `insecure_skip_verify` are on when either
// sets them. Then checks the result, all errc::invalid_argument: TLS settings while TLS is off
// (they would be silently ignored), TLS over a unix socket, cert without key, insecure with a
// CA or server name, and every file: it builds a context once, so an unreadable CA, a bad
// certificate or a key that does not match it is reported here, at Client construction,
// instead of as an endless reconnect loop. Reads files; does not touch the network.
Result<void> resolve_tls(ServerAddress& address, const TlsOptions& overrides);

// A client context for `tls` (already resolved): TLS 1.2 or later, the trust store, the client
// certificate. Built for every connection attempt, so a reconnect picks up rotated files.
Result<std::unique_ptr<asio::ssl::context>> make_tls_context(const TlsOptions& tls);

// The name the server's certificate must carry: tls.server_name, else the URL's host.
std::string verified_name(const TlsOptions& tls, const std::string& host);

// Sets SNI (not for an IP literal, as RFC 6066 requires) and the name check on one session,
// unless verification is off. Uses OpenSSL's own host check (SSL_set1_host) so that a
// mismatch is reported as X509_V_ERR_HOSTNAME_MISMATCH instead of an anonymous failure.
Result<void> configure_session(SSL* ssl, const TlsOptions& tls, const std::string& host);

// What went wrong in a failed TLS handshake (or a read failed by a TLS alert): the
// certificate verification error when there is one, with a hint at the option to fix.
std::string describe_tls_failure(SSL* ssl, const std::error_code& ec, const TlsOptions& tls,
                                 const std::string& host);

}  // namespace dlock::detail
