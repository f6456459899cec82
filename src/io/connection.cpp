#include "io/connection.hpp"

#include <algorithm>

#include <asio/local/stream_protocol.hpp>

#include "scripts/script_call.hpp"

namespace dlock::detail {

Connection::Connection(asio::io_context& io, ServerAddress address, const ClientOptions& options,
                       Observer* observer, bool subscriber)
    : io_(io),
      address_(std::move(address)),
      options_(options),
      observer_(observer),
      subscriber_(subscriber),
      name_(address_.display()),
      stream_(io),
      resolver_(io),
      connect_timer_(io),
      timeout_timer_(io),
      reconnect_timer_(io),
      ping_timer_(io),
      backoff_(options.reconnect) {}

Connection::~Connection() = default;

void Connection::set_state(State s) {
  if (state_ == s) return;
  state_ = s;
  if (s == State::ready) arm_ping();
  if (observer_ != nullptr) observer_->on_connection_state(*this, s);
}

Error Connection::io_error(const char* what, const std::error_code& ec) const {
  return Error(errc::connection, std::string(what) + " " + name_ + ": " + stream_.describe(ec));
}

void Connection::start() {
  if (state_ == State::idle) connect();
}

void Connection::connect() {
  ++generation_;
  tls_handshaking_ = false;
  write_error_.reset();
  scripts_sent_.clear();  // the server may be another one (restart, failover): scripts again
  const unsigned gen = generation_;
  reader_ = std::make_unique<RespReader>();
  set_state(State::connecting);
  auto self = shared_from_this();
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([this, self, gen](std::error_code ec) {
    if (ec || gen != generation_) return;
    if (state_ == State::connecting && tls_handshaking_) {
      // A TLS client talking to a plain Redis port waits for a ServerHello that never comes
      // (Redis reads the ClientHello as an unfinished inline command).
      fail(Error(errc::connection, "TLS handshake with " + name_ + " timed out after " +
                                       std::to_string(options_.connect_timeout.count()) +
                                       " ms (is this a TLS port?)"),
           true);
    } else if (state_ == State::connecting || state_ == State::handshaking) {
      fail(Error(errc::connection, "connecting to " + name_ + " timed out after " +
                                       std::to_string(options_.connect_timeout.count()) + " ms"),
           true);
    }
  });

  if (auto ok = stream_.reset(&address_.tls, address_.host); !ok) {
    // A certificate file that loaded when the Client was made is gone or broken now.
    return fail(ok.error(), true);
  }

  auto on_connect = [this, self, gen](std::error_code ec) {
    if (gen != generation_ || state_ != State::connecting) return;
    if (ec) return fail(io_error("cannot connect to", ec), true);
    on_transport_connected();
  };

  if (address_.transport == ServerAddress::Transport::unix_socket) {
    asio::local::stream_protocol::endpoint ep(address_.path);
    stream_.async_connect(asio::generic::stream_protocol::endpoint(ep), on_connect);
    return;
  }
  resolver_.async_resolve(address_.host, std::to_string(address_.port),
                          [this, self, gen, on_connect](std::error_code ec, asio::ip::tcp::resolver::results_type results) {
                            if (gen != generation_ || state_ != State::connecting) return;
                            if (ec || results.empty()) return fail(io_error("cannot resolve", ec), true);
                            // First address only: Redis deployments name one address per node.
                            asio::ip::tcp::endpoint ep = *results.begin();
                            stream_.async_connect(asio::generic::stream_protocol::endpoint(ep), on_connect);
                          });
}

void Connection::on_transport_connected() {
  if (address_.transport == ServerAddress::Transport::tcp) {
    std::error_code ignored;
    stream_.socket().set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  if (!stream_.is_tls()) return on_connected();
  tls_handshaking_ = true;
  stream_.async_handshake([this, self = shared_from_this(), gen = generation_](std::error_code ec) {
    if (gen != generation_ || state_ != State::connecting) return;
    tls_handshaking_ = false;
    if (ec) {
      return fail(Error(errc::connection, "TLS handshake with " + name_ + " failed: " + stream_.describe(ec)), true);
    }
    on_connected();
  });
}

void Connection::on_connected() {
  set_state(State::handshaking);
  read();
  handshake();
}

void Connection::handshake() {
  std::vector<std::string> auth;
  const std::string& user = options_.user ? *options_.user : address_.user;
  const std::string& password = options_.password ? *options_.password : address_.password;
  std::vector<std::vector<std::string>> steps;
  // A named user is authenticated even with an empty password ("redis://alice:@h", a `nopass`
  // user): without AUTH the connection would silently run as the default user, with its rights.
  if (!user.empty()) steps.push_back({"AUTH", user, password});
  else if (!password.empty()) steps.push_back({"AUTH", password});
  if (address_.db != 0) steps.push_back({"SELECT", std::to_string(address_.db)});
  if (!options_.client_name.empty()) steps.push_back({"CLIENT", "SETNAME", options_.client_name});
  if (steps.empty()) {
    connect_timer_.cancel();
    backoff_.reset();
    last_error_ = {};
    set_state(State::ready);
    while (!waiting_.empty()) {
      enqueue_write(std::move(waiting_.front()));
      waiting_.pop_front();
    }
    return;
  }
  handshake_left_ = static_cast<unsigned>(steps.size());
  for (auto& step : steps) {
    const bool is_auth = step[0] == "AUTH";
    // A name is only for operators: an ACL that refuses CLIENT SETNAME must not cost the
    // connection.
    const bool optional = step[0] == "CLIENT";
    const std::string verb = step[0];
    Command c{format_command(step), [this, is_auth, optional, verb](Result<Reply> r) {
                if (!r.ok()) return;  // the connection already failed
                if (r->is_error() && !optional) {
                  std::error_code code = is_auth ? std::error_code(errc::auth) : classify_error_reply(*r);
                  return fail(Error(code, verb + " refused by " + name_ + ": " + r->str()), true);
                }
                if (--handshake_left_ == 0) {
                  connect_timer_.cancel();
                  backoff_.reset();
                  last_error_ = {};
                  set_state(State::ready);
                  while (!waiting_.empty() && state_ == State::ready) {
                    enqueue_write(std::move(waiting_.front()));
                    waiting_.pop_front();
                  }
                }
              }};
    enqueue_write(std::move(c));
  }
}

void Connection::send(Command&& cmd) {
  switch (state_) {
    case State::ready:
      if (inflight_.size() >= options_.max_queued_commands) {
        return cmd.done(Error(errc::overloaded, "more than " + std::to_string(options_.max_queued_commands) +
                                                    " commands queued for " + name_));
      }
      return enqueue_write(std::move(cmd));
    case State::idle:
    case State::connecting:
    case State::handshaking:
      if (waiting_.size() >= options_.max_queued_commands) {
        return cmd.done(Error(errc::overloaded, "more than " + std::to_string(options_.max_queued_commands) +
                                                    " commands queued for " + name_));
      }
      waiting_.push_back(std::move(cmd));
      return;
    case State::down:
      if (!cmd.done) return;
      // Never sent, so it cannot have timed out: when the connection broke on a timeout, say
      // "unreachable" (errc::connection, as documented) at once. Passing errc::timeout on made
      // waiters with a deadline give up immediately, in a hot loop (found by tests/fault/).
      if (last_error_.code == errc::timeout) {
        return cmd.done(Error(errc::connection, name_ + " is unreachable (" + last_error_.what() + ")"));
      }
      return cmd.done(last_error_ ? last_error_ : Error(errc::connection, name_ + " is unreachable"));
    case State::closed:
      if (!cmd.done) return;
      return cmd.done(last_error_ ? last_error_ : Error(errc::shutdown, "client is shut down"));
  }
}

void Connection::enqueue_write(Command&& cmd) {
  if (cmd.script && std::find(scripts_sent_.begin(), scripts_sent_.end(), cmd.script) == scripts_sent_.end()) {
    scripts_sent_.push_back(cmd.script);
    wbuf_ += evalsha_to_eval(*cmd.script, cmd.payload);  // Command::script: keeps the order
  } else {
    wbuf_ += cmd.payload;
  }
  // A command without a handler expects no reply of its own: a subscriber's (S)UNSUBSCRIBE,
  // whose confirmations arrive as pushes (is_push). But the server may answer it with an error
  // instead (a sharded channel whose slot moved away: MOVED or CLUSTERDOWN; NOSUB on Valkey 8),
  // which must not be taken for the reply of the next command. A PING follows it, so that the
  // replies up to the PING's answer can be told apart (absorb_unsubscribe).
  if (!cmd.done) {
    if (!subscriber_) return schedule_flush();
    cmd = Command{format_command({"PING"}), [](Result<Reply>) {}};
    wbuf_ += cmd.payload;
    const auto limit = options_.command_timeout;
    inflight_.push_back(Pending{std::move(cmd.done), BootClock::now() + limit, limit, nullptr, {}, true});
    if (!timeout_armed_) arm_timeout();
    return schedule_flush();
  }
  // Deadlines need not rise along the queue (a WAIT's may be later than that of a command
  // written after it): only the oldest command is timed, so one queued behind a WAIT is judged
  // at the WAIT's deadline at the earliest; once the WAIT is answered, by its own (on_reply).
  const auto limit = cmd.timeout.count() > 0 ? cmd.timeout : options_.command_timeout;
  Pending& p = inflight_.emplace_back(Pending{std::move(cmd.done), BootClock::now() + limit, limit, nullptr, {}});
  if (cmd.script) {
    p.script = cmd.script;
    p.payload = std::move(cmd.payload);  // a move, not a copy: the retry costs nothing until needed
  }
  if (!timeout_armed_) {
    arm_timeout();
  } else if (inflight_.size() == 1 && p.deadline < timeout_at_) {
    // Still armed for an answered command's later deadline (a WAIT's): time this one by its own.
    timeout_timer_.cancel();
    arm_timeout();
  }
  schedule_flush();
}

// Flushing is deferred to the end of the current loop iteration so that everything queued in
// one iteration shares one write (and, on the server, one read).
void Connection::schedule_flush() {
  if (flush_scheduled_ || writing_) return;
  flush_scheduled_ = true;
  asio::post(io_, [this, self = shared_from_this(), gen = generation_] {
    flush_scheduled_ = false;
    if (gen == generation_) flush();
  });
}

// A write that failed this way leaves the end of the connection to the outstanding read (see
// flush).
static bool ends_at_the_read(const std::error_code& ec) {
  return ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

void Connection::flush() {
  if (writing_ || write_error_ || wbuf_.empty()) return;
  if (state_ != State::ready && state_ != State::handshaking) return;
  writing_ = true;
  wbuf_writing_.clear();
  wbuf_writing_.swap(wbuf_);
  stream_.async_write(asio::buffer(wbuf_writing_),
                     [this, self = shared_from_this(), gen = generation_](std::error_code ec, std::size_t) {
                      if (gen != generation_) return;
                      writing_ = false;
                      if (ec && ends_at_the_read(ec)) {
                        // The peer reset the connection, and it usually said why first: a TLS
                        // alert (under TLS 1.3 "certificate required" comes only after the
                        // client's handshake is done, when its first command is on the way)
                        // or an error reply ("max number of clients reached"). That reason is
                        // in the receive buffer, where the read that is always outstanding
                        // finds it at once: a reset socket reads its data, then EOF. So the
                        // read ends the connection, and this error is only its fallback.
                        write_error_ = io_error("write to", ec);
                        return;
                      }
                      if (ec) return fail(io_error("write to", ec), true);
                      flush();
                    });
}

void Connection::read() {
  stream_.async_read_some(asio::buffer(rbuf_), [this, self = shared_from_this(), gen = generation_](
                                                   std::error_code ec, std::size_t n) {
    if (gen != generation_) return;
    if (ec) {
      if (Stream::is_closed_by_peer(ec)) {
        // After a reset write, the read found no reason before the end: the write's error says more.
        if (write_error_) return fail(*write_error_, true);
        return fail(Error(errc::connection, name_ + " closed the connection"), true);
      }
      return fail(io_error("read from", ec), true);
    }
    if (auto fed = reader_->feed(rbuf_.data(), n); !fed) return fail(fed.error(), true);
    for (;;) {
      auto next = reader_->next();
      if (!next) return fail(Error(errc::protocol, next.error().what() + " (from " + name_ + ")"), true);
      if (!next->has_value()) break;
      on_reply(std::move(**next));
      if (gen != generation_) return;  // a handler closed or reset this connection
    }
    read();
  });
}

// On a subscriber connection, messages and unsubscribe confirmations are pushes: a server
// unsubscribes a sharded channel by itself when its slot moves away ("sunsubscribe"), so those
// cannot be matched to commands; (S)UNSUBSCRIBE is therefore always sent without a handler.
static bool is_push(const Reply& r) {
  if (!r.is_array() || r.size() < 3 || !r[0].is_string()) return false;
  const std::string& kind = r[0].str();
  return kind == "message" || kind == "smessage" || kind == "pmessage" || kind == "unsubscribe" ||
         kind == "sunsubscribe";
}

void Connection::on_reply(Reply&& reply) {
  if (subscriber_ && is_push(reply)) {
    const std::string& kind = reply[0].str();
    if (kind == "unsubscribe" || kind == "sunsubscribe") {
      // Most likely the answer of the oldest unsubscribe still unanswered (or one the server
      // sent by itself: absorb_unsubscribe allows for that).
      for (auto& q : inflight_) {
        if (q.behind_unsubscribe && !q.unsubscribe_answered) {
          q.unsubscribe_answered = true;
          break;
        }
      }
    }
    if (observer_ != nullptr) observer_->on_push(*this, std::move(reply));
    return;
  }
  if (inflight_.empty()) {
    return fail(Error(errc::protocol, "unexpected reply from " + name_ + ": " + reply.to_string()), true);
  }
  if (inflight_.front().behind_unsubscribe && absorb_unsubscribe(reply)) return;
  Pending p = std::move(inflight_.front());
  inflight_.pop_front();
  // The timer waits for the answered command's deadline; the next one's may be earlier (a WAIT
  // allows more than command_timeout): time the new oldest by its own.
  if (timeout_armed_ && !inflight_.empty() && inflight_.front().deadline < timeout_at_) {
    timeout_timer_.cancel();
    arm_timeout();
  }
  if (reply.is_error()) {
    // The server's script cache was flushed under this connection (SCRIPT FLUSH): every script's
    // next use is an EVAL again (Command::script), so only the commands already in flight meet
    // NOSCRIPT and its reordering fallback.
    if (reply.error_prefix() == "NOSCRIPT") scripts_sent_.clear();
    if (retry_script(p, reply)) return;
    if (observer_ != nullptr) observer_->on_error_reply(*this, reply);
  }
  p.done(std::move(reply));
}

// The oldest command is the PING behind a handler-less (S)UNSUBSCRIBE (enqueue_write). True
// when `reply` is the unsubscribe's and goes nowhere; false when it is the PING's answer (the
// caller then takes the PING off the queue). Replies come in order, so an error that arrives
// before the unsubscribe was answered is the unsubscribe's. After that, an error is the PING's
// (a server loading its data answers PING with LOADING, a stale replica with MASTERDOWN) unless
// only an unsubscribe can have caused it: a slot error (MOVED, ASK, CLUSTERDOWN, TRYAGAIN) or
// NOSUB, when the push counted as its answer was one the server sent by itself (a slot that
// moved away unsubscribes its channels: valkey-io/valkey#1066).
bool Connection::absorb_unsubscribe(const Reply& reply) {
  if (!reply.is_error()) return false;
  Pending& ping = inflight_.front();
  if (!ping.unsubscribe_answered) {
    ping.unsubscribe_answered = true;
    return true;
  }
  const std::string_view prefix = reply.error_prefix();
  return prefix == "MOVED" || prefix == "ASK" || prefix == "CLUSTERDOWN" || prefix == "TRYAGAIN" || prefix == "NOSUB";
}

// A script command's one retry, on this connection (so that a WAIT after it, or a release
// queued behind it, still follows it): as EVAL after NOSCRIPT, or as EVALSHA when this
// connection's first use of the script went as an EVAL that the ACL refused (eval_refused).
// The retry carries no script, so it is not retried again: its answer is the caller's.
bool Connection::retry_script(Pending& p, const Reply& reply) {
  if (p.script == nullptr) return false;
  std::string again;
  if (reply.error_prefix() == "NOSCRIPT") {
    again = evalsha_to_eval(*p.script, p.payload);
  } else if (eval_refused(reply)) {
    again = std::move(p.payload);  // the script stays in scripts_sent_: its next uses are EVALSHAs
  } else {
    return false;
  }
  enqueue_write(Command{std::move(again), std::move(p.done), p.limit});
  return true;
}

// One timer per connection, armed for the oldest command: replies arrive in order, so when the
// oldest has not been answered by its deadline the stream is stuck.
void Connection::arm_timeout() {
  if (inflight_.empty()) {
    timeout_armed_ = false;
    return;
  }
  timeout_armed_ = true;
  timeout_at_ = inflight_.front().deadline;
  timeout_timer_.expires_at(timeout_at_);
  timeout_timer_.async_wait([this, self = shared_from_this(), gen = generation_](std::error_code ec) {
    if (ec || gen != generation_) return;
    timeout_armed_ = false;
    if (inflight_.empty()) return;
    if (inflight_.front().deadline <= BootClock::now()) {
      return fail(Error(errc::timeout, "no reply from " + name_ + " within " +
                                           std::to_string(inflight_.front().limit.count()) +
                                           " ms; connection closed"),
                  true);
    }
    arm_timeout();
  });
}

// ClientOptions::ping_interval. Only a command in flight is timed (arm_timeout), so a connection
// with none would never learn that its peer vanished without a reset: every tick that finds
// nothing in flight sends a PING, which is timed like any command, and its timeout closes the
// connection and reconnects (a subscriber's observer subscribes again). The timer holds a weak
// reference: an abandoned Connection is not kept alive by its own pings.
void Connection::arm_ping() {
  if (options_.ping_interval.count() <= 0) return;
  ping_timer_.expires_after(options_.ping_interval);
  ping_timer_.async_wait([this, weak = weak_from_this(), gen = generation_](std::error_code ec) {
    const auto self = weak.lock();  // held while the handler runs
    if (ec || !self || gen != generation_ || state_ != State::ready) return;
    if (inflight_.empty()) enqueue_write(Command{format_command({"PING"}), [](Result<Reply>) {}});
    arm_ping();
  });
}

void Connection::fail(Error why, bool reconnect) {
  ++generation_;
  stream_.close();
  resolver_.cancel();
  connect_timer_.cancel();
  timeout_timer_.cancel();
  ping_timer_.cancel();
  timeout_armed_ = false;
  writing_ = false;
  write_error_.reset();
  flush_scheduled_ = false;
  wbuf_.clear();
  last_error_ = why;
  // Swap out first: handlers may send new commands, which must see the new state.
  std::deque<Pending> inflight;
  inflight.swap(inflight_);
  std::deque<Command> waiting;
  waiting.swap(waiting_);
  if (reconnect && state_ != State::closed) {
    set_state(State::down);
    const auto delay = backoff_.next();
    reconnect_timer_.expires_after(delay);
    reconnect_timer_.async_wait([this, self = shared_from_this()](std::error_code ec) {
      if (!ec && state_ == State::down) connect();
    });
  } else {
    reconnect_timer_.cancel();
    set_state(State::closed);
  }
  for (auto& p : inflight) p.done(why);
  for (auto& c : waiting) {
    if (c.done) c.done(why);
  }
}

void Connection::retarget(ServerAddress address) {
  if (address.display() == address_.display() && address.port == address_.port) return;
  address_ = std::move(address);
  name_ = address_.display();
  if (state_ == State::closed || state_ == State::idle) return;
  // Whatever is in flight went to the old node: fail it (it may or may not have run there) and
  // connect to the new one at once, without waiting for the backoff.
  fail(Error(errc::connection, "the server moved to " + name_), true);
  backoff_.reset();
  reconnect_timer_.cancel();
  if (state_ == State::down) connect();
}

void Connection::fail_queued(const Error& why) {
  if (state_ != State::idle) return;
  std::deque<Command> waiting;
  waiting.swap(waiting_);
  for (auto& c : waiting) {
    if (c.done) c.done(why);
  }
}

void Connection::close(const Error& why) {
  if (state_ == State::closed) return;
  state_ = State::closed;  // no observer call and no reconnect during shutdown
  fail(why, false);
}

}  // namespace dlock::detail
