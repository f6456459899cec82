#include "notify/notifier.hpp"

#include <algorithm>

#include "cluster/slot_map.hpp"

namespace dlock::detail {

Notifier::Notifier(asio::io_context& io, const ServerAddress& address, const ClientOptions& options)
    : io_(io), primary_(address), options_(options) {}

Notifier::~Notifier() = default;

void Notifier::use_sharded(Route route, std::function<void()> suspect) {
  route_ = std::move(route);
  suspect_ = std::move(suspect);
}

Connection& Notifier::connection(const std::string& key, const ServerAddress& address) {
  auto it = conns_.find(key);
  if (it == conns_.end()) {
    it = conns_.emplace(key, std::make_shared<Connection>(io_, address, options_, this, /*subscriber=*/true)).first;
  }
  if (!held_) it->second->start();
  return *it->second;
}

std::string Notifier::key_of(const Connection& c) const {
  for (const auto& [key, conn] : conns_) {
    if (conn.get() == &c) return key;
  }
  return "?";
}

void Notifier::subscribe(const std::string& channel, Listener* listener, Confirmed confirmed) {
  // A subscription asked for after the Client closed (a handler run after its loop ended) would
  // open a connection that nothing reads.
  if (closed_) return confirmed(*closed_);
  auto [it, inserted] = channels_.try_emplace(channel);
  Channel& ch = it->second;
  ch.listeners.push_back(listener);
  if (!inserted && ch.confirmed) {
    confirmed(Error{});
    return;
  }
  ch.on_confirm.push_back(std::move(confirmed));
  // Neither confirmed nor in flight: the last SUBSCRIBE was refused (an ACL without channel
  // rights) or its connection is down. Ask again: a refusal must reach this listener too (it
  // then waits by rechecking), instead of leaving it parked until a reconnect that may never
  // come. A connection that is down queues the command; on_connection_state skips a channel in
  // flight.
  if (inserted || !ch.in_flight) send_subscribe(channel, ch, false);
}

void Notifier::send_subscribe(const std::string& name, Channel& ch, bool resubscribe, const ServerAddress* to,
                              int redirects) {
  const bool sharded = static_cast<bool>(route_);
  ServerAddress target = to != nullptr ? *to : (sharded ? route_(name) : primary_);
  const std::string key = sharded ? target.display() : std::string();
  ch.node = key;
  ch.epoch = next_epoch_++;
  ch.confirmed = false;
  ch.in_flight = true;
  Connection& conn = connection(key, target);
  conn.send(Command{
      format_command({sharded ? "SSUBSCRIBE" : "SUBSCRIBE", name}),
      [this, name, epoch = ch.epoch, resubscribe, target, redirects](Result<Reply> r) {
        auto it = channels_.find(name);
        if (it == channels_.end() || it->second.epoch != epoch) return;
        Channel& c = it->second;
        c.in_flight = false;
        if (r.ok() && r->is_error()) {
          if (auto moved = parse_redirect(r->str(), target.host); moved && redirects < 5) {
            // The slot lives elsewhere: follow the redirection and have the map refreshed.
            if (suspect_) suspect_();
            ServerAddress there = target;
            there.host = moved->to.host;
            there.port = moved->to.port;
            return send_subscribe(name, c, true, &there, redirects + 1);
          }
        }
        Error err;
        if (!r.ok()) err = r.error();
        else if (r->is_error())
          err = Error(classify_error_reply(*r), "SUBSCRIBE " + name + " refused by " + target.display() + ": " + r->str());
        c.confirmed = !err;
        // Decided before the callbacks, which may unsubscribe (and erase `c`).
        const bool announce = !err && (resubscribe || c.dropped);
        if (!err) c.dropped = false;
        auto waiting = std::move(c.on_confirm);
        c.on_confirm.clear();
        for (auto& f : waiting) f(err);
        if (announce) notify_resubscribed(name);
      }});
}

void Notifier::notify_resubscribed(const std::string& name) {
  auto it = channels_.find(name);
  if (it == channels_.end()) return;
  auto listeners = it->second.listeners;  // callbacks may unsubscribe
  for (Listener* l : listeners) {
    auto again = channels_.find(name);
    if (again == channels_.end()) break;
    auto& now = again->second.listeners;
    if (std::find(now.begin(), now.end(), l) != now.end()) l->on_resubscribed();
  }
}

void Notifier::unsubscribe(const std::string& channel, Listener* listener) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  auto& ls = it->second.listeners;
  auto pos = std::find(ls.begin(), ls.end(), listener);
  if (pos != ls.end()) ls.erase(pos);
  if (!ls.empty()) return;
  const std::string node = it->second.node;
  channels_.erase(it);
  auto c = conns_.find(node);
  if (c == conns_.end()) return;
  const auto st = c->second->state();
  if (st == Connection::State::ready || st == Connection::State::handshaking || st == Connection::State::connecting) {
    // No handler: the confirmation arrives as a push (see Connection::on_reply).
    c->second->send(Command{format_command({route_ ? "SUNSUBSCRIBE" : "UNSUBSCRIBE", channel}), nullptr});
  }
}

