// Integration tests for dlock::Client against real redis-server processes: URL forms, AUTH and
// ACL users, unreachable/paused/killed servers, CLIENT KILL, error replies, the event-loop
// thread rules, pipelining under concurrency, cancellation and option validation.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "scripts/script.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::Client;
using dlock::ClientOptions;
using dlock::errc;
using dlock::Reply;
using dlock::Result;
using dlock::test::RawConnection;
using dlock::test::RedisServer;
using dlock::test::RedisServerOptions;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds since(SteadyClock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - t0);
}

template <class T>
std::string describe(const Result<T>& r) {
  return r.ok() ? std::string("success") : r.error().what();
}

// The result failed with exactly `want`.
template <class T>
testing::AssertionResult HasCode(const Result<T>& r, errc want) {
  const std::error_code w = want;
  if (r.ok()) return testing::AssertionFailure() << "expected error '" << w.message() << "', got success";
  if (r.code() == w) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "expected error '" << w.message() << "', got '" << r.code().message()
                                     << "' (" << r.code() << "): " << r.error().what();
}

// The result is a bulk/status reply with text `want`.
testing::AssertionResult RepliesText(const Result<Reply>& r, const std::string& want) {
  if (!r.ok()) return testing::AssertionFailure() << "expected '" << want << "', got error: " << describe(r);
  if (!r->is_string() && !r->is_status())
    return testing::AssertionFailure() << "expected '" << want << "', got " << r->to_string();
  if (r->str() != want) return testing::AssertionFailure() << "expected '" << want << "', got '" << r->str() << "'";
  return testing::AssertionSuccess();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A CLIENT LIST line of a connection subscribed to at least one channel (a Mutex waiter has
// two: the lock's channel and its Client's own, P{N}:ch:<id>).
bool is_subscriber(const std::string& line) {
  const auto at = line.find(" sub=");
  return at != std::string::npos && line.compare(at, 7, " sub=0 ") != 0;
}

// Polls `pred` every `step` until it is true or `limit` passed; returns its last value.
bool eventually(const std::function<bool()>& pred, milliseconds limit, milliseconds step = 20ms) {
  const auto until = SteadyClock::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (SteadyClock::now() >= until) return false;
    std::this_thread::sleep_for(step);
  }
}

// Retries ECHO until the client answers it correctly or `limit` passed.
bool works_again_within(Client& c, milliseconds limit, std::string* last_error = nullptr) {
  int n = 0;
  return eventually(
      [&] {
        const std::string token = "alive-" + std::to_string(++n);
        auto r = c.command({"ECHO", token});
        if (r.ok() && r->is_string() && r->str() == token) return true;
        if (last_error) *last_error = r.ok() ? r->to_string() : r.error().what();
        return false;
      },
      limit, 50ms);
}

// The lines of CLIENT LIST whose name is exactly `name`.
std::vector<std::string> clients_named(RawConnection& admin, const std::string& name) {
  std::istringstream in(admin.cmd({"CLIENT", "LIST"}));
  std::vector<std::string> out;
  const std::string field = " name=" + name + " ";
  for (std::string line; std::getline(in, line);) {
    if (contains(line, field)) out.push_back(line);
  }
  return out;
}

// A loopback port where nothing listens (bound once by us, then closed).
int unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    throw std::runtime_error("bind() failed");
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Resumes a paused server when the test leaves, even through a failed ASSERT.
struct ResumeOnExit {
  RedisServer& server;
  ~ResumeOnExit() { server.resume(); }
};

// Mutex::acquire bounded by `limit`: if it has not returned by then it is cancelled through its
// stop_token (and so returns errc::cancelled), so a hang fails the test instead of blocking it.
Result<dlock::Lease> acquire_within(dlock::Mutex& m, dlock::WaitOptions wait, milliseconds limit = 8000ms) {
  std::stop_source stop;
  std::jthread watchdog([&stop, limit](std::stop_token done) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, done, limit, [] { return false; });
    if (!done.stop_requested()) stop.request_stop();
  });
  auto r = m.acquire(wait, stop.get_token());
  watchdog.request_stop();
  return r;
}

// Expects `make` to throw std::system_error carrying dlock::errc::invalid_argument; returns what().
std::string invalid_argument_message(const std::function<void()>& make, const std::string& what) {
  try {
    make();
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::error_code(errc::invalid_argument)) << what << ": " << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw something other than std::system_error: " << e.what();
    return {};
  }
  ADD_FAILURE() << what << ": did not throw";
  return {};
}

// ============================================================================================
// 1. URL forms
// ============================================================================================

