#include "cluster/sentinel_watcher.hpp"

#include <sstream>

#include "util/port.hpp"

namespace dlock::detail {
namespace {

constexpr auto min_ask_interval = std::chrono::milliseconds(100);
constexpr auto retry_after_failure = std::chrono::milliseconds(500);

ServerAddress plain(ServerAddress a) {
  a.user.clear();
  a.password.clear();
  a.db = 0;
  return a;
}

}  // namespace

SentinelWatcher::SentinelWatcher(asio::io_context& io, std::vector<ServerAddress> sentinels, std::string master_name,
                                 ServerAddress primary_template, const ClientOptions& options,
                                 std::function<void(Result<ServerAddress>)> on_primary)
    : io_(io),
      sentinels_(std::move(sentinels)),
      master_(std::move(master_name)),
      template_(std::move(primary_template)),
      options_(options),
      primary_options_(options),
      on_primary_(std::move(on_primary)),
      watch_backoff_(options.reconnect),
      watch_timer_(io),
      timer_(io) {
  options_.user.reset();
  options_.password.reset();
  for (auto& s : sentinels_) {
    s = plain(s);
    conns_.push_back(std::make_shared<Connection>(io_, s, options_, nullptr, false));
  }
}

SentinelWatcher::~SentinelWatcher() { *alive_ = false; }

void SentinelWatcher::start() {
  for (auto& c : conns_) c->start();
  watch(0);
  asking_ = true;
  ask(0, 0, Error{});
}

void SentinelWatcher::rediscover() {
  if (closed_) return;
  if (asking_) {
    ask_again_ = true;
    return;
  }
  const auto now = BootClock::now();
  if (now - last_ask_ < min_ask_interval) {
    if (ask_again_) return;
    ask_again_ = true;
    timer_.expires_at(last_ask_ + min_ask_interval);
    timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
      if (ec || alive.expired() || closed_) return;
      ask_again_ = false;
      rediscover();
    });
    return;
  }
  asking_ = true;
  ask(0, 0, Error{});
}

void SentinelWatcher::ask(std::size_t index, std::size_t tried, Error last) {
  if (closed_) return;
  if (tried == sentinels_.size()) {
    asking_ = false;
    last_ask_ = BootClock::now();
    on_primary_(Error(last ? last.code : std::error_code(errc::connection),
                      "no sentinel could name the primary '" + master_ + "'" + (last ? ": " + last.what() : "")));
    timer_.expires_after(retry_after_failure);
    timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
      if (ec || alive.expired() || closed_) return;
      rediscover();
    });
    return;
  }
  const std::size_t i = index % sentinels_.size();
  conns_[i]->send(Command{
      format_command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_}),
      [this, alive = std::weak_ptr<bool>(alive_), i, tried](Result<Reply> r) {
        if (alive.expired() || closed_) return;
        const std::string who = "sentinel " + sentinels_[i].display();
        Error err;
        if (!r.ok()) {
          err = r.error();
        } else if (r->is_error()) {
          err = Error(classify_error_reply(*r), who + ": " + r->str());
        } else if (r->is_nil() || !r->is_array() || r->size() != 2) {
          err = Error(errc::server, who + " does not know a primary named '" + master_ + "'");
        } else if (auto port = parse_port((*r)[1].str()); !port) {
          err = Error(errc::protocol, who + " answered a bad port '" + (*r)[1].str() + "'");
        } else {
          return verify(i, tried, (*r)[0].str(), *port);
        }
        ask(i + 1, tried + 1, err);
      }});
}

