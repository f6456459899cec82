// Integration tests of TLS (rediss:// URLs, ClientOptions::tls) against Debian's redis-server
// listening on a tls-port, with certificates made by `openssl` at test time (TlsCerts).
//
// The server keeps its plain port for the harness (readiness probe, RawConnection); dlock
// clients only ever talk to the TLS port, which speaks nothing but TLS (PlainUrlOnTlsPortFails
// shows it), so a client that works there works over TLS.

#include <gtest/gtest.h>

#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/mutex.hpp"
#include "support/cli_binary.hpp"
#include "support/lock_helpers.hpp"
#include "support/process.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/tls_certs.hpp"
#include "support/wait.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::CertPair;
using dlock::test::CommandResult;
using dlock::test::eventually;
using dlock::test::key_of;
using dlock::test::ms_since;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::RedisServerOptions;
using dlock::test::RedisTlsOptions;
using dlock::test::SteadyClock;
using dlock::test::TlsCerts;
using std::chrono::milliseconds;

using dlock::test::scaled;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using dlock::test::cli_binary;

class TlsTest : public ::testing::Test {
 protected:
  // One set of certificates for the whole suite: generating them is the slow part.
  static void SetUpTestSuite() { certs_ = std::make_unique<TlsCerts>(); }
  static void TearDownTestSuite() { certs_.reset(); }

  const TlsCerts& certs() const { return *certs_; }

  // A server whose TLS port presents `cert` (signed by the test CA unless stated otherwise).
  void start_server(const CertPair& cert, bool auth_clients = false) {
    RedisServerOptions o;
    o.tls = RedisTlsOptions{cert.cert, cert.key, certs_->ca_file, auth_clients};
    server.emplace(o);
    raw.emplace(*server);
  }

  std::string url_with_ca() const { return server->tls_url() + "?ca=" + certs_->ca_file; }

  // Options that fail fast: a handshake that cannot succeed must not hold a test for seconds.
  static dlock::ClientOptions options() {
    dlock::ClientOptions o;
    o.connect_timeout = scaled(5000ms);
    o.command_timeout = scaled(5000ms);
    return o;
  }

  // The error of the first command on a new Client: the connection attempt's failure.
  static dlock::Error first_error(const std::string& url, dlock::ClientOptions o = options()) {
    dlock::Client c(url, std::move(o));
    auto r = c.command({"PING"});
    if (r.ok()) return dlock::Error{};
    return r.error();
  }

  static void expect_works(dlock::Client& c) {
    ASSERT_TRUE(c.ping(scaled(5000ms)).ok());
    auto set = c.command({"SET", "tls:k", "v"});
    ASSERT_TRUE(set.ok()) << set.error().what();
    auto get = c.command({"GET", "tls:k"});
    ASSERT_TRUE(get.ok()) << get.error().what();
    EXPECT_EQ(get->str(), "v");
  }

  void TearDown() override {
    raw.reset();
    server.reset();
  }

  std::optional<RedisServer> server;
  std::optional<RawConnection> raw;

 private:
  static std::unique_ptr<TlsCerts> certs_;
};

std::unique_ptr<TlsCerts> TlsTest::certs_;

// ------------------------------------------------------------------ verification succeeds

TEST_F(TlsTest, GoodChainWorks) {
  start_server(certs().server);
  dlock::Client c(url_with_ca(), options());
  expect_works(c);
  EXPECT_EQ(c.address().display(), "rediss://127.0.0.1:" + std::to_string(server->tls_port()));
  EXPECT_EQ(raw->cmd({"GET", "tls:k"}), "v") << "the TLS port and the plain port are one server";
}

TEST_F(TlsTest, CaDirectoryWorks) {
  start_server(certs().server);
  dlock::Client c(server->tls_url() + "?capath=" + certs().ca_dir, options());
  expect_works(c);
}