TEST(ClientUrl, TcpIpLiteralPingSetGet) {
  RedisServer server;
  Client c("redis://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(c.address().host, "127.0.0.1");
  EXPECT_EQ(c.address().port, server.port());
  auto p = c.ping(3000ms);
  ASSERT_TRUE(p.ok()) << describe(p);

  EXPECT_TRUE(RepliesText(c.command({"SET", "url:k", "v1"}), "OK"));
  EXPECT_TRUE(RepliesText(c.command({"GET", "url:k"}), "v1"));
  auto missing = c.command({"GET", "url:missing"});
  ASSERT_TRUE(missing.ok()) << describe(missing);
  EXPECT_TRUE(missing->is_nil()) << missing->to_string();

  // What the client wrote is really on the server.
  RawConnection raw(server);
  EXPECT_EQ(raw.cmd({"GET", "url:k"}), "v1");
}

TEST(ClientUrl, LocalhostName) {
  RedisServer server;
  Client c("redis://localhost:" + std::to_string(server.port()));
  EXPECT_EQ(c.address().host, "localhost");
  auto p = c.ping(3000ms);
  ASSERT_TRUE(p.ok()) << describe(p);
  EXPECT_TRUE(RepliesText(c.command({"SET", "url:localhost", "yes"}), "OK"));
  RawConnection raw(server);
  EXPECT_EQ(raw.cmd({"GET", "url:localhost"}), "yes");
}

TEST(ClientUrl, DatabaseSelection) {
  RedisServer server;
  Client c("redis://127.0.0.1:" + std::to_string(server.port()) + "/3");
  EXPECT_EQ(c.address().db, 3);
  EXPECT_TRUE(RepliesText(c.command({"SET", "url:db", "three"}), "OK"));
  EXPECT_TRUE(RepliesText(c.command({"GET", "url:db"}), "three"));

  RawConnection raw(server);
  EXPECT_EQ(raw.cmd({"GET", "url:db"}), "(nil)") << "the key must not be in db 0";
  ASSERT_EQ(raw.cmd({"SELECT", "3"}), "OK");
  EXPECT_EQ(raw.cmd({"GET", "url:db"}), "three");
  EXPECT_EQ(raw.cmd_int({"DBSIZE"}), 1);
}

TEST(ClientUrl, UnixSocket) {
  RedisServerOptions o;
  o.unix_socket = true;
  RedisServer server(o);
  const std::string url = "unix://" + server.unix_path();
  ASSERT_EQ(url.rfind("unix:///", 0), 0u) << url;
  Client c(url);
  EXPECT_EQ(c.address().transport, dlock::ServerAddress::Transport::unix_socket);
  EXPECT_EQ(c.address().path, server.unix_path());
  auto p = c.ping(3000ms);
  ASSERT_TRUE(p.ok()) << describe(p);
  EXPECT_TRUE(RepliesText(c.command({"SET", "url:unix", "sock"}), "OK"));
  RawConnection raw(server);
  EXPECT_EQ(raw.cmd({"GET", "url:unix"}), "sock");

  // The connection really is a unix-socket one: the server reports the socket path as its address.
  auto info = c.command({"CLIENT", "INFO"});
  ASSERT_TRUE(info.ok()) << describe(info);
  EXPECT_TRUE(contains(info->str(), server.unix_path())) << info->str();
}

TEST(ClientUrl, UnixSocketWithDatabase) {
  RedisServerOptions o;
  o.unix_socket = true;
  RedisServer server(o);
  Client c("unix://" + server.unix_path() + "?db=2");
  EXPECT_EQ(c.address().db, 2);
  EXPECT_TRUE(RepliesText(c.command({"SET", "url:unixdb", "two"}), "OK"));
  RawConnection raw(server);
  EXPECT_EQ(raw.cmd({"GET", "url:unixdb"}), "(nil)");
  ASSERT_EQ(raw.cmd({"SELECT", "2"}), "OK");
  EXPECT_EQ(raw.cmd({"GET", "url:unixdb"}), "two");
}

TEST(ClientUrl, BadUrlsThrowInvalidArgumentWithoutPassword) {
  const std::string secret = "s3cr3tPassw0rd";
  struct Case {
    std::string url;
    bool has_password;
  };
  const std::vector<Case> cases = {
      {"http://x", false},
      {"redis://h:0", false},
      {"redis://h:abc", false},
      {"", false},
      {"redis://h:65536", false},
      {"redis://h/notadb", false},
      {"redis://", false},
      {"unix://relative/redis.sock", false},
      {"127.0.0.1:6379", false},
      {"redis://:" + secret + "@h:99999", true},
      {"redis://user:" + secret + "@h:abc/1", true},
      {"redis://:" + secret + "@:6379", true},
      {"redis://alice:" + secret + "@h/x", true},
      {"redis://:" + secret + "@h:6379?db=1", true},
      {"http://:" + secret + "@h", true},
  };
  for (const auto& tc : cases) {
    const auto t0 = SteadyClock::now();
    std::string msg = invalid_argument_message([&] { Client c(tc.url); }, "url '" + tc.url + "'");
    EXPECT_LT(since(t0), 1000ms) << "rejecting a bad URL must not block: " << tc.url;
    EXPECT_FALSE(contains(msg, secret)) << "password leaked in message: " << msg;
    if (tc.has_password && !msg.empty()) { EXPECT_TRUE(contains(msg, "***")) << "password not masked: " << msg; }
  }
}

// ============================================================================================
// 2. AUTH (requirepass)
// ============================================================================================

class ClientAuth : public testing::Test {
 protected:
  static RedisServerOptions auth_options() {
    RedisServerOptions o;
    o.extra_args = {"--requirepass", "secret"};
    return o;
  }
  std::string url_with(const std::string& userinfo) const {
    return "redis://" + userinfo + "127.0.0.1:" + std::to_string(server_.port());
  }
  RedisServer server_{auth_options()};
};

TEST_F(ClientAuth, RightPasswordInUrlWorks) {
  Client c(url_with(":secret@"));
  auto p = c.ping(3000ms);
  ASSERT_TRUE(p.ok()) << describe(p);
  EXPECT_TRUE(RepliesText(c.command({"SET", "auth:k", "v"}), "OK"));
  EXPECT_TRUE(RepliesText(c.command({"GET", "auth:k"}), "v"));
}

TEST_F(ClientAuth, WrongPasswordFailsWithAuthAndDoesNotLeakIt) {
  const std::string wrong = "wr0ngPassw0rd";
  Client c(url_with(":" + wrong + "@"));
  const auto t0 = SteadyClock::now();
  auto p = c.ping(3000ms);
  EXPECT_TRUE(HasCode(p, errc::auth));
  EXPECT_LT(since(t0), 2500ms) << "ping must stop retrying on an auth error";

  auto r = c.command({"SET", "auth:k", "v"});
  ASSERT_TRUE(HasCode(r, errc::auth));
  const std::string msg = r.error().what();
  EXPECT_FALSE(contains(msg, wrong)) << msg;
  EXPECT_TRUE(contains(msg, "AUTH") || contains(msg, std::to_string(server_.port()))) << msg;

  // And nothing was written.
  RawConnection raw(server_);
  ASSERT_TRUE(raw.auth("", "secret"));
  EXPECT_EQ(raw.cmd({"EXISTS", "auth:k"}), "0");
}

TEST_F(ClientAuth, NoPasswordFailsWithAuth) {
  Client c(url_with(""));
  auto r = c.command({"PING"});
  ASSERT_TRUE(HasCode(r, errc::auth));
  EXPECT_TRUE(contains(r.error().what(), "NOAUTH") || contains(r.error().what(), "AUTH")) << r.error().what();
}

TEST_F(ClientAuth, NoPasswordAndNoClientNameFailsWithAuth) {
  ClientOptions o;
  o.client_name = "";  // no handshake at all: the NOAUTH comes back as the command's own reply
  Client c(url_with(""), std::move(o));
  auto r = c.command({"PING"});
  ASSERT_TRUE(HasCode(r, errc::auth));
  EXPECT_TRUE(contains(r.error().what(), "NOAUTH")) << r.error().what();
}

TEST_F(ClientAuth, OptionsPasswordOverridesUrl) {
  {
    ClientOptions o;
    o.password.emplace("secret");
    Client c(url_with(":not-the-password@"), std::move(o));
    auto p = c.ping(3000ms);
    EXPECT_TRUE(p.ok()) << "ClientOptions::password must override the URL's: " << describe(p);
  }
  {
    ClientOptions o;
    o.password.emplace("secret");
    Client c(url_with(""), std::move(o));
    auto p = c.ping(3000ms);
    EXPECT_TRUE(p.ok()) << "ClientOptions::password without one in the URL: " << describe(p);
  }
  {
    ClientOptions o;
    o.password.emplace("also-wrong");
    Client c(url_with(":secret@"), std::move(o));
    auto r = c.command({"PING"});
    EXPECT_TRUE(HasCode(r, errc::auth)) << "the URL's right password must not win over the option";
    if (!r.ok()) { EXPECT_FALSE(contains(r.error().what(), "also-wrong")) << r.error().what(); }
  }
}

// ============================================================================================
// 3. ACL users
// ============================================================================================

class ClientAcl : public testing::Test {
 protected:
  void SetUp() override {
    admin_.emplace(server_);
    ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "locker", "on", ">pw", "~dlock:*", "&dlock:*", "+@all"}), "OK");
    ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "nochan", "on", ">pw", "~dlock:*", "resetchannels", "+@all"}), "OK");
    ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "nokeys", "on", ">pw", "~other:*", "&*", "+@all"}), "OK");
  }
  std::string url_for(const std::string& user) const {
    return "redis://" + user + ":pw@127.0.0.1:" + std::to_string(server_.port());
  }
  // Waits until the client named `name` has sent a lock script (its first try), so a waiter
  // is known to be sleeping before the holder releases.
  bool has_tried(const std::string& name) {
    return eventually(
        [&] {
          for (const auto& line : clients_named(*admin_, name)) {
            if (contains(line, " cmd=evalsha ") || contains(line, " cmd=eval ")) return true;
          }
          return false;
        },
        3000ms);
  }

  RedisServer server_;
  std::optional<RawConnection> admin_;
};

TEST_F(ClientAcl, UserWithChannelRightsAcquiresReleasesAndWakesWaiter) {
  Client holder(url_for("locker"));
  ClientOptions wo;
  wo.client_name = "acl-waiter";
  Client waiter_client(url_for("locker"), wo);
  dlock::Mutex mh(holder, "acl-chan");
  dlock::Mutex mw(waiter_client, "acl-chan");

  auto lease = acquire_within(mh, dlock::WaitOptions{0ms, 500ms});
  ASSERT_TRUE(lease.ok()) << describe(lease);
  EXPECT_EQ(admin_->cmd({"GET", "dlock:{acl-chan}"}), lease->owner());

  // The waiter's recheck interval is long, so only the release notification can wake it in time.
  auto waiting = std::async(std::launch::async, [&] {
    return acquire_within(mw, dlock::WaitOptions{8000ms, 10000ms}, 12000ms);
  });
  ASSERT_TRUE(has_tried("acl-waiter")) << "the waiter never tried the lock";
  ASSERT_EQ(waiting.wait_for(0ms), std::future_status::timeout) << "the waiter got a held lock";

  const auto t0 = SteadyClock::now();
  auto rel = lease->release();
  ASSERT_TRUE(rel.ok()) << describe(rel);
  ASSERT_EQ(waiting.wait_for(5000ms), std::future_status::ready);
  auto second = waiting.get();
  ASSERT_TRUE(second.ok()) << describe(second);
  EXPECT_LT(since(t0), 2000ms) << "the release notification did not wake the waiter";
  EXPECT_EQ(admin_->cmd({"GET", "dlock:{acl-chan}"}), second->owner());
  EXPECT_TRUE(second->token() > lease->token());
  ASSERT_TRUE(second->release().ok());
  EXPECT_EQ(admin_->cmd({"EXISTS", "dlock:{acl-chan}"}), "0");
}

