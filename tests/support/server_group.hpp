#pragma once
// Several independent redis-server processes (no replication between them), as Redlock runs
// on: each on its own free loopback port and temp dir, each with a foreign RawConnection.
// Single-threaded use from the test's main thread (the servers die with the thread that
// started them, see redis_server.hpp).

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "support/raw_connection.hpp"
#include "support/redis_server.hpp"
#include "support/wait.hpp"

namespace dlock::test {

class ServerGroup {
 public:
  explicit ServerGroup(std::size_t n, RedisServerOptions opts = {});
  ~ServerGroup();

  std::size_t size() const { return servers_.size(); }
  RedisServer& server(std::size_t i) { return *servers_.at(i); }
  // A foreign connection to server i; re-opened after the server restarted.
  RawConnection& raw(std::size_t i);
  std::vector<std::string> urls() const;

  // Restarts with no data (kill, delete persistence, start), now.
  void restart_empty(std::size_t i);

  // One dlock Client per server, connected (PING answered) before it returns.
  std::vector<std::unique_ptr<dlock::Client>> clients(const dlock::ClientOptions& options = {});

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<RawConnection>> raws_;
  std::vector<pid_t> raw_pids_;  // the server pid each RawConnection was opened to
};

// Raw pointers for dlock::Redlock's constructor.
std::vector<dlock::Client*> pointers(const std::vector<std::unique_ptr<dlock::Client>>& clients);

}  // namespace dlock::test