TEST_F(TlsTest, OptionsEnableTlsForARedisUrl) {
  start_server(certs().server);
  dlock::ClientOptions o = options();
  o.tls.enabled = true;
  o.tls.ca_file = certs().ca_file;
  dlock::Client c("redis://127.0.0.1:" + std::to_string(server->tls_port()), o);
  expect_works(c);
  EXPECT_EQ(c.address().display(), "rediss://127.0.0.1:" + std::to_string(server->tls_port()));
}

TEST_F(TlsTest, OptionsOverrideTheUrl) {
  start_server(certs().server);
  dlock::ClientOptions o = options();
  o.tls.ca_file = certs().ca_file;  // replaces the URL's wrong CA
  dlock::Client c(server->tls_url() + "?ca=" + certs().wrong_ca_file, o);
  expect_works(c);
}

// ------------------------------------------------------------------ verification fails

TEST_F(TlsTest, PlainUrlOnTlsPortFails) {
  start_server(certs().server);
  auto e = first_error("redis://127.0.0.1:" + std::to_string(server->tls_port()));
  EXPECT_TRUE(e.code == dlock::errc::connection || e.code == dlock::errc::timeout) << e.what();
}

TEST_F(TlsTest, TlsUrlOnPlainPortFailsWithAHint) {
  start_server(certs().server);
  // Redis reads the ClientHello as an unfinished inline command and never answers: the
  // handshake runs into connect_timeout, kept short here since timing out is the outcome.
  dlock::ClientOptions o = options();
  o.connect_timeout = scaled(500ms);
  auto e = first_error("rediss://127.0.0.1:" + std::to_string(server->port()) + "?ca=" + certs().ca_file, o);
  EXPECT_EQ(e.code, dlock::errc::connection) << e.what();
  EXPECT_TRUE(contains(e.message, "TLS handshake with rediss://127.0.0.1:" + std::to_string(server->port()) +
                                      " timed out"))
      << e.what();
  EXPECT_TRUE(contains(e.message, "is this a TLS port?")) << e.what();
}

TEST_F(TlsTest, WrongCaFails) {
  start_server(certs().server);
  auto e = first_error(server->tls_url() + "?ca=" + certs().wrong_ca_file);
  EXPECT_EQ(e.code, dlock::errc::connection) << e.what();
  // Which of the two depends on whether the server sends its CA along with its certificate
  // (Redis does, from its tls-ca-cert-file).
  EXPECT_TRUE(contains(e.message, "server certificate verification failed: self-signed certificate in certificate chain") ||
              contains(e.message, "server certificate verification failed: unable to get local issuer certificate"))
      << e.what();
  EXPECT_TRUE(contains(e.message, "not signed by the configured CA")) << e.what();
}

TEST_F(TlsTest, SystemTrustStoreDoesNotTrustTheTestCa) {
  start_server(certs().server);
  auto e = first_error(server->tls_url());
  EXPECT_EQ(e.code, dlock::errc::connection) << e.what();
  EXPECT_TRUE(contains(e.message, "server certificate verification failed")) << e.what();
  EXPECT_TRUE(contains(e.message, "set ca=")) << e.what();
}

TEST_F(TlsTest, ExpiredCertificateFails) {
  start_server(certs().expired);
  auto e = first_error(url_with_ca());
  EXPECT_EQ(e.code, dlock::errc::connection) << e.what();
  EXPECT_TRUE(contains(e.message, "server certificate verification failed: certificate has expired")) << e.what();
}

TEST_F(TlsTest, NameMismatchFailsAndSniFixesIt) {
  start_server(certs().other_name);
  auto e = first_error(url_with_ca());
  EXPECT_EQ(e.code, dlock::errc::connection) << e.what();
  EXPECT_TRUE(contains(e.message, "server certificate verification failed: IP address mismatch")) << e.what();
  EXPECT_TRUE(contains(e.message, "not for '127.0.0.1'")) << e.what();

  dlock::Client c(url_with_ca() + "&sni=other.example", options());
  expect_works(c);
}