// The README's minimal ACL (and the user it had before the waiters' roll, without the sorted-set
// commands): a Mutex waiter is woken by the release either way; with the roll's commands it
// takes a place on P{N}:waiters, without them the scripts' pcalls skip the roll and the release
// wakes every waiter on P{N}:ch, as before the roll.
void minimal_acl_waiter_is_woken(RawConnection& admin, const std::string& url, const std::string& name, bool roll) {
  Client holder(url);
  Client waiter_client(url);
  dlock::Mutex mh(holder, name);
  dlock::Mutex mw(waiter_client, name);
  auto lease = acquire_within(mh, dlock::WaitOptions{0ms, 500ms});
  ASSERT_TRUE(lease.ok()) << describe(lease);
  auto waiting = std::async(std::launch::async, [&] {
    return acquire_within(mw, dlock::WaitOptions{8000ms, 10000ms}, 12000ms);
  });
  const std::string roll_key = "dlock:{" + name + "}:waiters";
  if (roll) {
    ASSERT_TRUE(eventually([&] { return admin.cmd({"ZCARD", roll_key}) == "1"; }, 3000ms)) << "no place taken";
  } else {
    ASSERT_TRUE(eventually([&] { return admin.cmd({"PUBSUB", "NUMSUB", "dlock:{" + name + "}:ch"}) != "dlock:{" + name + "}:ch\n0"; }, 3000ms));
    std::this_thread::sleep_for(200ms);  // its try found the lock busy
    EXPECT_EQ(admin.cmd({"EXISTS", roll_key}), "0");
  }
  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(lease->release().ok());
  ASSERT_EQ(waiting.wait_for(5000ms), std::future_status::ready);
  auto second = waiting.get();
  ASSERT_TRUE(second.ok()) << describe(second);
  EXPECT_LT(since(t0), 2000ms) << "the release did not wake the waiter";
  EXPECT_TRUE(second->release().ok());
}

TEST_F(ClientAcl, MinimalAclOfTheReadmeWakesWaitersThroughTheRoll) {
  ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "minimal", "on", ">pw", "~dlock:*", "&dlock:*", "+get", "+set", "+del",
                         "+exists", "+type", "+pttl", "+pexpire", "+incr", "+decr", "+time", "+zadd", "+zpopmin", "+zrem",
                         "+publish", "+subscribe", "+unsubscribe", "+evalsha", "+eval", "+ping", "+client|setname"}),
            "OK");
  minimal_acl_waiter_is_woken(*admin_, url_for("minimal"), "acl-min", true);
}

TEST_F(ClientAcl, UserWithoutTheRollsCommandsStillWakesWaiters) {
  ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "noroll", "on", ">pw", "~dlock:*", "&dlock:*", "+get", "+set", "+del",
                         "+exists", "+type", "+pttl", "+pexpire", "+incr", "+time", "+publish", "+subscribe",
                         "+unsubscribe", "+evalsha", "+eval", "+ping", "+client|setname"}),
            "OK");
  minimal_acl_waiter_is_woken(*admin_, url_for("noroll"), "acl-noroll", false);
}

// TIME refused: the roll's places cannot be dated, so none is taken (the counter is seeded here:
// a name's first acquisition needs TIME, see the README). A busy try must still answer busy,
// and the release still wake the waiter.
TEST_F(ClientAcl, UserWithoutTimeStillWaitsAndIsWoken) {
  ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "notime", "on", ">pw", "~dlock:*", "&dlock:*", "+@all", "-time"}), "OK");
  ASSERT_EQ(admin_->cmd({"SET", "dlock:{acl-notime}:fence", "100"}), "OK");
  minimal_acl_waiter_is_woken(*admin_, url_for("notime"), "acl-notime", false);
}

TEST_F(ClientAcl, UserWithoutChannelRightsAcquiresReleasesAndWaiterRechecks) {
  // Precondition: this user really may not SUBSCRIBE to the lock's channel.
  {
    RawConnection probe(server_);
    ASSERT_TRUE(probe.auth("nochan", "pw"));
    const std::string r = probe.cmd({"SUBSCRIBE", "dlock:{acl-nochan}:ch"});
    ASSERT_TRUE(contains(r, "NOPERM")) << r;
  }
  Client holder(url_for("nochan"));
  ClientOptions wo;
  wo.client_name = "nochan-waiter";
  Client waiter_client(url_for("nochan"), wo);
  dlock::Mutex mh(holder, "acl-nochan");
  dlock::Mutex mw(waiter_client, "acl-nochan");

  // Acquire and release alone first: the release's PUBLISH is refused, the release is not.
  {
    auto l = acquire_within(mh, dlock::WaitOptions{2000ms, 500ms});
    ASSERT_TRUE(l.ok()) << describe(l);
    EXPECT_EQ(admin_->cmd({"GET", "dlock:{acl-nochan}"}), l->owner());
    auto rel = l->release();
    ASSERT_TRUE(rel.ok()) << "release by a user without channel rights: " << describe(rel);
    EXPECT_EQ(admin_->cmd({"EXISTS", "dlock:{acl-nochan}"}), "0");
  }

  auto lease = acquire_within(mh, dlock::WaitOptions{2000ms, 500ms});
  ASSERT_TRUE(lease.ok()) << describe(lease);
  constexpr milliseconds recheck = 400ms;
  auto waiting = std::async(std::launch::async, [&] {
    return acquire_within(mw, dlock::WaitOptions{10000ms, recheck}, 12000ms);
  });
  ASSERT_TRUE(has_tried("nochan-waiter")) << "the waiter never tried the lock (SUBSCRIBE refusal blocked it?)";
  ASSERT_EQ(waiting.wait_for(0ms), std::future_status::timeout) << "the waiter got a held lock";

  const auto t0 = SteadyClock::now();
  const std::string old_owner = lease->owner();
  auto rel = lease->release();
  ASSERT_TRUE(rel.ok()) << describe(rel);
  // Gone, or already the waiter's (its periodic re-check may come right after the release).
  EXPECT_NE(admin_->cmd({"GET", "dlock:{acl-nochan}"}), old_owner);
  ASSERT_EQ(waiting.wait_for(5000ms), std::future_status::ready);
  auto second = waiting.get();
  ASSERT_TRUE(second.ok()) << describe(second);
  // No notification can arrive; the recheck (400 ms +-20%) must find the lock free.
  EXPECT_LT(since(t0), 1500ms) << "the waiter did not notice the release within about the recheck interval";
  EXPECT_EQ(admin_->cmd({"GET", "dlock:{acl-nochan}"}), second->owner());
  ASSERT_TRUE(second->release().ok());
}

