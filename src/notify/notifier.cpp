#include "notify/notifier.hpp"

#include <algorithm>

namespace dlock::detail {

Notifier::Notifier(asio::io_context& io, const ServerAddress& address, const ClientOptions& options)
    : address_(address), conn_(std::make_shared<Connection>(io, address, options, this, /*subscriber=*/true)) {}

Notifier::~Notifier() = default;

void Notifier::subscribe(const std::string& channel, Listener* listener, Confirmed confirmed) {
  conn_->start();
  auto [it, inserted] = channels_.try_emplace(channel);
  Channel& ch = it->second;
  ch.listeners.push_back(listener);
  if (!inserted && ch.confirmed) {
    confirmed(Error{});
    return;
  }
  ch.on_confirm.push_back(std::move(confirmed));
  if (inserted) send_subscribe(channel, ch, false);
}

void Notifier::send_subscribe(const std::string& name, Channel& ch, bool resubscribe) {
  ch.epoch = next_epoch_++;
  ch.confirmed = false;
  ch.in_flight = true;
  conn_->send(Command{format_command({"SUBSCRIBE", name}), [this, name, epoch = ch.epoch, resubscribe](Result<Reply> r) {
                        auto it = channels_.find(name);
                        if (it == channels_.end() || it->second.epoch != epoch) return;
                        Channel& c = it->second;
                        c.in_flight = false;
                        Error err;
                        if (!r.ok()) err = r.error();
                        else if (r->is_error())
                          err = Error(classify_error_reply(*r), "SUBSCRIBE " + name + " refused by " +
                                                                    address_.display() + ": " + r->str());
                        c.confirmed = !err;
                        auto waiting = std::move(c.on_confirm);
                        c.on_confirm.clear();
                        auto listeners = c.listeners;  // callbacks may unsubscribe
                        for (auto& f : waiting) f(err);
                        if (!err && resubscribe) {
                          for (Listener* l : listeners) {
                            auto again = channels_.find(name);
                            if (again == channels_.end()) break;
                            auto& now = again->second.listeners;
                            if (std::find(now.begin(), now.end(), l) != now.end()) l->on_resubscribed();
                          }
                        }
                      }});
}

void Notifier::unsubscribe(const std::string& channel, Listener* listener) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  auto& ls = it->second.listeners;
  auto pos = std::find(ls.begin(), ls.end(), listener);
  if (pos != ls.end()) ls.erase(pos);
  if (!ls.empty()) return;
  channels_.erase(it);
  if (conn_->state() == Connection::State::ready || conn_->state() == Connection::State::handshaking ||
      conn_->state() == Connection::State::connecting) {
    conn_->send(Command{format_command({"UNSUBSCRIBE", channel}), [](Result<Reply>) {}});
  }
}

void Notifier::close(const Error& why) {
  conn_->close(why);
  channels_.clear();
}

void Notifier::on_connection_state(Connection&, Connection::State s) {
  if (s == Connection::State::down) {
    for (auto& [name, ch] : channels_) ch.confirmed = false;
  }
  if (s != Connection::State::ready) return;
  // After a reconnect, channels whose subscription went with the old connection are subscribed
  // again, and their listeners re-check: releases published during the gap were not delivered.
  // (SUBSCRIBEs still queued from before the first connect are simply written now.)
  for (auto& [name, ch] : channels_) {
    if (!ch.confirmed && !ch.in_flight) send_subscribe(name, ch, true);
  }
}

void Notifier::on_push(Connection&, Reply&& message) {
  // ["message", channel, payload] or ["smessage", channel, payload]
  const bool pattern = message[0].str() == "pmessage";
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
