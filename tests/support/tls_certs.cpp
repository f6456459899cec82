#include "support/tls_certs.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "support/process.hpp"

namespace dlock::test {

namespace {

std::string openssl_binary() {
  const char* env = std::getenv("DLOCK_OPENSSL");
  return env != nullptr && *env != '\0' ? env : "openssl";
}

std::string make_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/dlock-tls-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp(" + tmpl + "): " + std::strerror(errno));
  }
  return tmpl;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

const char* const kKeyArgs[] = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};

}  // namespace

void TlsCerts::openssl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{openssl_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = run_command(argv);
  if (r.exit_code != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    throw std::runtime_error("openssl failed (exit " + std::to_string(r.exit_code) + "): " + cmd + "\n" + r.out + r.err);
  }
}

CertPair TlsCerts::signed_cert(const std::string& name, const std::string& subject, const std::string& extensions,
                               const std::string& days) {
  CertPair p{dir_ + "/" + name + ".crt", dir_ + "/" + name + ".key"};
  const std::string csr = dir_ + "/" + name + ".csr";
  const std::string ext = dir_ + "/" + name + ".ext";
  write_file(ext, extensions);
  std::vector<std::string> req{"req"};
  req.insert(req.end(), std::begin(kKeyArgs), std::end(kKeyArgs));
  req.insert(req.end(), {"-keyout", p.key, "-out", csr, "-subj", subject});
  openssl(req);
  openssl({"x509", "-req", "-in", csr, "-CA", ca_file, "-CAkey", dir_ + "/ca.key", "-CAcreateserial",
           "-CAserial", dir_ + "/ca.srl", "-out", p.cert, "-days", days, "-extfile", ext});
  return p;
}

TlsCerts::TlsCerts() : dir_(make_temp_dir()) {
  try {
    auto make_ca = [&](const std::string& name, const std::string& cn) {
      std::vector<std::string> req{"req", "-x509"};
      req.insert(req.end(), std::begin(kKeyArgs), std::end(kKeyArgs));
      req.insert(req.end(), {"-keyout", dir_ + "/" + name + ".key", "-out", dir_ + "/" + name + ".crt", "-days",
                             "2", "-subj", "/CN=" + cn});
      openssl(req);
      return dir_ + "/" + name + ".crt";
    };
    ca_file = make_ca("ca", "dlock test CA");
    wrong_ca_file = make_ca("wrong-ca", "dlock unrelated CA");

    const std::string server_ext =
        "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n";
    server = signed_cert("server", "/CN=localhost", server_ext, "2");
    // OpenSSL 3.0 takes a negative -days: notAfter = now - 1 day, so the certificate is
    // expired whatever the clock says, with no fake time needed.
    expired = signed_cert("expired", "/CN=localhost", server_ext, "-1");
    other_name = signed_cert("other-name", "/CN=other.example",
                             "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                             "subjectAltName=DNS:other.example\n",
                             "2");
    client = signed_cert("client", "/CN=dlock-test-client",
                         "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n", "2");

    // capath: the CA under <subject hash>.0, as `openssl rehash` would name it.
    ca_dir = dir_ + "/capath";
    std::filesystem::create_directory(ca_dir);
    CommandResult hash = run_command({openssl_binary(), "x509", "-noout", "-subject_hash", "-in", ca_file});
    if (hash.exit_code != 0 || hash.out.size() < 8) throw std::runtime_error("openssl x509 -subject_hash: " + hash.err);
    std::filesystem::copy_file(ca_file, ca_dir + "/" + hash.out.substr(0, 8) + ".0");
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

TlsCerts::~TlsCerts() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace dlock::test
