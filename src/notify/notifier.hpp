// Notifier: the subscriber side of release notifications; channels reference-counted across all
// the waiters of the process.
//
// Standalone and Sentinel: one subscriber connection (to the primary; Sentinel failover retargets
// it), SUBSCRIBE. Cluster: one subscriber connection per primary, sharded pub/sub (SSUBSCRIBE on
// the node that serves the channel's slot — the channel shares its lock's hash tag), so a release
// is not broadcast to every node. When a slot moves, the server drops the subscription
// ("sunsubscribe") or answers MOVED; the channel is then subscribed on its new owner.
//
// Waiters subscribe *before* they try the lock (and wait for the server's confirmation), so a
// release published between a failed try and the start of the wait cannot be missed. After a
// subscription is re-established (reconnect, failover, slot move) its listeners are told
// (on_resubscribed) so they re-check: messages published during the gap are lost.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/connection.hpp"

namespace dlock::detail {

class Notifier final : public Connection::Observer {
 public:
  struct Listener {
    virtual ~Listener() = default;
    virtual void on_notification(std::string_view payload) = 0;
    virtual void on_resubscribed() = 0;
  };
  using Confirmed = std::function<void(const Error&)>;
  // Cluster: the node that serves a channel's slot now.
  using Route = std::function<ServerAddress(const std::string& channel)>;

  Notifier(asio::io_context& io, const ServerAddress& address, const ClientOptions& options);
  ~Notifier() override;

  // Loop thread only, before the first subscribe: switch to sharded pub/sub routed by `route`;
  // `suspect` is called when a subscription met a moved slot or a failed node (refresh the map).
  void use_sharded(Route route, std::function<void()> suspect);
  // Sentinel: no connection is opened until the first retarget() names the primary (the address
  // given at construction is a sentinel's).
  void hold_until_retarget() { held_ = true; }
  // Sentinel: no sentinel could name the primary; subscriptions waiting for it fail with `why`
  // (they stay registered and are made once the primary is known).
  void fail_queued(const Error& why);
  // Sentinel: the primary moved; subscriptions are made again there.
  void retarget(const ServerAddress& address);
  // Cluster: the slot map changed; channels whose slot moved are subscribed on the new owner.
  void reroute();

  // Loop thread only. `confirmed` runs once: when the server confirmed the subscription, or with
  // an error when it could not be made now (the listener stays registered and is subscribed
  // again after the connection comes back). After close(): at once with the close's reason, and
  // the listener is not registered.
  void subscribe(const std::string& channel, Listener* listener, Confirmed confirmed);
  void unsubscribe(const std::string& channel, Listener* listener);
  void close(const Error& why);
  std::size_t channel_count() const noexcept { return channels_.size(); }
  bool sharded() const noexcept { return static_cast<bool>(route_); }

  void on_connection_state(Connection& c, Connection::State s) override;
  void on_push(Connection& c, Reply&& message) override;

 private:
  struct Channel {
    std::vector<Listener*> listeners;
    bool confirmed = false;
    bool in_flight = false;   // a SUBSCRIBE awaits its reply
    // It was confirmed once and its connection went down since: the next confirmation is a
    // resubscription, whoever asked for it (a listener that subscribes during the reconnect
    // sends the SUBSCRIBE, and the reconnect then skips the channel in flight), so the
    // listeners are told to re-check (notify_resubscribed).
    bool dropped = false;
    std::uint64_t epoch = 0;  // identifies this subscription; a late reply for an older one is ignored
    std::vector<Confirmed> on_confirm;
    std::string node;  // key of the connection that carries it
  };
  void send_subscribe(const std::string& name, Channel& ch, bool resubscribe, const ServerAddress* to = nullptr,
                      int redirects = 0);
  Connection& connection(const std::string& key, const ServerAddress& address);
  std::string key_of(const Connection& c) const;
  void notify_resubscribed(const std::string& name);

  asio::io_context& io_;
  ServerAddress primary_;
  const ClientOptions& options_;
  std::unordered_map<std::string, std::shared_ptr<Connection>> conns_;  // "" when not sharded
  std::unordered_map<std::string, Channel> channels_;
  std::uint64_t next_epoch_ = 1;
  Route route_;
  std::function<void()> suspect_;
  bool held_ = false;
  std::optional<Error> closed_;  // close() ran, and why
};

}  // namespace dlock::detail