// Two wait queues of one Client on one channel (a Mutex and a MultiLock of the same name;
// likewise two SharedMutex readers, a Semaphore's two queues): the second subscribes after the
// first's SUBSCRIBE was refused. It must hear the refusal too and wait by rechecking; it was
// parked until a reconnect, and lock() hung for good.
TEST_F(ClientAcl, SecondWaiterOnARefusedChannelRechecksToo) {
  Client holder(url_for("nochan"));
  Client waiters(url_for("nochan"));
  dlock::Mutex mh(holder, "acl-nochan2");
  auto lease = acquire_within(mh, dlock::WaitOptions{2000ms, 500ms});
  ASSERT_TRUE(lease.ok()) << describe(lease);
  dlock::Mutex mw(waiters, "acl-nochan2");
  dlock::MultiLock multi(waiters, {"acl-nochan2"});
  auto first = std::async(std::launch::async, [&] { return acquire_within(mw, dlock::WaitOptions{8000ms, 300ms}, 12000ms); });
  std::this_thread::sleep_for(300ms);  // its SUBSCRIBE was refused; it rechecks
  auto second = std::async(std::launch::async, [&] {
    auto l = multi.acquire(dlock::WaitOptions{8000ms, 300ms});
    if (l.ok()) (void)l->release();
    return l.ok() ? Result<void>{} : Result<void>(l.error());
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(lease->release().ok());
  // Both get the lock in turn, at their rechecks.
  ASSERT_EQ(first.wait_for(5000ms), std::future_status::ready);
  auto one = first.get();
  ASSERT_TRUE(one.ok()) << describe(one);
  ASSERT_TRUE(one->release().ok());
  ASSERT_EQ(second.wait_for(5000ms), std::future_status::ready) << "the MultiLock waiter is parked";
  auto two = second.get();
  EXPECT_TRUE(two.ok()) << two.error().what();
}

TEST_F(ClientAcl, UserGivenByOptionsAcquires) {
  ClientOptions o;
  o.user.emplace("locker");
  o.password.emplace("pw");
  Client c("redis://127.0.0.1:" + std::to_string(server_.port()), std::move(o));
  dlock::Mutex m(c, "acl-opts");
  auto l = acquire_within(m, dlock::WaitOptions{2000ms, 500ms});
  ASSERT_TRUE(l.ok()) << describe(l);
  EXPECT_EQ(admin_->cmd({"GET", "dlock:{acl-opts}"}), l->owner());
  // The connection really is authenticated as "locker".
  EXPECT_TRUE(RepliesText(c.command({"ACL", "WHOAMI"}), "locker"));
  EXPECT_TRUE(l->release().ok());
}

// "redis://alice:@h" names a user: the connection authenticates as that user (a `nopass` user
// gets in; one with a password is refused) instead of running as the default user.
TEST_F(ClientAcl, UserWithAnEmptyPasswordIsStillThatUser) {
  ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "nopw", "on", "nopass", "~dlock:*", "&*", "+@all"}), "OK");
  const std::string at = "@127.0.0.1:" + std::to_string(server_.port());
  Client nopw("redis://nopw:" + at);
  EXPECT_TRUE(RepliesText(nopw.command({"ACL", "WHOAMI"}), "nopw"));

  Client locker("redis://locker:" + at);
  auto r = locker.command({"ACL", "WHOAMI"});
  EXPECT_TRUE(HasCode(r, errc::auth)) << (r.ok() ? r->str() : r.error().what());
}

TEST_F(ClientAcl, UserWithoutKeyRightsGetsAuthError) {
  Client c(url_for("nokeys"));
  dlock::Mutex m(c, "acl-nokeys");
  const auto t0 = SteadyClock::now();
  auto l = acquire_within(m, dlock::WaitOptions{3000ms, 500ms});
  EXPECT_TRUE(HasCode(l, errc::auth));
  EXPECT_LT(since(t0), 2000ms) << "an ACL refusal must not be waited out";
  EXPECT_EQ(admin_->cmd({"EXISTS", "dlock:{acl-nokeys}"}), "0");
  EXPECT_EQ(admin_->cmd({"EXISTS", "dlock:{acl-nokeys}:fence"}), "0");

  EXPECT_TRUE(HasCode(c.command({"SET", "dlock:plain", "x"}), errc::auth));
  EXPECT_TRUE(RepliesText(c.command({"SET", "other:ok", "x"}), "OK"));
}

// A user that may run EVALSHA but not EVAL, with the scripts loaded by an operator (SCRIPT
// LOAD): a hardening some deployments run. A script's first use on a connection is an EVAL
// (Command::script, for the order of commands); refused, it is sent as EVALSHA instead, and the
// connection sends EVALSHA from then on.
TEST_F(ClientAcl, EvalshaOnlyUserWorksWithScriptsLoadedByAnOperator) {
  ASSERT_EQ(admin_->cmd({"ACL", "SETUSER", "shaonly", "on", ">pw", "~dlock:*", "&dlock:*", "+@all", "-eval"}), "OK");
  for (const auto* s : {&dlock::detail::scripts::mutex_acquire, &dlock::detail::scripts::mutex_release}) {
    ASSERT_EQ(admin_->cmd({"SCRIPT", "LOAD", s->source}), s->sha1);
  }
  Client c(url_for("shaonly"));
  dlock::Mutex m(c, "acl-sha-only");
  for (int i = 0; i < 3; ++i) {
    auto l = acquire_within(m, dlock::WaitOptions{2000ms, 500ms});
    ASSERT_TRUE(l.ok()) << describe(l);
    EXPECT_EQ(admin_->cmd({"GET", "dlock:{acl-sha-only}"}), l->owner());
    EXPECT_TRUE(l->release().ok());
  }
}

// ============================================================================================
// 4. Unreachable server
// ============================================================================================

TEST(ClientUnreachable, PingCommandAndAcquireFailFastWithConnection) {
  const int port = unused_port();
  const auto t_ctor = SteadyClock::now();
  Client c("redis://127.0.0.1:" + std::to_string(port));
  EXPECT_LT(since(t_ctor), 1000ms) << "the constructor must not block on a down server";

  auto t0 = SteadyClock::now();
  auto p = c.ping(500ms);
  EXPECT_TRUE(HasCode(p, errc::connection));
  EXPECT_LT(since(t0), 1500ms);

  t0 = SteadyClock::now();
  auto r = c.command({"PING"});
  EXPECT_TRUE(HasCode(r, errc::connection));
  EXPECT_LT(since(t0), 1000ms);

  // Acquire with the default WaitOptions (wait forever) must fail, not wait. A stop_token
  // bounds the test if it does hang.
  dlock::Mutex m(c, "unreachable");
  std::stop_source guard;
  t0 = SteadyClock::now();
  auto fut = std::async(std::launch::async, [&] { return m.acquire(dlock::WaitOptions{}, guard.get_token()); });
  const bool finished = fut.wait_for(5000ms) == std::future_status::ready;
  if (!finished) guard.request_stop();
  auto l = fut.get();
  const auto took = since(t0);
  EXPECT_TRUE(finished) << "acquire on an unreachable server hung (cancelled after 5 s)";
  EXPECT_TRUE(HasCode(l, errc::connection));
  EXPECT_LT(took, 2000ms);
}

// ============================================================================================
// 5-7. Paused, killed and disconnected servers
// ============================================================================================

TEST(ClientFailure, CommandTimeoutOnPausedServerThenRecovers) {
  RedisServer server;
  ClientOptions o;
  o.command_timeout = 300ms;
  Client c(server.url(), std::move(o));
  ASSERT_TRUE(c.ping(3000ms).ok());

  {
    server.pause();
    ResumeOnExit resume{server};
    const auto t0 = SteadyClock::now();
    auto r = c.command({"PING"});
    const auto took = since(t0);
    EXPECT_TRUE(HasCode(r, errc::timeout));
    EXPECT_LT(took, 1000ms);
  }
  std::string last;
  EXPECT_TRUE(works_again_within(c, 3000ms, &last)) << "no recovery after resume; last: " << last;
  EXPECT_TRUE(RepliesText(c.command({"SET", "t:k", "after"}), "OK"));
  EXPECT_TRUE(RepliesText(c.command({"GET", "t:k"}), "after"));
}

// Client::ping(timeout) is documented as "retried until the server answers or `timeout`
// passes": its timeout bounds the whole call, also when one PING would wait longer.
TEST(ClientFailure, PingHonoursItsTimeoutOnPausedServer) {
  RedisServer server;
  Client c(server.url());  // command_timeout 3000 ms
  ASSERT_TRUE(c.ping(3000ms).ok());
  {
    server.pause();
    ResumeOnExit resume{server};
    const auto t0 = SteadyClock::now();
    auto p = c.ping(500ms);
    const auto took = since(t0);
    EXPECT_FALSE(p.ok());
    EXPECT_TRUE(p.code() == errc::timeout || p.code() == errc::connection) << describe(p);
    EXPECT_LT(took, 1500ms) << "ping(500ms) on a paused server returned after " << took.count()
                            << " ms: " << describe(p);
  }
  std::string last;
  EXPECT_TRUE(works_again_within(c, 5000ms, &last)) << last;
}

// A paused server must not make a lock wait longer than WaitOptions::timeout says (plus a little),
// and certainly not forever: the acquire below is cancelled by a watchdog after 10 s.
TEST(ClientFailure, AcquireWithTimeoutOnPausedServerReturns) {
  RedisServer server;
  Client c(server.url());  // command_timeout 3000 ms
  ASSERT_TRUE(c.ping(3000ms).ok());
  dlock::Mutex m(c, "paused-acquire");
  {
    // One full acquire/release first, so the subscriber connection is up and the scripts loaded.
    auto l = acquire_within(m, dlock::WaitOptions{500ms, 500ms});
    ASSERT_TRUE(l.ok()) << describe(l);
    ASSERT_TRUE(l->release().ok());
  }
  {
    server.pause();
    ResumeOnExit resume{server};
    const auto t0 = SteadyClock::now();
    auto l = acquire_within(m, dlock::WaitOptions{500ms, 500ms}, 10000ms);
    const auto took = since(t0);
    EXPECT_FALSE(HasCode(l, errc::cancelled)) << "acquire(timeout 500 ms) on a paused server hung; cancelled after "
                                              << took.count() << " ms";
    EXPECT_TRUE(l.code() == errc::timeout || l.code() == errc::connection) << describe(l);
    EXPECT_LT(took, 1500ms) << "acquire(timeout 500 ms) on a paused server returned after " << took.count()
                            << " ms: " << describe(l);
  }
  std::string last;
  EXPECT_TRUE(works_again_within(c, 5000ms, &last)) << last;
}

