// Connection: one socket to one Redis node, with pipelining, timeouts and reconnects.
//
// Lives on the Client's event-loop thread; every member must be called there. Commands are
// appended to a write buffer and flushed once per loop iteration, so everything submitted in
// one iteration (by many callers, or by the renewal scheduler) leaves in one write; replies are
// matched to commands in order.
//
// Failure policy (why it is this way):
//  - A command that times out closes the connection: a pipelined reply stream cannot be
//    resynchronised, and a reply arriving late would be matched to the wrong command.
//  - Commands in flight when the connection dies fail at once with errc::connection; none hangs.
//  - While the node is unreachable (state down) new commands fail fast instead of piling up.
//  - A connection with nothing in flight PINGs its server every ClientOptions::ping_interval:
//    a peer that vanished without a reset is otherwise never noticed by an idle connection (a
//    subscriber's, above all), since only a command's timeout can tell.
//  - Reconnects use capped exponential backoff with jitter; each (re)connect sends AUTH, SELECT
//    and CLIENT SETNAME before any queued command is written.
//  - TLS (address.tls.enabled): each attempt is a new TCP connection and a new TLS session
//    (io/stream.hpp); the TLS handshake runs in state connecting, under connect_timeout. A
//    failed verification is errc::connection with what failed, and is retried like any other
//    connection failure (a server's certificate may be fixed while clients wait).
#pragma once

#include <array>
#include <asio.hpp>
#include <asio/generic/stream_protocol.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/clock.hpp"
#include "dlock/options.hpp"
#include "dlock/url.hpp"
#include "io/command.hpp"
#include "io/resp_reader.hpp"
#include "io/stream.hpp"
#include "util/backoff.hpp"

namespace dlock::detail {

using BootTimer = asio::basic_waitable_timer<BootClock>;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class State { idle, connecting, handshaking, ready, down, closed };

  struct Observer {
    virtual ~Observer() = default;
    // Called on every state change (ready after a (re)connect, down after a failure).
    virtual void on_connection_state(Connection& c, State s) = 0;
    // Subscriber connections: a pub/sub message ("message"/"smessage"/"pmessage" array).
    virtual void on_push(Connection&, Reply&&) {}
    // Every error reply, before its command's handler sees it (Sentinel: READONLY means the
    // node was demoted). Must not send on or close this connection.
    virtual void on_error_reply(Connection&, const Reply&) {}
  };

  Connection(asio::io_context& io, ServerAddress address, const ClientOptions& options,
             Observer* observer, bool subscriber);
  ~Connection();

  void start();
  // Queues `cmd`. Fails it at once (errc::connection) when the node is down or the connection
  // closed, with errc::overloaded when too much is queued.
  void send(Command&& cmd);
  // Points the connection at another node (Sentinel failover): fails what is in flight with
  // errc::connection and reconnects to `address` at once. No-op when the address is the same.
  void retarget(ServerAddress address);
  // Fails the commands queued before the first connect (state idle), e.g. when no sentinel could
  // name the primary this connection is meant for.
  void fail_queued(const Error& why);
  // Closes for good: fails everything with `why`; no reconnect.
  void close(const Error& why);

  State state() const noexcept { return state_; }
  std::size_t queued() const noexcept { return waiting_.size() + inflight_.size(); }
  const ServerAddress& address() const noexcept { return address_; }
  // The last connection error (empty while connected).
  const Error& last_error() const noexcept { return last_error_; }

 private:
  struct Pending {
    ReplyHandler done;
    BootClock::time_point deadline;
    std::chrono::milliseconds limit;  // what `deadline` allows (for the timeout message)
    // A script command (Command::script) keeps its EVALSHA payload, moved here once written, for
    // its one retry on this connection (retry_script); null and empty for every other command,
    // and for the retry itself.
    const Script* script = nullptr;
    std::string payload;
    // The PING written after a subscriber's handler-less (S)UNSUBSCRIBE (enqueue_write; what
    // on_reply does with the replies that arrive while it is the oldest: absorb_unsubscribe).
    bool behind_unsubscribe = false;
    bool unsubscribe_answered = false;  // by an unsubscribe push, or by an error absorbed
  };

  void connect();
  void on_transport_connected();
  void on_connected();
  void handshake();
  void enqueue_write(Command&& cmd);
  void schedule_flush();
  void flush();
  void read();
  void on_reply(Reply&& reply);
  bool absorb_unsubscribe(const Reply& reply);
  bool retry_script(Pending& p, const Reply& reply);
  void arm_timeout();
  void arm_ping();
  void fail(Error why, bool reconnect);
  void set_state(State s);
  Error io_error(const char* what, const std::error_code& ec) const;

  asio::io_context& io_;
  ServerAddress address_;
  const ClientOptions& options_;
  Observer* observer_;
  bool subscriber_;
  std::string name_;  // host:port, for messages

  Stream stream_;
  asio::ip::tcp::resolver resolver_;
  BootTimer connect_timer_;
  BootTimer timeout_timer_;
  BootTimer reconnect_timer_;
  BootTimer ping_timer_;  // ClientOptions::ping_interval, while ready
  bool timeout_armed_ = false;
  BootClock::time_point timeout_at_{};  // what the armed timer waits for
  bool tls_handshaking_ = false;  // TCP is up, the TLS handshake is not done (for messages)
  Backoff backoff_;

  State state_ = State::idle;
  unsigned generation_ = 0;  // bumps on every (re)connect; stale handlers compare it
  // Scripts sent on this TCP connection so far (Command::script): each one's first send is an
  // EVAL. Cleared on every (re)connect and on NOSCRIPT. A handful of entries: a linear search.
  std::vector<const Script*> scripts_sent_;
  std::deque<Command> waiting_;    // not yet written (connecting or handshaking)
  std::deque<Pending> inflight_;   // written or in the write buffer, awaiting replies
  std::string wbuf_;
  std::string wbuf_writing_;
  bool writing_ = false;
  // Set when a write found the connection reset: the outstanding read ends the connection,
  // with the peer's reason if it sent one first (see flush). Nothing more is written.
  std::optional<Error> write_error_;
  bool flush_scheduled_ = false;
  std::array<char, 16384> rbuf_{};
  std::unique_ptr<RespReader> reader_;
  Error last_error_;
  unsigned handshake_left_ = 0;
};

}  // namespace dlock::detail