TEST_F(TlsTest, WrongSniFails) {
  start_server(certs().server);  // names localhost and 127.0.0.1
  auto e = first_error(url_with_ca() + "&sni=other.example");
  EXPECT_EQ(e.code, dlock::errc::connection) << e.what();
  EXPECT_TRUE(contains(e.message, "server certificate verification failed: hostname mismatch")) << e.what();
  dlock::Client c(url_with_ca() + "&sni=localhost", options());
  expect_works(c);
}

TEST_F(TlsTest, ClientCertificateRequired) {
  start_server(certs().server, /*auth_clients=*/true);
  auto e = first_error(url_with_ca());
  EXPECT_EQ(e.code, dlock::errc::connection) << e.what();
  EXPECT_TRUE(contains(e.message, "certificate required")) << e.what();
  EXPECT_TRUE(contains(e.message, "set cert= and key=")) << e.what();

  dlock::Client c(url_with_ca() + "&cert=" + certs().client.cert + "&key=" + certs().client.key, options());
  expect_works(c);
}

TEST_F(TlsTest, InsecureSkipVerifyAcceptsAnyCertificate) {
  start_server(certs().expired);
  dlock::Client c(server->tls_url() + "?insecure_skip_verify=true", options());
  expect_works(c);
}

// ------------------------------------------------------------------ bad settings

TEST_F(TlsTest, BadFilesAndCombinationsAreInvalidArguments) {
  const std::string missing = certs().dir() + "/missing.pem";
  const std::string not_pem = certs().dir() + "/not.pem";
  std::ofstream(not_pem) << "this is not a certificate\n";
  auto ctor_error = [](const std::string& url, dlock::ClientOptions o = {}) -> std::string {
    try {
      dlock::Client c(url, std::move(o));
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), dlock::errc::invalid_argument) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << url;
    return {};
  };
  const std::string base = "rediss://127.0.0.1:1";
  EXPECT_TRUE(contains(ctor_error(base + "?ca=" + missing), "CA file '" + missing + "' does not exist"));
  EXPECT_TRUE(contains(ctor_error(base + "?ca=" + certs().dir()), "is not a file"));
  EXPECT_TRUE(contains(ctor_error(base + "?ca=" + not_pem), "cannot load CA file '" + not_pem + "'"));
  EXPECT_TRUE(contains(ctor_error(base + "?capath=" + missing), "CA directory '" + missing + "' is not a directory"));
  EXPECT_TRUE(contains(ctor_error(base + "?cert=" + certs().client.cert + "&key=" + missing),
                       "key file '" + missing + "' does not exist"));
  EXPECT_TRUE(contains(ctor_error(base + "?cert=" + not_pem + "&key=" + certs().client.key),
                       "cannot load client certificate '" + not_pem + "'"));
  EXPECT_TRUE(contains(ctor_error(base + "?cert=" + certs().client.cert + "&key=" + certs().server.key),
                       "does not match certificate"));
  EXPECT_TRUE(contains(ctor_error(base + "?cert=" + certs().client.cert), "cert given without key"));

  dlock::ClientOptions o;
  o.tls.cert_file = certs().client.cert;
  EXPECT_TRUE(contains(ctor_error(base, o), "a client certificate needs both cert_file and key_file"));
  o = {};
  o.tls.insecure_skip_verify = true;
  EXPECT_TRUE(contains(ctor_error(base + "?ca=" + certs().ca_file, o), "insecure_skip_verify cannot be combined"));
  o = {};
  o.tls.ca_file = certs().ca_file;
  EXPECT_TRUE(contains(ctor_error("redis://127.0.0.1:1", o), "TLS settings are given but TLS is off"));
  o = {};
  o.tls.enabled = true;
  EXPECT_TRUE(contains(ctor_error("unix:///tmp/none.sock", o), "not supported over a unix socket"));
}

// ------------------------------------------------------------------ locks over TLS