// The server stops answering while a waiter sleeps towards its deadline: the wait still ends at
// the deadline. Its last try goes out about one round trip before the deadline and is bounded
// by it; before, the sleep ran to the deadline and then sent a try nothing bounded, and the
// caller got its timeout a command timeout (3 s) late.
TEST(ClientFailure, ServerPausedDuringTheLastSleepStillEndsTheWaitAtItsDeadline) {
  RedisServer server;
  Client holder_client(server.url());
  Client c(server.url());  // command_timeout 3000 ms
  dlock::Mutex held(holder_client, "paused-sleep");
  auto lease = acquire_within(held, dlock::WaitOptions{500ms, 500ms});
  ASSERT_TRUE(lease.ok()) << describe(lease);
  dlock::Mutex m(c, "paused-sleep");
  // Warm up: subscriber connection up, scripts loaded (a try that finds it busy).
  EXPECT_TRUE(HasCode(m.acquire(dlock::WaitOptions{0ms, 500ms}), errc::busy));
  std::optional<Result<dlock::Lease>> got;
  const auto t0 = SteadyClock::now();
  std::thread waiter([&] { got.emplace(acquire_within(m, dlock::WaitOptions{1000ms, 5000ms}, 10000ms)); });
  std::this_thread::sleep_for(400ms);  // its tries found the lock busy; it sleeps to the deadline
  server.pause();
  {
    ResumeOnExit resume{server};
    waiter.join();
  }
  const auto took = since(t0);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(HasCode(*got, errc::timeout)) << describe(*got);
  EXPECT_LT(took, 1800ms) << "a 1 s wait on a server paused during its sleep returned after " << took.count() << " ms";
}

TEST(ClientFailure, ServerKilledFailsInFlightPromptlyAndReconnects) {
  RedisServer server;
  ClientOptions o;
  o.command_timeout = 5000ms;
  Client c(server.url(), std::move(o));
  ASSERT_TRUE(c.ping(3000ms).ok());

  // A command that is in flight when the server dies: BLPOP blocks on the server.
  auto in_flight = std::async(std::launch::async, [&] { return c.command({"BLPOP", "k:never", "0"}); });
  RawConnection admin(server);
  ASSERT_TRUE(eventually([&] { return contains(admin.cmd({"INFO", "clients"}), "blocked_clients:1"); }, 3000ms))
      << "BLPOP never reached the server";

  auto t0 = SteadyClock::now();
  server.kill();
  ASSERT_EQ(in_flight.wait_for(3000ms), std::future_status::ready) << "in-flight command not failed";
  auto r = in_flight.get();
  EXPECT_TRUE(HasCode(r, errc::connection));
  EXPECT_LT(since(t0), 1500ms) << "in-flight command must fail at once, not at the command timeout";

  // While down, new commands fail fast too.
  t0 = SteadyClock::now();
  auto down = c.command({"PING"});
  EXPECT_TRUE(HasCode(down, errc::connection));
  EXPECT_LT(since(t0), 1500ms);

  server.start();
  std::string last;
  EXPECT_TRUE(works_again_within(c, 6000ms, &last)) << "no reconnect after restart; last: " << last;
  EXPECT_TRUE(RepliesText(c.command({"SET", "k:after", "restart"}), "OK"));
  RawConnection admin2(server);
  EXPECT_EQ(admin2.cmd({"GET", "k:after"}), "restart");
}

