#pragma once
// A real redis-server child process for integration tests, in its own temp
// dir on a free loopback port. Tests crash it, restart it, pause it: the
// failure modes dlock must survive are those of a real server, not a mock's.

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace dlock::test {

// TLS on a second port (tls_port()); the plain port stays open for the harness and RawConnection.
struct RedisTlsOptions {
  std::string cert_file;  // the server's certificate and key (PEM)
  std::string key_file;
  std::string ca_file;    // Redis requires one; with auth_clients it checks client certificates
  bool auth_clients = false;  // tls-auth-clients yes: a client without a certificate is refused
};

struct RedisServerOptions {
  // Appended after the harness's own arguments, so they override them,
  // e.g. {"--requirepass", "secret"}.
  std::vector<std::string> extra_args;
  // Also listen on <dir>/redis.sock (unixsocketperm 700).
  bool unix_socket = false;
  // --appendonly yes --appendfsync always: every acknowledged write survives
  // kill(). Without it nothing is persisted (--save "" too).
  bool appendonly = false;
  // A Cluster node: its port is at most 55535 and port + 10000 (the cluster bus) is free too.
  bool cluster_bus = false;
  // Run as a Sentinel (redis-server <dir>/sentinel.conf --sentinel); monitor with extra_args.
  bool sentinel = false;
  // Also serve TLS on tls_port() (Debian's redis-server is built with TLS).
  std::optional<RedisTlsOptions> tls;
};

// Single-threaded use: one test thread drives it. Not copyable or movable
// (hold it in a std::optional or std::unique_ptr to decide its lifetime).
//
// The redis-server binary is found in PATH, or taken from $DLOCK_REDIS_SERVER.
// It gets PR_SET_PDEATHSIG(SIGKILL): it dies with the THREAD that started it,
// so a crashed test never leaks servers; start/restart it from the test's
// main thread (or a thread that outlives the server).
class RedisServer {
 public:
  // Starts it and waits until it answers PING. Throws std::runtime_error
  // (with the server's log tail) if it does not come up.
  explicit RedisServer(RedisServerOptions opts = {});
  ~RedisServer();  // SIGKILL, reap, remove the temp dir. Never throws.

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const;
  int tls_port() const;           // 0 without RedisServerOptions::tls
  std::string tls_url() const;    // "rediss://127.0.0.1:<tls_port>"
  std::string host() const;       // "127.0.0.1"
  std::string url() const;        // "redis://127.0.0.1:<port>"
  std::string unix_path() const;  // "<dir>/redis.sock" (only meaningful with unix_socket)
  const std::string& dir() const; // working dir: dump.rdb / appendonlydir live here
  pid_t pid() const;              // -1 while not running
  bool running() const;           // false once it has exited (reaps it)

  void kill();           // SIGKILL + waitpid: a crash. Data not persisted by AOF is lost. No-op if not running.
  void start();          // same port and dir (keeps persistence files); waits for PING. Throws std::logic_error if running.
  void restart();        // kill(); start();
  void restart_empty();  // kill(); delete the persistence files; start(): comes back with no data
  void pause();          // SIGSTOP: the server hangs, connections stay open
  void resume();         // SIGCONT

  std::string log_tail(std::size_t lines = 30) const;

 private:
  enum class Launch { ready, port_in_use };
  Launch launch();  // one attempt on port_; throws on any other failure
  std::vector<std::string> command_line() const;
  std::string log_path() const;

  RedisServerOptions opts_;
  std::string dir_;
  int port_ = 0;
  int tls_port_ = 0;
  mutable pid_t pid_ = -1;  // mutable: running() reaps a server that exited
};

}  // namespace dlock::test