TEST_F(TlsTest, MutexAndReleaseNotificationOverTls) {
  start_server(certs().server);
  dlock::Client holder_client(url_with_ca(), options());
  dlock::Client waiter_client(url_with_ca(), options());
  dlock::Mutex holder(holder_client, "tls-lock");
  dlock::Mutex waiter(waiter_client, "tls-lock");

  auto held = holder.acquire(dlock::test::no_wait());
  ASSERT_TRUE(held.ok()) << held.error().what();
  EXPECT_EQ(raw->cmd({"GET", key_of("tls-lock")}), held->owner());

  // A recheck far away: only the release notification, which reaches the waiter through its
  // subscriber connection (TLS too), can wake it in time.
  const milliseconds recheck = scaled(30000ms);
  dlock::WaitOptions w;
  w.timeout = recheck;
  w.recheck_interval = recheck;
  auto fut = std::async(std::launch::async, [&] { return waiter.acquire(w); });
  ASSERT_TRUE(eventually(
      [&] {
        auto r = raw->cmd_array({"PUBSUB", "NUMSUB", key_of("tls-lock") + ":ch"});
        return r.size() == 2 && r[1] == "1";
      },
      scaled(5000ms)))
      << "the waiter never subscribed over TLS";
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(fut.wait_for(recheck), std::future_status::ready);
  auto lease = fut.get();
  ASSERT_TRUE(lease.ok()) << lease.error().what();
  EXPECT_LT(ms_since(t0), recheck / 3) << "woken by the recheck, not by the notification";
  EXPECT_EQ(raw->cmd({"GET", key_of("tls-lock")}), lease->owner());
  ASSERT_TRUE(lease->release().ok());
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("tls-lock")}), 0);
}

TEST_F(TlsTest, ReconnectsWithANewSessionAfterARestart) {
  start_server(certs().server);
  dlock::Client c(url_with_ca(), options());
  expect_works(c);
  raw.reset();
  server->restart();
  raw.emplace(*server);
  // Commands fail while the old session is dead; the client reconnects on its own.
  ASSERT_TRUE(eventually([&] { return c.command({"SET", "tls:after", "1"}).ok(); }, scaled(10000ms), 50ms));
  EXPECT_EQ(raw->cmd({"GET", "tls:after"}), "1");
}

// ------------------------------------------------------------------ the CLI

TEST_F(TlsTest, CliAcquireAndReleaseOverTls) {
  const std::string cli = cli_binary();
  ASSERT_FALSE(cli.empty()) << "build the dlock_cli target (build/cli/dlock) or set DLOCK_CLI";
  start_server(certs().server);
  const std::vector<std::pair<std::string, std::string>> env = {{"DLOCK_REDIS_URL", ""}, {"DLOCK_OWNER", ""}};

  CommandResult acquired =
      dlock::test::run_command({cli, "--redis", url_with_ca(), "acquire", "cli-tls", "--ttl", "30s"}, env, scaled(30000ms));
  ASSERT_EQ(acquired.exit_code, 0) << acquired.out << acquired.err;
  const auto at = acquired.out.find("DLOCK_OWNER=");
  ASSERT_NE(at, std::string::npos) << acquired.out;
  std::string owner = acquired.out.substr(at + 12, acquired.out.find('\n', at) - at - 12);
  if (!owner.empty() && (owner.front() == '\'' || owner.front() == '"')) owner = owner.substr(1, owner.size() - 2);
  EXPECT_EQ(raw->cmd({"GET", key_of("cli-tls")}), owner);

  CommandResult released =
      dlock::test::run_command({cli, "--redis", url_with_ca(), "release", "cli-tls", owner}, env, scaled(30000ms));
  EXPECT_EQ(released.exit_code, 0) << released.out << released.err;
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("cli-tls")}), 0);

  // A CA that did not sign the server's certificate: unreachable (69), and says why.
  CommandResult refused = dlock::test::run_command(
      {cli, "--redis", server->tls_url() + "?ca=" + certs().wrong_ca_file, "acquire", "cli-tls", "--ttl", "30s"}, env,
      scaled(30000ms));
  EXPECT_EQ(refused.exit_code, 69) << refused.out << refused.err;
  EXPECT_TRUE(contains(refused.err, "certificate verification failed")) << refused.err;
  EXPECT_EQ(raw->cmd_int({"EXISTS", key_of("cli-tls")}), 0);
}

}  // namespace