void Notifier::retarget(const ServerAddress& address) {
  primary_ = address;
  held_ = false;
  if (route_) return;
  auto it = conns_.find("");
  if (it == conns_.end()) return;
  it->second->retarget(address);  // goes down, then ready: resubscribes
  it->second->start();            // the first time: it was held (idle) until now
}

void Notifier::fail_queued(const Error& why) {
  for (auto& [key, c] : conns_) c->fail_queued(why);
}

void Notifier::reroute() {
  if (!route_) return;
  for (auto& [name, ch] : channels_) {
    ServerAddress now = route_(name);
    if (now.display() == ch.node) continue;
    if (ch.confirmed) {
      auto old = conns_.find(ch.node);
      if (old != conns_.end() && old->second->state() == Connection::State::ready) {
        old->second->send(Command{format_command({"SUNSUBSCRIBE", name}), nullptr});
      }
    }
    send_subscribe(name, ch, true, &now);
  }
  // Connections that carry nothing any more (a failed or demoted node) are closed.
  for (auto it = conns_.begin(); it != conns_.end();) {
    bool used = false;
    for (const auto& [name, ch] : channels_) used = used || ch.node == it->first;
    if (!used) {
      it->second->close(Error(errc::connection, "no subscriptions left on " + it->first));
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void Notifier::close(const Error& why) {
  closed_ = why;
  for (auto& [key, c] : conns_) c->close(why);
  channels_.clear();
}

void Notifier::on_connection_state(Connection& c, Connection::State s) {
  const std::string key = key_of(c);
  if (s == Connection::State::down) {
    for (auto& [name, ch] : channels_) {
      if (ch.node != key) continue;
      ch.dropped = ch.dropped || ch.confirmed;
      ch.confirmed = false;
    }
    if (route_ && suspect_) suspect_();
  }
  if (s != Connection::State::ready) return;
  // After a reconnect, channels whose subscription went with the old connection are subscribed
  // again, and their listeners re-check: releases published during the gap were not delivered.
  // (SUBSCRIBEs still queued from before the first connect are simply written now.)
  for (auto& [name, ch] : channels_) {
    if (ch.node == key && !ch.confirmed && !ch.in_flight) send_subscribe(name, ch, true);
  }
}

void Notifier::on_push(Connection& c, Reply&& message) {
  // ["message", channel, payload], ["smessage", channel, payload], ["pmessage", pattern, channel,
  // payload], or an unsubscribe confirmation ["unsubscribe"|"sunsubscribe", channel, count].
  const std::string& kind = message[0].str();
  if (kind == "unsubscribe") return;
  if (kind == "sunsubscribe") {
    // Ours (the channel is gone from channels_ or is being re-subscribed), or the server dropped
    // it because the slot moved away: then subscribe it where the slot lives now.
    auto it = channels_.find(message[1].str());
    if (it == channels_.end() || !it->second.confirmed || it->second.node != key_of(c)) return;
    if (suspect_) suspect_();
    send_subscribe(it->first, it->second, true);
    return;
  }
  const bool pattern = kind == "pmessage";
  const std::string& channel = message[pattern ? 2 : 1].str();
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  const std::string payload = message[pattern ? 3 : 2].str();
  auto listeners = it->second.listeners;  // a listener may unsubscribe while we iterate
  for (Listener* l : listeners) {
    auto again = channels_.find(channel);
    if (again == channels_.end()) return;
    auto& now = again->second.listeners;
    if (std::find(now.begin(), now.end(), l) != now.end()) l->on_notification(payload);
  }
}

}  // namespace dlock::detail
