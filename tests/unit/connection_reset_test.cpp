// Unit tests for dlock::detail::Connection (src/io/connection.hpp) against a peer that says why
// it drops a connection and then resets it: its reason must reach the caller, not the write
// error that the reset leaves behind. A real socket on loopback; the test drives the event loop
// itself, so the order of events is fixed, not timed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dlock/options.hpp"
#include "dlock/url.hpp"
#include "io/command.hpp"
#include "io/connection.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::Reply;
using dlock::Result;
using dlock::detail::Command;
using dlock::detail::Connection;

// A listening TCP socket on a free loopback port; accepts by hand.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 4) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    port_ = ntohs(a.sin_port);
  }
  ~Listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }
  int accept() { return ::accept(fd_, nullptr, nullptr); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Sends `bytes`, then closes with SO_LINGER 0: the peer receives the bytes, then a reset.
void say_then_reset(int fd, const std::string& bytes) {
  if (!bytes.empty()) {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }
  linger l{1, 0};
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
  ::close(fd);
}

struct StateLog : Connection::Observer {
  std::optional<std::string> down_because;  // last_error() when the connection first went down
  void on_connection_state(Connection& c, Connection::State s) override {
    if (s == Connection::State::down && !down_because) down_because = c.last_error().what();
  }
};

// Runs the loop until `done` holds, for at most 5 s of loop time.
bool run_until(asio::io_context& io, const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (!done() && std::chrono::steady_clock::now() < end) {
    io.restart();
    io.run_one_for(50ms);
  }
  return done();
}

// A Connection, ready on a socket whose server side the test holds (`peer`), with the loop idle.
class ConnectionResetTest : public testing::Test {
 protected:
  void SetUp() override {
    options_.client_name.clear();  // no handshake commands: ready as soon as TCP is up
    auto address = dlock::parse_url("redis://127.0.0.1:" + std::to_string(server_.port()));
    ASSERT_TRUE(address.ok()) << address.error().what();
    conn_ = std::make_shared<Connection>(io_, *address, options_, &log_, false);
    conn_->start();
    ASSERT_TRUE(run_until(io_, [&] { return conn_->state() == Connection::State::ready; }));
    peer_ = server_.accept();
    ASSERT_GE(peer_, 0);
    io_.restart();
    io_.poll();  // the loop has nothing left to do: its read waits on the socket
  }
  void TearDown() override {
    if (conn_) conn_->close(dlock::Error(dlock::errc::connection, "test over"));
    io_.restart();
    io_.poll();
  }
  // Sends PING and runs the loop until its handler ran.
  Result<Reply> ping() {
    std::optional<Result<Reply>> got;
    conn_->send(Command{dlock::detail::format_command({"PING"}), [&](Result<Reply> r) { got = std::move(r); }});
    if (!run_until(io_, [&] { return got.has_value(); })) {
      return dlock::Error(dlock::errc::timeout, "PING got no answer");
    }
    return std::move(*got);
  }

  Listener server_;
  asio::io_context io_;
  dlock::ClientOptions options_;
  StateLog log_;
  std::shared_ptr<Connection> conn_;
  int peer_ = -1;
};

TEST_F(ConnectionResetTest, TheReasonSentBeforeAResetReachesTheCommandWhoseWriteMetTheReset) {
  // The peer answers and resets in a handler that runs after the loop last looked at the
  // socket and before the command's write: the write meets the reset, and only then does the
  // loop see the answer waiting to be read. This is how the server's TLS 1.3 alert
  // "certificate required" raced dlock's first command (TlsTest.ClientCertificateRequired).
  asio::post(io_, [&] { say_then_reset(peer_, "-ERR max number of clients reached\r\n"); });
  auto got = ping();
  ASSERT_TRUE(got.ok()) << "the command failed with '" << got.error().what()
                        << "' instead of getting the peer's answer";
  EXPECT_TRUE(got->is_error());
  EXPECT_EQ(got->str(), "ERR max number of clients reached");

  // With nothing more to read, the connection ends on the write's error.
  ASSERT_TRUE(run_until(io_, [&] { return log_.down_because.has_value(); }));
  EXPECT_NE(log_.down_because->find("write to"), std::string::npos) << *log_.down_because;
  EXPECT_NE(log_.down_because->find("reset"), std::string::npos) << *log_.down_because;
}

TEST_F(ConnectionResetTest, AResetWithNoReasonEndsTheConnectionOnTheWriteError) {
  asio::post(io_, [&] { say_then_reset(peer_, ""); });
  auto got = ping();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.code(), dlock::errc::connection);
  EXPECT_NE(got.error().what().find("reset"), std::string::npos) << got.error().what();
}

}  // namespace
