#include "io/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <asio/ip/address.hpp>
#include <asio/ssl/context.hpp>
#include <asio/ssl/error.hpp>
#include <filesystem>

#include "dlock/error.hpp"

namespace dlock::detail {

namespace {

Error tls_error(std::string what) { return Error(errc::invalid_argument, "TLS: " + std::move(what)); }

// The newest OpenSSL error as text, cleared from the thread's queue.
std::string openssl_reason(const std::error_code& ec) {
  std::string msg = ec ? ec.message() : std::string();
  ERR_clear_error();
  return msg.empty() ? "unknown OpenSSL error" : msg;
}

// A file that OpenSSL would fail to read gets a message naming the file and the cause
// (missing, a directory, unreadable) rather than OpenSSL's "no such file" without a name.
Result<void> check_file(const char* what, const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return tls_error(std::string(what) + " '" + path + "' does not exist");
  if (!std::filesystem::is_regular_file(st)) return tls_error(std::string(what) + " '" + path + "' is not a file");
  return {};
}

bool is_ip_literal(const std::string& name) {
  std::error_code ec;
  (void)asio::ip::make_address(name, ec);
  return !ec;
}

}  // namespace

std::string verified_name(const TlsOptions& tls, const std::string& host) {
  return tls.server_name.empty() ? host : tls.server_name;
}

Result<void> resolve_tls(ServerAddress& address, const TlsOptions& overrides) {
  TlsOptions& t = address.tls;
  auto take = [](std::string& into, const std::string& from) {
    if (!from.empty()) into = from;
  };
  take(t.ca_file, overrides.ca_file);
  take(t.ca_path, overrides.ca_path);
  take(t.cert_file, overrides.cert_file);
  take(t.key_file, overrides.key_file);
  take(t.server_name, overrides.server_name);
  t.enabled = t.enabled || overrides.enabled;
  t.insecure_skip_verify = t.insecure_skip_verify || overrides.insecure_skip_verify;

  const bool any_setting = !t.ca_file.empty() || !t.ca_path.empty() || !t.cert_file.empty() ||
                           !t.key_file.empty() || !t.server_name.empty() || t.insecure_skip_verify;
  if (!t.enabled) {
    if (any_setting) {
      return tls_error("TLS settings are given but TLS is off (use a rediss:// URL or set tls.enabled)");
    }
    return {};
  }
  if (address.transport == ServerAddress::Transport::unix_socket) {
    return tls_error("not supported over a unix socket (Redis serves TLS on its tls-port only)");
  }
  if (t.cert_file.empty() != t.key_file.empty()) {
    return tls_error("a client certificate needs both cert_file and key_file");
  }
  if (t.insecure_skip_verify && (!t.ca_file.empty() || !t.ca_path.empty() || !t.server_name.empty())) {
    return tls_error("insecure_skip_verify cannot be combined with ca_file, ca_path or server_name: "
                     "they would not be checked");
  }
  if (t.server_name.find('\0') != std::string::npos) return tls_error("server_name contains a NUL byte");
  auto ctx = make_tls_context(t);
  if (!ctx) return ctx.error();
  return {};
}

Result<std::unique_ptr<asio::ssl::context>> make_tls_context(const TlsOptions& tls) {
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  // TLS 1.0/1.1 are broken and Redis 6+ offers 1.2 and 1.3 by default.
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  std::error_code ec;
  if (tls.insecure_skip_verify) {
    ctx->set_verify_mode(asio::ssl::verify_none);
  } else {
    ctx->set_verify_mode(asio::ssl::verify_peer);
    if (!tls.ca_file.empty()) {
      if (auto ok = check_file("CA file", tls.ca_file); !ok) return ok.error();
      if (ctx->load_verify_file(tls.ca_file, ec); ec) {
        return tls_error("cannot load CA file '" + tls.ca_file + "': " + openssl_reason(ec));
      }
    }
    if (!tls.ca_path.empty()) {
      std::error_code fs_ec;
      if (!std::filesystem::is_directory(tls.ca_path, fs_ec)) {
        return tls_error("CA directory '" + tls.ca_path + "' is not a directory");
      }
      if (ctx->add_verify_path(tls.ca_path, ec); ec) {
        return tls_error("cannot use CA directory '" + tls.ca_path + "': " + openssl_reason(ec));
      }
    }
    // Without a CA of its own, trust what the system trusts (managed Redis services use
    // certificates from public CAs).
    if (tls.ca_file.empty() && tls.ca_path.empty()) {
      if (ctx->set_default_verify_paths(ec); ec) {
        return tls_error("cannot load the system's trust store: " + openssl_reason(ec));
      }
    }
  }
  if (!tls.cert_file.empty()) {
    if (auto ok = check_file("certificate file", tls.cert_file); !ok) return ok.error();
    if (auto ok = check_file("key file", tls.key_file); !ok) return ok.error();
    if (ctx->use_certificate_chain_file(tls.cert_file, ec); ec) {
      return tls_error("cannot load client certificate '" + tls.cert_file + "': " + openssl_reason(ec));
    }
    if (ctx->use_private_key_file(tls.key_file, asio::ssl::context::pem, ec); ec) {
      if (ec.category() == asio::error::get_ssl_category() &&
          ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
        ERR_clear_error();
        return tls_error("private key '" + tls.key_file + "' does not match certificate '" + tls.cert_file + "'");
      }
      return tls_error("cannot load private key '" + tls.key_file + "' (PEM, unencrypted): " + openssl_reason(ec));
    }
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      ERR_clear_error();
      return tls_error("private key '" + tls.key_file + "' does not match certificate '" + tls.cert_file + "'");
    }
  }
  return ctx;
}

