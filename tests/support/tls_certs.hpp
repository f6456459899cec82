#pragma once
// Certificates for TLS tests, made at test time with the `openssl` command in a temp dir
// (removed by the destructor). Nothing is checked in: a checked-in certificate expires and
// then fails every test for a reason unrelated to the code.
//
// EC P-256 keys (fast to generate on a loaded machine), PEM, unencrypted.

#include <string>
#include <vector>

namespace dlock::test {

struct CertPair {
  std::string cert;  // PEM certificate path
  std::string key;   // PEM private key path
};

class TlsCerts {
 public:
  // Generates everything below; throws std::runtime_error (with openssl's output) on failure.
  // The `openssl` binary is found in PATH, or taken from $DLOCK_OPENSSL.
  TlsCerts();
  ~TlsCerts();  // removes the directory. Never throws.
  TlsCerts(const TlsCerts&) = delete;
  TlsCerts& operator=(const TlsCerts&) = delete;

  const std::string& dir() const { return dir_; }

  std::string ca_file;        // the test CA: signs server, expired, other_name and client
  std::string ca_dir;         // a directory holding the CA under its subject hash (capath)
  std::string wrong_ca_file;  // an unrelated CA that signed nothing used here
  CertPair server;      // CN localhost, SAN DNS:localhost + IP:127.0.0.1; valid for 2 days
  CertPair expired;     // like server, but its notAfter is a day in the past
  CertPair other_name;  // SAN DNS:other.example only: a name mismatch for 127.0.0.1
  CertPair client;      // CN dlock-test-client, extendedKeyUsage clientAuth

 private:
  void openssl(const std::vector<std::string>& args) const;
  CertPair signed_cert(const std::string& name, const std::string& subject, const std::string& extensions,
                       const std::string& days);

  std::string dir_;
};

}  // namespace dlock::test
