// Unit tests for dlock::detail::Connection (src/io/connection.hpp) against a peer the test plays
// by hand on a real loopback socket: a peer that says why it drops a connection and then resets
// it (its reason must reach the caller, not the write error that the reset leaves behind); a
// subscriber's unsubscribe answered with an error; the timeout after a long WAIT; the PING of
// an idle connection (ClientOptions::ping_interval) to a peer that stopped answering. The test
// drives the event loop itself, so the order of events is fixed, not timed.
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
#include <utility>
#include <vector>

#include "dlock/options.hpp"
#include "dlock/url.hpp"
#include "io/command.hpp"
#include "io/connection.hpp"
#include "support/loopback_listener.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::Reply;
using dlock::Result;
using dlock::detail::Command;
using dlock::detail::Connection;

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
  std::vector<std::string> pushes;
  void on_connection_state(Connection& c, Connection::State s) override {
    if (s == Connection::State::down && !down_because) down_because = c.last_error().what();
  }
  void on_push(Connection&, Reply&& r) override { pushes.push_back(r.to_string()); }
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
  virtual bool subscriber() const { return false; }
  void SetUp() override {
    options_.client_name.clear();  // no handshake commands: ready as soon as TCP is up
    options_.command_timeout = 300ms;
    auto address = dlock::parse_url("redis://127.0.0.1:" + std::to_string(server_.port()));
    ASSERT_TRUE(address.ok()) << address.error().what();
    conn_ = std::make_shared<Connection>(io_, *address, options_, &log_, subscriber());
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

  dlock::test::LoopbackListener server_{4};
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

// A command written after a WAIT is timed by its own deadline once the WAIT is answered, not by
// the WAIT's longer one (the timer stayed armed for the WAIT's).
TEST_F(ConnectionResetTest, ACommandAfterAnAnsweredWaitIsTimedByItsOwnDeadline) {
  std::optional<Result<Reply>> wait_reply, get_reply;
  conn_->send(Command{dlock::detail::format_command({"WAIT", "1", "4000"}),
                      [&](Result<Reply> r) { wait_reply = std::move(r); }, 4000ms});
  io_.restart();
  io_.poll();  // written
  ASSERT_EQ(::send(peer_, ":0\r\n", 4, 0), 4);
  ASSERT_TRUE(run_until(io_, [&] { return wait_reply.has_value(); }));
  ASSERT_TRUE(wait_reply->ok());
  const auto t0 = std::chrono::steady_clock::now();
  conn_->send(Command{dlock::detail::format_command({"GET", "k"}), [&](Result<Reply> r) { get_reply = std::move(r); }});
  ASSERT_TRUE(run_until(io_, [&] { return get_reply.has_value(); }));  // the peer never answers it
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(get_reply->ok());
  EXPECT_EQ(get_reply->code(), dlock::errc::timeout) << get_reply->error().what();
  // command_timeout is 300 ms; the WAIT allowed 4,000.
  EXPECT_LT(took, 2500ms) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// Reads what the client wrote to the peer so far (the loop has flushed it).
std::string drain(int fd) {
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}

class SubscriberRepliesTest : public ConnectionResetTest {
 protected:
  bool subscriber() const override { return true; }
  // SSUBSCRIBE b, SUNSUBSCRIBE a (no handler, as Notifier sends it), SSUBSCRIBE c; the peer
  // answers with `answers`. Returns the two subscribes' replies.
  std::pair<std::string, std::string> run(const std::string& answers) {
    std::optional<Result<Reply>> b, c;
    conn_->send(Command{dlock::detail::format_command({"SSUBSCRIBE", "b"}), [&](Result<Reply> r) { b = std::move(r); }});
    conn_->send(Command{dlock::detail::format_command({"SUNSUBSCRIBE", "a"}), nullptr});
    conn_->send(Command{dlock::detail::format_command({"SSUBSCRIBE", "c"}), [&](Result<Reply> r) { c = std::move(r); }});
    io_.restart();
    io_.poll();
    const std::string written = drain(peer_);
    // A PING follows the unsubscribe, before the next command.
    EXPECT_EQ(written, dlock::detail::format_command({"SSUBSCRIBE", "b"}) +
                           dlock::detail::format_command({"SUNSUBSCRIBE", "a"}) +
                           dlock::detail::format_command({"PING"}) + dlock::detail::format_command({"SSUBSCRIBE", "c"}));
    EXPECT_EQ(::send(peer_, answers.data(), answers.size(), 0), static_cast<ssize_t>(answers.size()));
    EXPECT_TRUE(run_until(io_, [&] { return b.has_value() && c.has_value(); }));
    auto text = [](const std::optional<Result<Reply>>& r) -> std::string {
      if (!r) return "(no answer)";
      return r->ok() ? (*r)->to_string() : "error: " + r->error().what();
    };
    return {text(b), text(c)};
  }
};

// The server refuses the unsubscribe (its slot moved away: MOVED, or CLUSTERDOWN): that error is
// the unsubscribe's, not the next subscribe's, and the connection stays up.
TEST_F(SubscriberRepliesTest, AnUnsubscribeRefusedWithAnErrorIsNotTakenForTheNextReply) {
  const auto [b, c] = run("*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:1\r\n"
                          "-MOVED 15495 127.0.0.1:7392\r\n"
                          "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
                          "*3\r\n$10\r\nssubscribe\r\n$1\r\nc\r\n:2\r\n");
  EXPECT_EQ(b, Reply::make_array({Reply::make_string("ssubscribe"), Reply::make_string("b"), Reply::make_integer(1)}).to_string());
  EXPECT_EQ(c, Reply::make_array({Reply::make_string("ssubscribe"), Reply::make_string("c"), Reply::make_integer(2)}).to_string());
  EXPECT_EQ(conn_->state(), Connection::State::ready) << conn_->last_error().what();
  EXPECT_TRUE(log_.pushes.empty());
}

// The usual answer: a push, which goes to the observer; the PING's answer ends nothing else.
TEST_F(SubscriberRepliesTest, AnUnsubscribeAnsweredByItsPushLeavesTheRepliesInOrder) {
  const auto [b, c] = run("*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:1\r\n"
                          "*3\r\n$12\r\nsunsubscribe\r\n$1\r\na\r\n:1\r\n"
                          "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
                          "*3\r\n$10\r\nssubscribe\r\n$1\r\nc\r\n:2\r\n");
  EXPECT_EQ(b, Reply::make_array({Reply::make_string("ssubscribe"), Reply::make_string("b"), Reply::make_integer(1)}).to_string());
  EXPECT_EQ(c, Reply::make_array({Reply::make_string("ssubscribe"), Reply::make_string("c"), Reply::make_integer(2)}).to_string());
  EXPECT_EQ(conn_->state(), Connection::State::ready) << conn_->last_error().what();
  EXPECT_EQ(log_.pushes.size(), 1u);
}

// The PING itself refused (a server loading its data answers PING with LOADING): that error
// is the PING's answer, and the replies after it are not shifted.
TEST_F(SubscriberRepliesTest, APingRefusedAfterTheUnsubscribeIsTheLastReplyItTakes) {
  const auto [b, c] = run("*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:1\r\n"
                          "*3\r\n$12\r\nsunsubscribe\r\n$1\r\na\r\n:1\r\n"
                          "-LOADING Redis is loading the dataset in memory\r\n"
                          "-MOVED 7638 127.0.0.1:7392\r\n");
  EXPECT_EQ(b, Reply::make_array({Reply::make_string("ssubscribe"), Reply::make_string("b"), Reply::make_integer(1)}).to_string());
  EXPECT_EQ(c, Reply::make_error("MOVED 7638 127.0.0.1:7392").to_string()) << "c's own answer";
  EXPECT_EQ(conn_->state(), Connection::State::ready) << conn_->last_error().what();
}

// The server unsubscribed the channel by itself (its slot moved away) just before answering the
// unsubscribe with MOVED: the push is not the answer, the MOVED is, and the PING's follows.
TEST_F(SubscriberRepliesTest, AServersOwnUnsubscribePushBeforeTheRefusalKeepsRepliesInOrder) {
  const auto [b, c] = run("*3\r\n$10\r\nssubscribe\r\n$1\r\nb\r\n:1\r\n"
                          "*3\r\n$12\r\nsunsubscribe\r\n$1\r\na\r\n:0\r\n"
                          "-MOVED 15495 127.0.0.1:7392\r\n"
                          "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
                          "*3\r\n$10\r\nssubscribe\r\n$1\r\nc\r\n:1\r\n");
  EXPECT_EQ(c, Reply::make_array({Reply::make_string("ssubscribe"), Reply::make_string("c"), Reply::make_integer(1)}).to_string());
  EXPECT_EQ(conn_->state(), Connection::State::ready) << conn_->last_error().what();
}

// ClientOptions::ping_interval: a connection with nothing in flight PINGs its peer, so a peer
// that stopped answering without a reset (its host gone, a middlebox that dropped the flow) is
// found out by the PING's timeout instead of the connection looking ready for ever.
class ConnectionPingTest : public ConnectionResetTest {
 protected:
  void SetUp() override {
    options_.ping_interval = 100ms;
    ConnectionResetTest::SetUp();
  }
  // Plays a server that answers every PING with `pong` for `how_long` of loop time; returns
  // how many PINGs it answered. Fails the test on any other byte.
  int answer_pings(const std::string& pong, std::chrono::milliseconds how_long) {
    const std::string ping = dlock::detail::format_command({"PING"});
    const auto end = std::chrono::steady_clock::now() + how_long;
    std::string got;
    int answered = 0;
    while (std::chrono::steady_clock::now() < end) {
      io_.restart();
      io_.run_one_for(10ms);
      got += drain(peer_);
      while (got.rfind(ping, 0) == 0) {
        got.erase(0, ping.size());
        EXPECT_EQ(::send(peer_, pong.data(), pong.size(), 0), static_cast<ssize_t>(pong.size()));
        ++answered;
      }
    }
    EXPECT_EQ(got, "") << "the connection wrote something other than PING";
    return answered;
  }
};

TEST_F(ConnectionPingTest, AnIdleConnectionWhosePeerStopsAnsweringIsClosedByItsPing) {
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(run_until(io_, [&] { return log_.down_because.has_value(); }))
      << "an idle connection to a silent peer still looks " << static_cast<int>(conn_->state());
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(log_.down_because->find("no reply from"), std::string::npos) << *log_.down_because;
  EXPECT_EQ(drain(peer_), dlock::detail::format_command({"PING"})) << "one PING, then the timeout";
  // ping_interval 100 ms (armed in SetUp, before t0), then command_timeout 300 ms.
  EXPECT_GE(took, 250ms);
}

TEST_F(ConnectionPingTest, AnsweredPingsKeepAnIdleConnectionReady) {
  const int pings = answer_pings("+PONG\r\n", 1000ms);
  EXPECT_GE(pings, 4) << "one PING per 100 ms of idleness";
  EXPECT_LE(pings, 11);
  EXPECT_EQ(conn_->state(), Connection::State::ready) << conn_->last_error().what();
  EXPECT_FALSE(log_.down_because.has_value()) << *log_.down_because;
}

// A command awaiting its reply is timed by its own deadline: no PING is added behind it.
TEST_F(ConnectionPingTest, NoPingWhileACommandAwaitsItsReply) {
  std::optional<Result<Reply>> reply;
  conn_->send(Command{dlock::detail::format_command({"WAIT", "1", "2000"}),
                      [&](Result<Reply> r) { reply = std::move(r); }, 2000ms});
  const auto end = std::chrono::steady_clock::now() + 500ms;
  while (std::chrono::steady_clock::now() < end) {
    io_.restart();
    io_.run_one_for(10ms);
  }
  EXPECT_EQ(drain(peer_), dlock::detail::format_command({"WAIT", "1", "2000"}));
  ASSERT_EQ(::send(peer_, ":0\r\n", 4, 0), 4);
  ASSERT_TRUE(run_until(io_, [&] { return reply.has_value(); }));
  ASSERT_TRUE(reply->ok()) << reply->error().what();
  EXPECT_EQ((*reply)->integer(), 0);
  // Idle again: the PINGs resume.
  EXPECT_GE(answer_pings("+PONG\r\n", 500ms), 2);
}

class SubscriberPingTest : public ConnectionPingTest {
 protected:
  bool subscriber() const override { return true; }
};

// In subscribe mode a server answers PING with ["pong", ""]: that is the PING's reply, not a
// message for the observer, and the subscriber stays up.
TEST_F(SubscriberPingTest, ASubscribersPingIsAnsweredInSubscribeForm) {
  const int pings = answer_pings("*2\r\n$4\r\npong\r\n$0\r\n\r\n", 600ms);
  EXPECT_GE(pings, 2);
  EXPECT_EQ(conn_->state(), Connection::State::ready) << conn_->last_error().what();
  EXPECT_TRUE(log_.pushes.empty());
}

TEST_F(SubscriberPingTest, ASubscriberWhosePeerStopsAnsweringIsClosedByItsPing) {
  ASSERT_TRUE(run_until(io_, [&] { return log_.down_because.has_value(); }));
  EXPECT_NE(log_.down_because->find("no reply from"), std::string::npos) << *log_.down_because;
}

}  // namespace