Result<void> configure_session(SSL* ssl, const TlsOptions& tls, const std::string& host) {
  const std::string name = verified_name(tls, host);
  const bool ip = is_ip_literal(name);
  if (!ip && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) {
    ERR_clear_error();
    return Error(errc::invalid_argument, "TLS: cannot use '" + name + "' as server name (SNI)");
  }
  if (tls.insecure_skip_verify) return {};
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) : SSL_set1_host(ssl, name.c_str());
  if (ok != 1) {
    ERR_clear_error();
    return Error(errc::invalid_argument, "TLS: cannot verify against server name '" + name + "'");
  }
  return {};
}

std::string describe_tls_failure(SSL* ssl, const std::error_code& ec, const TlsOptions& tls,
                                 const std::string& host) {
  const long verify = ssl != nullptr ? SSL_get_verify_result(ssl) : X509_V_OK;
  std::string out;
  if (!tls.insecure_skip_verify && verify != X509_V_OK) {
    out = "server certificate verification failed: ";
    out += X509_verify_cert_error_string(verify);
    switch (verify) {
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        out += " (the certificate is not for '" + verified_name(tls, host) +
               "'; set sni= / TlsOptions::server_name to the name it carries)";
        break;
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        out += tls.ca_file.empty() && tls.ca_path.empty()
                   ? " (not signed by a CA the system trusts; set ca= / TlsOptions::ca_file)"
                   : " (not signed by the configured CA)";
        break;
      default:
        break;
    }
    ERR_clear_error();
    return out;
  }
  out = openssl_reason(ec);
  if (ec.category() == asio::error::get_ssl_category()) {
    const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
    if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED && tls.cert_file.empty()) {
      out += " (the server requires a client certificate: set cert= and key=)";
    } else if (reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE && tls.cert_file.empty()) {
      out += " (the server may require a client certificate: set cert= and key=)";
    } else if (reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE || reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA) {
      out += " (the server refused the client certificate)";
    } else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG) {
      out += " (is this a TLS port?)";
    }
  }
  return out;
}

}  // namespace dlock::detail