TEST(ClientFailure, ClientKillReconnectsAndReappliesName) {
  RedisServer server;
  ClientOptions o;
  o.client_name = "dlock-itest";
  Client c(server.url(), std::move(o));
  ASSERT_TRUE(c.ping(3000ms).ok());
  RawConnection admin(server);
  ASSERT_EQ(clients_named(admin, "dlock-itest").size(), 1u) << admin.cmd({"CLIENT", "LIST"});

  auto id_before = c.command({"CLIENT", "ID"});
  ASSERT_TRUE(id_before.ok() && id_before->is_integer()) << describe(id_before);

  const long long killed = admin.cmd_int({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  EXPECT_GE(killed, 1);
  EXPECT_TRUE(clients_named(admin, "dlock-itest").empty());

  std::string last;
  ASSERT_TRUE(works_again_within(c, 3000ms, &last)) << "no reconnect after CLIENT KILL; last: " << last;
  auto id_after = c.command({"CLIENT", "ID"});
  ASSERT_TRUE(id_after.ok() && id_after->is_integer()) << describe(id_after);
  EXPECT_NE(id_after->integer(), id_before->integer()) << "the connection was not re-opened";
  EXPECT_EQ(clients_named(admin, "dlock-itest").size(), 1u) << "CLIENT SETNAME not re-applied: "
                                                            << admin.cmd({"CLIENT", "LIST"});
  EXPECT_TRUE(RepliesText(c.command({"CLIENT", "GETNAME"}), "dlock-itest"));
}

TEST(ClientFailure, SubscriberKilledResubscribesAndStillWakesWaiter) {
  RedisServer server;
  RawConnection admin(server);
  Client holder(server.url());
  ClientOptions wo;
  wo.client_name = "sub-waiter";
  Client waiter_client(server.url(), wo);
  dlock::Mutex mh(holder, "sub-kill");
  dlock::Mutex mw(waiter_client, "sub-kill");

  auto lease = acquire_within(mh, dlock::WaitOptions{0ms, 500ms});
  ASSERT_TRUE(lease.ok()) << describe(lease);
  // Long recheck: only a release notification can wake the waiter in time.
  auto waiting = std::async(std::launch::async, [&] {
    return acquire_within(mw, dlock::WaitOptions{8000ms, 10000ms}, 12000ms);
  });
  auto subscriber_ids = [&] {
    std::vector<std::string> ids;
    for (const auto& line : clients_named(admin, "sub-waiter")) {
      if (!is_subscriber(line)) continue;
      auto b = line.find("id=");
      ids.push_back(line.substr(b, line.find(' ', b) - b));
    }
    return ids;
  };
  std::vector<std::string> before;
  ASSERT_TRUE(eventually(
      [&] {
        before = subscriber_ids();
        bool tried = false;
        for (const auto& line : clients_named(admin, "sub-waiter"))
          if (contains(line, " cmd=evalsha ") || contains(line, " cmd=eval ")) tried = true;
        return before.size() == 1 && tried;
      },
      3000ms))
      << admin.cmd({"CLIENT", "LIST"});

  EXPECT_GE(admin.cmd_int({"CLIENT", "KILL", "TYPE", "pubsub"}), 1);
  // The waiter's client opens a new subscriber connection and subscribes again.
  std::vector<std::string> after;
  ASSERT_TRUE(eventually(
      [&] {
        after = subscriber_ids();
        return after.size() == 1 && after != before;
      },
      4000ms))
      << "no new subscription after CLIENT KILL TYPE pubsub: " << admin.cmd({"CLIENT", "LIST"});
  ASSERT_EQ(waiting.wait_for(0ms), std::future_status::timeout) << "the waiter got a held lock";

  const auto t0 = SteadyClock::now();
  ASSERT_TRUE(lease->release().ok());
  ASSERT_EQ(waiting.wait_for(5000ms), std::future_status::ready);
  auto second = waiting.get();
  ASSERT_TRUE(second.ok()) << describe(second);
  EXPECT_LT(since(t0), 2000ms) << "the release notification did not reach the re-subscribed waiter";
  EXPECT_EQ(admin.cmd({"GET", "dlock:{sub-kill}"}), second->owner());
}

TEST(ClientFailure, DefaultClientNameIsDlock) {
  RedisServer server;
  Client c(server.url());
  ASSERT_TRUE(c.ping(3000ms).ok());
  RawConnection admin(server);
  EXPECT_EQ(clients_named(admin, "dlock").size(), 1u) << admin.cmd({"CLIENT", "LIST"});
  EXPECT_TRUE(RepliesText(c.command({"CLIENT", "GETNAME"}), "dlock"));
}

// ============================================================================================
// 8. Error replies
// ============================================================================================

TEST(ClientErrors, ErrorRepliesAreClassified) {
  RedisServer server;
  Client c(server.url());
  ASSERT_TRUE(c.ping(3000ms).ok());

  auto h = c.command({"HSET", "somehashkey", "f", "v"});
  ASSERT_TRUE(h.ok()) << describe(h);
  ASSERT_EQ(h->as_integer(), 1);

  auto wt = c.command({"INCR", "somehashkey"});
  EXPECT_TRUE(HasCode(wt, errc::wrong_type));
  if (!wt.ok()) { EXPECT_TRUE(contains(wt.error().what(), "WRONGTYPE")) << wt.error().what(); }

  auto unknown = c.command({"NOSUCHCOMMAND", "x"});
  EXPECT_TRUE(HasCode(unknown, errc::server));
  if (!unknown.ok()) { EXPECT_TRUE(contains(unknown.error().what(), "unknown command")) << unknown.error().what(); }

  auto empty = c.command({});
  EXPECT_TRUE(HasCode(empty, errc::invalid_argument));

  // Error replies leave the connection in step: the next replies are the right ones.
  EXPECT_TRUE(RepliesText(c.command({"ECHO", "still-in-step"}), "still-in-step"));
  auto incr = c.command({"INCR", "plaincounter"});
  ASSERT_TRUE(incr.ok()) << describe(incr);
  EXPECT_EQ(incr->as_integer(), 1);
}

// ============================================================================================
// 9. async_command and the event-loop thread
// ============================================================================================

TEST(ClientAsync, CallbackRunsOnLoopThreadWhereBlockingCallsAreRefused) {
  RedisServer server;
  auto owned = std::make_unique<Client>(server.url());
  Client& c = *owned;
  ASSERT_TRUE(c.ping(3000ms).ok());
  EXPECT_FALSE(c.on_event_loop_thread());

  struct Seen {
    bool on_loop = false;
    std::string reply;
    std::error_code inner_command;
    std::error_code inner_ping;
    std::error_code inner_acquire;
  };
  dlock::Mutex m(c, "async-loop");
  auto seen = std::make_shared<std::promise<Seen>>();
  c.async_command({"ECHO", "from-async"}, [&c, &m, seen](Result<Reply> r) {
    Seen s;
    s.on_loop = c.on_event_loop_thread();
    s.reply = r.ok() ? r->str() : "error: " + r.error().what();
    s.inner_command = c.command({"PING"}).code();
    s.inner_ping = c.ping(100ms).code();
    s.inner_acquire = m.acquire(dlock::WaitOptions{0ms, 500ms}).code();
    seen->set_value(std::move(s));
  });
  auto fut = seen->get_future();
  if (fut.wait_for(5000ms) != std::future_status::ready) {
    (void)owned.release();  // its loop thread is stuck in our callback: leak it rather than hang
    FAIL() << "async_command callback did not complete (a blocking call deadlocked the loop?)";
  }
  Seen s = fut.get();
  EXPECT_TRUE(s.on_loop);
  EXPECT_EQ(s.reply, "from-async");
  EXPECT_EQ(s.inner_command, std::error_code(errc::called_from_event_loop));
  EXPECT_EQ(s.inner_ping, std::error_code(errc::called_from_event_loop));
  EXPECT_EQ(s.inner_acquire, std::error_code(errc::called_from_event_loop));
}

TEST(ClientAsync, ErrorsReachTheCallback) {
  RedisServer server;
  Client c(server.url());
  ASSERT_TRUE(c.ping(3000ms).ok());
  ASSERT_TRUE(c.command({"HSET", "ahash", "f", "v"}).ok());

  auto run = [&](std::vector<std::string> args) {
    auto p = std::make_shared<std::promise<std::pair<bool, std::error_code>>>();
    auto f = p->get_future();
    c.async_command(std::move(args), [&c, p](Result<Reply> r) { p->set_value({c.on_event_loop_thread(), r.code()}); });
    EXPECT_EQ(f.wait_for(3000ms), std::future_status::ready);
    return f.get();
  };
  auto wt = run({"INCR", "ahash"});
  EXPECT_TRUE(wt.first);
  EXPECT_EQ(wt.second, std::error_code(errc::wrong_type));
  auto empty = run({});
  EXPECT_TRUE(empty.first);
  EXPECT_EQ(empty.second, std::error_code(errc::invalid_argument));
}

// The ClientLoop tests' Client: one connection, so replies come in the order the commands were
// sent, and the longest busy_poll, so the own thread is polling, not asleep, between calls.
ClientOptions one_connection_polling(bool callers_run_loop = true) {
  ClientOptions o;
  o.connections_per_node = 1;
  o.callers_run_loop = callers_run_loop;
  o.busy_poll = 10ms;
  return o;
}

// A blocking call runs the Client's event loop on its own thread while it waits
// (ClientOptions::callers_run_loop): the callback of an async command answered while the call
// waits then runs on the calling thread — still "on the event loop", where blocking calls are
// refused. One connection, so the async command's reply comes before the blocking call's. The
// caller gets the loop only when the Client's own thread is awake and lets go in time, so the
// test tries several times; with the option off, the callback never runs on the caller.
// Each try starts 1 ms after the last, with the own thread polling (the longest busy_poll).
// Why: a caller that finds the own thread in its kernel wait (ClientCore::loop_sleeping_) does
// not wait for it. A try started at once found it "there", still inside the run_one() that had
// woken it for the previous try's replies, whenever the scheduler ran the woken caller on the
// own thread's vCPU; in 4 runs of 200 (--gtest_repeat=200) that happened on every try and the
// caller lost all 200. With the pause the caller wins 10-20 of 20 tries in every run; it loses
// the others when the own thread does not let go within 50 us.
int callbacks_run_by_the_caller(bool callers_run_loop, int tries, bool stop_at_first) {
  RedisServer server;
  Client c(server.url(), one_connection_polling(callers_run_loop));
  EXPECT_TRUE(c.ping(3000ms).ok());
  int on_caller = 0;
  for (int i = 0; i < tries; ++i) {
    std::this_thread::sleep_for(1ms);
    struct Seen {
      std::thread::id thread;
      bool on_loop = false;
      std::error_code inner;
    };
    auto seen = std::make_shared<std::promise<Seen>>();
    auto fut = seen->get_future();
    // BLPOP with a timeout holds the connection for 30 ms, so the PING below waits behind it.
    c.async_command({"BLPOP", "nothing-" + std::to_string(i), "0.03"}, [&c, seen](Result<Reply> r) {
      EXPECT_TRUE(r.ok()) << describe(r);
      seen->set_value({std::this_thread::get_id(), c.on_event_loop_thread(), c.command({"PING"}).code()});
    });
    auto ping = c.command({"PING"});
    EXPECT_TRUE(ping.ok()) << describe(ping);
    EXPECT_EQ(fut.wait_for(3000ms), std::future_status::ready);
    const Seen s = fut.get();
    EXPECT_TRUE(s.on_loop);
    EXPECT_EQ(s.inner, std::error_code(errc::called_from_event_loop));
    if (s.thread == std::this_thread::get_id()) ++on_caller;
    if (stop_at_first && on_caller > 0) break;
  }
  return on_caller;
}

// Whether the caller or the own thread gets the loop first in one try is up to the scheduler
// (see above: about 3 tries in 4 go to the caller). 200 tries, stopping at the first the caller
// wins, keep a working hand-over from ever looking broken; a broken one never wins.
TEST(ClientLoop, ABlockingCallRunsTheLoopOnItsThreadWhileItWaits) {
  EXPECT_GT(callbacks_run_by_the_caller(true, 200, true), 0);
}

// After a blocking call hands the loop back with nothing else waiting on it (no reply due, no
// subscription, no other blocked caller), the Client's own thread leaves it free for the rest of
// busy_poll, so that the caller's next call takes it at once (the gain is a speed one, measured
// by the 1-thread rows of the bench, docs/BENCHMARKS.md). The risk is a command that waits for a
// call that does not come: an async command whose thread makes no blocking call after it must
// be written by the own thread a tenth of busy_poll later (1 ms here), not at the end of
// busy_poll (10 ms).
TEST(ClientLoop, AnAsyncCommandAfterAQuietHandBackIsNotHeldForTheGrace) {
  RedisServer server;
  Client c(server.url(), one_connection_polling());
  ASSERT_TRUE(c.ping(3000ms).ok());
  std::vector<std::chrono::steady_clock::duration> took;
  for (int i = 0; i < 11; ++i) {
    ASSERT_TRUE(c.command({"PING"}).ok());  // hands the loop back quiet when the caller ran it
    auto done = std::make_shared<std::promise<void>>();
    auto fut = done->get_future();
    const auto sent = std::chrono::steady_clock::now();
    c.async_command({"PING"}, [done](Result<Reply> r) {
      EXPECT_TRUE(r.ok()) << describe(r);
      done->set_value();
    });
    ASSERT_EQ(fut.wait_for(3000ms), std::future_status::ready);
    took.push_back(std::chrono::steady_clock::now() - sent);
  }
  std::sort(took.begin(), took.end());
  // Held for the grace (the 1 ms rule removed), 10 or 11 of 11 took 10.2 ms or more in each of
  // 10 runs. With it they take 1 ms and a round trip, but a loaded machine (a sanitizer build
  // running on both CPUs) deschedules the spinning own thread for a 4 ms tick or two: medians
  // of 8 ms were seen in 7 of 30 runs under ASan, and in the one such run whose times were
  // printed the three fastest took 3.0-4.0 ms. So the third fastest is the one judged.
  std::string all;
  for (auto t : took) all += " " + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(t).count());
  EXPECT_LT(took[2], 9ms) << "took (us):" << all;
}

TEST(ClientLoop, WithCallersRunLoopOffOnlyTheClientsThreadRunsIt) {
  EXPECT_EQ(callbacks_run_by_the_caller(false, 10, false), 0);
}

// Many threads making blocking calls hand the loop to each other and to the Client's own thread
// thousands of times; every call still gets its own reply (none lost, none swapped).
TEST(ClientLoop, CallersHandingTheLoopAroundKeepEveryReplyTheirOwn) {
  RedisServer server;
  Client c(server.url());
  ASSERT_TRUE(c.ping(3000ms).ok());
  std::atomic<int> wrong{0};
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < 6; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < 400; ++i) {
          const std::string v = std::to_string(t) + ":" + std::to_string(i);
          auto r = c.command({"ECHO", v});
          if (!r.ok() || r->str() != v) ++wrong;
          if (i % 50 == 0) std::this_thread::sleep_for(1ms);  // let the own thread fall asleep now and then
        }
      });
    }
  }
  EXPECT_EQ(wrong.load(), 0);
}

