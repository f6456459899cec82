// Notifier: one subscriber connection per node; channels reference-counted across all the
// waiters of the process.
//
// Waiters subscribe *before* they try the lock (and wait for the server's confirmation), so a
// release published between a failed try and the start of the wait cannot be missed. After the
// subscriber connection is re-established every channel is subscribed again and its listeners are
// told (on_resubscribed) so they re-check: messages published during the gap are lost.
#pragma once

#include <functional>
#include <memory>
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

  Notifier(asio::io_context& io, const ServerAddress& address, const ClientOptions& options);
  ~Notifier() override;

  // Loop thread only. `confirmed` runs once: when the server confirmed the subscription, or with
  // an error when it could not be made now (the listener stays registered and is subscribed
  // again after the connection comes back).
  void subscribe(const std::string& channel, Listener* listener, Confirmed confirmed);
  void unsubscribe(const std::string& channel, Listener* listener);
  void close(const Error& why);
  std::size_t channel_count() const noexcept { return channels_.size(); }

  void on_connection_state(Connection& c, Connection::State s) override;
  void on_push(Connection& c, Reply&& message) override;

 private:
  struct Channel {
    std::vector<Listener*> listeners;
    bool confirmed = false;
    bool in_flight = false;  // a SUBSCRIBE awaits its reply
    std::uint64_t epoch = 0;  // identifies this subscription; a late reply for an older one is ignored
    std::vector<Confirmed> on_confirm;
  };
  void send_subscribe(const std::string& name, Channel& ch, bool resubscribe);

  const ServerAddress& address_;
  std::shared_ptr<Connection> conn_;
  std::unordered_map<std::string, Channel> channels_;
  std::uint64_t next_epoch_ = 1;
};

}  // namespace dlock::detail
