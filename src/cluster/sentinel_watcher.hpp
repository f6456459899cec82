// SentinelWatcher: finds the primary that a group of Redis Sentinels monitors, and follows it.
//
//  - Asks the sentinels in turn (SENTINEL GET-MASTER-ADDR-BY-NAME) until one names a node that
//    says it is a primary (ROLE): a sentinel cut off from the others, or one that monitors the
//    wrong node, can name a replica, and writes there only ever fail with READONLY.
//  - Stays subscribed to "+switch-master" on one sentinel, so a failover is heard of at once.
//  - Asks again when told the primary may have moved (its connection failed, or it answered
//    READONLY because it was demoted to a replica), at most every 100 ms.
// Sentinels are reached without AUTH, SELECT or TLS client settings of their own: the URL's
// credentials and database are the primary's.
//
// Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/connection.hpp"
#include "util/backoff.hpp"

namespace dlock::detail {

class SentinelWatcher final : public Connection::Observer {
 public:
  // `primary_template`: credentials/db/TLS to put on the discovered primary's address.
  // `on_primary` runs with every newly discovered address, or with an error when no sentinel
  // could answer (then it keeps trying in the background).
  SentinelWatcher(asio::io_context& io, std::vector<ServerAddress> sentinels, std::string master_name,
                  ServerAddress primary_template, const ClientOptions& options,
                  std::function<void(Result<ServerAddress>)> on_primary);
  ~SentinelWatcher() override;

  void start();
  void rediscover();
  void close(const Error& why);

  void on_connection_state(Connection& c, Connection::State s) override;
  void on_push(Connection& c, Reply&& message) override;

 private:
  void ask(std::size_t index, std::size_t tried, Error last);
  // Asks the node sentinel `index` named for its ROLE: found() when it is a primary (or cannot
  // say: an ACL that denies ROLE), else the next sentinel is asked.
  void verify(std::size_t index, std::size_t tried, std::string host, std::uint16_t port);
  void answered(std::string host, std::uint16_t port);
  void watch(std::size_t index);
  void found(std::string host, std::uint16_t port);

  asio::io_context& io_;
  std::vector<ServerAddress> sentinels_;
  std::string master_;
  ServerAddress template_;
  ClientOptions options_;  // a copy without credentials: sentinels have their own (none)
  ClientOptions primary_options_;      // the primary's: for the ROLE probe
  std::shared_ptr<Connection> probe_;  // the ROLE probe in flight (one ask at a time)
  std::function<void(Result<ServerAddress>)> on_primary_;
  std::vector<std::shared_ptr<Connection>> conns_;  // one command connection per sentinel
  std::shared_ptr<Connection> watch_conn_;
  std::size_t watching_ = 0;
  // Hops of the watch since it was last ready: after a whole round of sentinels has failed,
  // the next hop waits for watch_backoff_ (hopping retargets the connection, which reconnects
  // at once: with every sentinel down the hops would go round in a tight loop).
  std::size_t watch_failures_ = 0;
  Backoff watch_backoff_;
  BootTimer watch_timer_;
  bool hop_scheduled_ = false;
  std::optional<ServerAddress> current_;
  bool asking_ = false;
  bool ask_again_ = false;
  bool closed_ = false;
  BootTimer timer_;
  BootClock::time_point last_ask_{};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlock::detail