// ============================================================================================
// 10. Pipelining and concurrency
// ============================================================================================

void hammer_and_count(unsigned connections_per_node, const std::string& name) {
  RedisServer server;
  ClientOptions o;
  o.connections_per_node = connections_per_node;
  o.client_name = name;
  Client c(server.url(), std::move(o));
  ASSERT_TRUE(c.ping(3000ms).ok());

  constexpr int threads = 16;
  constexpr int per_thread = 500;
  std::vector<std::vector<long long>> results(threads);
  std::atomic<int> errors{0};
  std::vector<std::string> first_error(threads);
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        results[t].reserve(per_thread);
        for (int i = 0; i < per_thread; ++i) {
          auto r = c.command({"INCR", "ctr"});
          if (!r.ok() || !r->is_integer()) {
            errors.fetch_add(1);
            if (first_error[t].empty()) first_error[t] = r.ok() ? r->to_string() : r.error().what();
            continue;
          }
          results[t].push_back(r->integer());
          if (i % 50 == 0) {  // a reply meant for another thread would show up here
            const std::string token = "t" + std::to_string(t) + "-" + std::to_string(i);
            auto e = c.command({"ECHO", token});
            if (!e.ok() || e->str() != token) {
              errors.fetch_add(1);
              first_error[t] = "ECHO " + token + " answered " + (e.ok() ? e->to_string() : e.error().what());
            }
          }
        }
      });
    }
  }
  for (int t = 0; t < threads; ++t) EXPECT_TRUE(first_error[t].empty()) << "thread " << t << ": " << first_error[t];
  EXPECT_EQ(errors.load(), 0);

  RawConnection admin(server);
  EXPECT_EQ(admin.cmd({"GET", "ctr"}), std::to_string(threads * per_thread));
  // Every INCR got its own reply: the values seen are exactly 1..8000, each once.
  std::vector<long long> all;
  for (auto& v : results) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<std::size_t>(threads * per_thread));
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i] != static_cast<long long>(i + 1)) {
      ADD_FAILURE() << "INCR replies are not 1..8000: position " << i << " holds " << all[i];
      break;
    }
  }

  auto conns = clients_named(admin, name);
  EXPECT_GE(conns.size(), 1u);
  EXPECT_LE(conns.size(), connections_per_node + 1) << admin.cmd({"CLIENT", "LIST"});

  // With a lock waiter the subscriber connection opens too; still no more than one on top.
  dlock::Mutex m(c, "hammer");
  auto held = acquire_within(m, dlock::WaitOptions{2000ms, 500ms});
  ASSERT_TRUE(held.ok()) << describe(held);
  auto waiting = std::async(std::launch::async, [&] { return acquire_within(m, dlock::WaitOptions{5000ms, 500ms}); });
  EXPECT_TRUE(eventually(
      [&] {
        for (const auto& line : clients_named(admin, name))
          if (is_subscriber(line)) return true;
        return false;
      },
      3000ms))
      << "no subscriber connection named " << name << ": " << admin.cmd({"CLIENT", "LIST"});
  conns = clients_named(admin, name);
  EXPECT_LE(conns.size(), connections_per_node + 1) << admin.cmd({"CLIENT", "LIST"});
  ASSERT_TRUE(held->release().ok());
  ASSERT_EQ(waiting.wait_for(3000ms), std::future_status::ready);
  auto second = waiting.get();
  EXPECT_TRUE(second.ok()) << describe(second);
}

TEST(ClientConcurrency, SixteenThreadsShareOneConnection) { hammer_and_count(1, "dlock"); }

TEST(ClientConcurrency, SixteenThreadsShareAFewConnections) { hammer_and_count(3, "dlock-pool"); }