void SentinelWatcher::verify(std::size_t i, std::size_t tried, std::string host, std::uint16_t port) {
  ServerAddress a = template_;
  a.transport = ServerAddress::Transport::tcp;
  a.host = host;
  a.port = port;
  if (auto old = std::move(probe_)) old->close(Error(errc::shutdown, "superseded"));  // its answer is ignored
  probe_ = std::make_shared<Connection>(io_, a, primary_options_, nullptr, false);
  probe_->start();
  probe_->send(Command{
      format_command({"ROLE"}),
      [this, alive = std::weak_ptr<bool>(alive_), probe = std::weak_ptr<Connection>(probe_), i, tried,
       host = std::move(host), port, shown = a.display()](Result<Reply> r) mutable {
        if (alive.expired() || closed_) return;
        auto p = probe.lock();
        if (!p || p != probe_) return;  // superseded
        probe_.reset();
        p->close(Error(errc::shutdown, "ROLE answered"));
        const std::string named = "sentinel " + sentinels_[i].display() + " names " + shown + " as the primary '" +
                                  master_ + "'";
        if (!r.ok()) return ask(i + 1, tried + 1, Error(r.code(), named + ", which does not answer: " + r.error().what()));
        // An error reply (an ACL without ROLE): the node answers, but cannot say what it is.
        if (r->is_array() && r->size() >= 1 && (*r)[0].str() != "master") {
          return ask(i + 1, tried + 1, Error(errc::server, named + ", but it is a " + (*r)[0].str()));
        }
        answered(std::move(host), port);
      }});
}

void SentinelWatcher::answered(std::string host, std::uint16_t port) {
  asking_ = false;
  last_ask_ = BootClock::now();
  found(std::move(host), port);
  if (ask_again_) {
    ask_again_ = false;
    timer_.cancel();
    rediscover();
  }
}

void SentinelWatcher::found(std::string host, std::uint16_t port) {
  ServerAddress a = template_;
  a.transport = ServerAddress::Transport::tcp;
  a.host = std::move(host);
  a.port = port;
  if (current_ && current_->host == a.host && current_->port == a.port) return;
  current_ = a;
  on_primary_(std::move(a));
}

void SentinelWatcher::watch(std::size_t index) {
  watching_ = index % sentinels_.size();
  if (!watch_conn_) {
    watch_conn_ = std::make_shared<Connection>(io_, sentinels_[watching_], options_, this, /*subscriber=*/true);
  } else {
    watch_conn_->retarget(sentinels_[watching_]);
  }
  watch_conn_->start();
}

void SentinelWatcher::on_connection_state(Connection& c, Connection::State s) {
  if (&c != watch_conn_.get() || closed_) return;
  if (s == Connection::State::ready) {
    watch_failures_ = 0;
    watch_backoff_.reset();
    c.send(Command{format_command({"SUBSCRIBE", "+switch-master"}), [](Result<Reply>) {}});
    // A switch may have happened while we were not listening.
    rediscover();
  } else if (s == Connection::State::down && sentinels_.size() > 1 && !hop_scheduled_) {
    // Listen on the next sentinel instead: at once while this round of sentinels is not done,
    // after a backoff once every one of them failed (meanwhile the connection retries the
    // current one on its own backoff; its failures do not hop again). Not from inside the
    // connection's own failure: posted or on a timer.
    hop_scheduled_ = true;
    auto hop = [this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec = {}) {
      if (ec || alive.expired() || closed_) return;
      hop_scheduled_ = false;
      if (watch_conn_->state() == Connection::State::down) watch(watching_ + 1);
    };
    if (++watch_failures_ < sentinels_.size()) {
      asio::post(io_, [hop] { hop(); });
    } else {
      watch_failures_ = 0;
      watch_timer_.expires_after(watch_backoff_.next());
      watch_timer_.async_wait(hop);
    }
  }
}

void SentinelWatcher::on_push(Connection&, Reply&& message) {
  // ["message", "+switch-master", "<name> <old-ip> <old-port> <new-ip> <new-port>"]
  if (message[0].str() != "message" || message.size() < 3) return;
  std::istringstream in(message[2].str());
  std::string name, old_ip, old_port, new_ip, new_port;
  if (!(in >> name >> old_ip >> old_port >> new_ip >> new_port) || name != master_) return;
  if (auto port = parse_port(new_port)) found(new_ip, *port);
}

void SentinelWatcher::close(const Error& why) {
  closed_ = true;
  timer_.cancel();
  watch_timer_.cancel();
  for (auto& c : conns_) c->close(why);
  if (watch_conn_) watch_conn_->close(why);
  if (probe_) probe_->close(why);
}

}  // namespace dlock::detail