// With several connections, every command of one lock goes on the same one (its keys share the
// hash tag, so one slot names it), and different locks spread over them: Redis then runs a lock's
// commands in the order they were sent, so a waiter's withdrawal cannot overtake its own try,
// nor a release the acquire before it. Seen from the server: MONITOR names each command's
// connection.
TEST(ClientConcurrency, OneLocksCommandsGoOnOneOfSeveralConnections) {
  RedisServer server;
  RawConnection admin(server);
  ClientOptions o;
  o.connections_per_node = 4;
  o.client_name = "dlock-pinned";
  Client c(server.url(), std::move(o));
  ClientOptions other_options;
  other_options.client_name = "dlock-holder";
  Client other(server.url(), std::move(other_options));
  ASSERT_TRUE(c.ping(3000ms).ok());
  ASSERT_TRUE(other.ping(3000ms).ok());
  RawConnection monitor(server);
  ASSERT_EQ(monitor.cmd({"MONITOR"}), "OK");

  const dlock::WaitOptions once{0ms, 100ms};
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) names.push_back("pinned-" + std::to_string(i));
  for (const auto& name : names) {
    dlock::Mutex m(c, name);
    for (int round = 0; round < 3; ++round) {
      auto held = m.acquire(once);
      ASSERT_TRUE(held.ok()) << describe(held);
      ASSERT_TRUE(held->release().ok());
    }
  }
  {
    // A waiter: its tries, its place on the roll and its withdrawal, while another Client holds.
    dlock::Mutex theirs(other, names[0]);
    auto held = theirs.acquire(once);
    ASSERT_TRUE(held.ok()) << describe(held);
    dlock::Mutex mine(c, names[0]);
    EXPECT_EQ(mine.acquire(dlock::WaitOptions{300ms, 100ms}).code(), make_error_code(errc::timeout));
    ASSERT_TRUE(held->release().ok());
    dlock::Semaphore sem(c, names[1], 2);  // a Semaphore's keys P{N}:permits... share the tag too
    auto permit = sem.acquire(1, once);
    ASSERT_TRUE(permit.ok()) << describe(permit);
    ASSERT_TRUE(permit->release().ok());
  }
  ASSERT_TRUE(c.command({"SET", "monitor-end", "1"}).ok());

  std::set<std::string> mine;  // the addresses of c's command connections
  for (const auto& line : clients_named(admin, "dlock-pinned")) {
    const auto at = line.find(" addr=");
    ASSERT_NE(at, std::string::npos) << line;
    mine.insert(line.substr(at + 6, line.find(' ', at + 6) - at - 6));
  }
  std::map<std::string, std::set<std::string>> used;  // lock name -> connections its scripts came on
  int scripts = 0;
  for (;;) {
    const std::string line = monitor.next_reply();  // e.g. 1700000000.1 [0 127.0.0.1:5000] "EVALSHA" ...
    if (contains(line, "\"monitor-end\"")) break;
    const auto open = line.find('['), close = line.find(']');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string where = line.substr(open + 1, close - open - 1);
    const std::string addr = where.substr(where.find(' ') + 1);
    if (!mine.count(addr)) continue;  // the other Client's, the subscriber's or a script's own
    if (!contains(line, "\"EVALSHA\"") && !contains(line, "\"EVAL\"")) continue;
    for (const auto& name : names) {
      if (contains(line, "{" + name + "}")) {
        used[name].insert(addr);
        ++scripts;
      }
    }
  }
  EXPECT_GE(scripts, 12 * 6 + 3) << "MONITOR missed the scripts";
  std::set<std::string> all;
  for (const auto& name : names) {
    EXPECT_EQ(used[name].size(), 1u) << name << "'s scripts came on " << used[name].size() << " connections";
    all.insert(used[name].begin(), used[name].end());
  }
  EXPECT_GE(all.size(), 3u) << "12 locks should spread over the 4 connections";
}

// A command far larger than the socket's send buffer (24 MB) while other callers' commands queue
// behind it: the write goes out in many pieces, the value comes back whole, and every small
// command gets its own reply, in order.
void big_write_with_others(const RedisServerOptions& so, bool unix_socket) {
  RedisServer server(so);
  // What is tested is that the bytes arrive whole, not how fast: 24 MB each way took more
  // than the default 3 s command timeout under ThreadSanitizer on a busy 2-core machine.
  dlock::ClientOptions options;
  options.command_timeout = 30000ms;
  Client c(unix_socket ? "unix://" + server.unix_path() : server.url(), options);
  ASSERT_TRUE(c.ping(3000ms).ok());
  std::string big(24u << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 7919) % 26);
  std::atomic<int> wrong{0};
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < 3; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < 300; ++i) {
          const std::string v = std::to_string(t) + ":" + std::to_string(i);
          auto r = c.command({"ECHO", v});
          if (!r.ok() || r->str() != v) ++wrong;
        }
      });
    }
    for (int round = 0; round < 2; ++round) {
      auto set = c.command({"SET", "big", big});
      ASSERT_TRUE(RepliesText(set, "OK"));
      auto get = c.command({"GET", "big"});
      ASSERT_TRUE(get.ok()) << describe(get);
      ASSERT_EQ(get->str().size(), big.size());
      EXPECT_TRUE(get->str() == big) << "the value came back altered";
    }
  }
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ClientConcurrency, CommandLargerThanTheSocketBufferArrivesWholeAmongOthers) {
  big_write_with_others(RedisServerOptions{}, false);
}

TEST(ClientConcurrency, CommandLargerThanTheSocketBufferArrivesWholeOnAUnixSocket) {
  RedisServerOptions o;
  o.unix_socket = true;
  big_write_with_others(o, true);
}

// ============================================================================================
// 11. Cancellation
// ============================================================================================

TEST(ClientCancel, StopTokenCancelsCommandOnPausedServer) {
  RedisServer server;
  Client c(server.url());  // command_timeout 3000 ms
  ASSERT_TRUE(c.ping(3000ms).ok());

  {
    server.pause();
    ResumeOnExit resume{server};
    std::stop_source stop;
    auto fut = std::async(std::launch::async, [&] { return c.command({"PING"}, stop.get_token()); });
    // Nothing to observe while the server is stopped; give the command time to be written.
    ASSERT_EQ(fut.wait_for(200ms), std::future_status::timeout) << "PING answered by a paused server?";
    const auto t0 = SteadyClock::now();
    stop.request_stop();
    ASSERT_EQ(fut.wait_for(2500ms), std::future_status::ready) << "cancel had no effect";
    auto r = fut.get();
    EXPECT_TRUE(HasCode(r, errc::cancelled));
    EXPECT_LT(since(t0), 1000ms) << "cancellation must be prompt, not the command timeout";
  }
  // The cancelled PING's late reply must not be matched to a later command.
  std::string last;
  EXPECT_TRUE(works_again_within(c, 3000ms, &last)) << last;
  EXPECT_TRUE(RepliesText(c.command({"ECHO", "after-cancel"}), "after-cancel"));
}

TEST(ClientCancel, AlreadyStoppedTokenCancelsAtOnce) {
  RedisServer server;
  Client c(server.url());
  ASSERT_TRUE(c.ping(3000ms).ok());
  std::stop_source stop;
  stop.request_stop();
  auto r = c.command({"SET", "cancel:k", "v"}, stop.get_token());
  EXPECT_TRUE(HasCode(r, errc::cancelled));
  EXPECT_TRUE(RepliesText(c.command({"ECHO", "next"}), "next"));
}

// ============================================================================================
// 12. Invalid options
// ============================================================================================

TEST(ClientOptionsValidation, InvalidOptionsThrowInvalidArgument) {
  const std::string url = "redis://127.0.0.1:" + std::to_string(unused_port());
  struct Case {
    std::string what;
    std::function<void(ClientOptions&)> set;
  };
  const std::vector<Case> cases = {
      {"key_prefix with '{'", [](ClientOptions& o) { o.key_prefix = "app{x:"; }},
      {"key_prefix with '}'", [](ClientOptions& o) { o.key_prefix = "app}:"; }},
      {"zero command_timeout", [](ClientOptions& o) { o.command_timeout = 0ms; }},
      {"negative command_timeout", [](ClientOptions& o) { o.command_timeout = -5ms; }},
      {"zero connect_timeout", [](ClientOptions& o) { o.connect_timeout = 0ms; }},
      {"zero connections_per_node", [](ClientOptions& o) { o.connections_per_node = 0; }},
      {"client_name with a space", [](ClientOptions& o) { o.client_name = "my client"; }},
      // Redis refuses these in CLIENT SETNAME; the handshake would drop the name silently.
      {"client_name with a tab", [](ClientOptions& o) { o.client_name = "my\tclient"; }},
      {"client_name with a non-ASCII byte", [](ClientOptions& o) { o.client_name = "caf\xc3\xa9"; }},
      {"zero max_queued_commands", [](ClientOptions& o) { o.max_queued_commands = 0; }},
      // Beyond max_duration (100 years): now + timeout would overflow the clocks.
      {"command_timeout of milliseconds::max()", [](ClientOptions& o) { o.command_timeout = milliseconds::max(); }},
      {"connect_timeout beyond 100 years", [](ClientOptions& o) { o.connect_timeout = dlock::max_duration + 1ms; }},
      {"shutdown_timeout of milliseconds::max()", [](ClientOptions& o) { o.shutdown_timeout = milliseconds::max(); }},
      {"replication_ack.timeout of milliseconds::max()",
       [](ClientOptions& o) {
         o.replication_ack.replicas = 1;
         o.replication_ack.timeout = milliseconds::max();
       }},
      {"reconnect.max of milliseconds::max()", [](ClientOptions& o) { o.reconnect.max = milliseconds::max(); }},
  };
  for (const auto& tc : cases) {
    ClientOptions o;
    tc.set(o);
    (void)invalid_argument_message([&] { Client c(url, o); }, tc.what);
  }
  // The defaults themselves are valid (the constructor does not throw on a down server).
  EXPECT_NO_THROW({ Client c(url); });
}

}  // namespace
