#include "support/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/process.hpp"

namespace dlock::test {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kReadyTimeout = 10s;       // a cold server with an AOF to load
constexpr auto kSamePortRetryFor = 5s;    // start() after kill(): port briefly busy
constexpr int kNewPortAttempts = 5;       // constructor: port stolen after probing it

// Asks the kernel for a free loopback port. Racy by nature (someone may take
// it before redis binds it), hence the retries in the callers.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("probing a free port: ") + std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool port_free(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// A Cluster node also listens on port + 10000 (its cluster bus), so the port must be at most
// 55535 and both must be free. Picked at random below the kernel's ephemeral range, each pick
// on its own: a fixed stride from a per-process start (as before) kept two test processes
// that started clusters at once in step, so each new pick after a lost race (both probed the
// same free port, one redis-server got it) collided again: "no free port after 5 attempts"
// (local CI, TSan, CliClusterTest).
int free_cluster_port() {
  static std::mutex mu;
  static std::mt19937 pick{std::random_device{}() ^ static_cast<unsigned>(::getpid())};
  for (int i = 0; i < 1000; ++i) {
    int port = 0;
    {
      std::lock_guard lock(mu);
      port = 20000 + static_cast<int>(pick() % 10000u);
    }
    if (port_free(port) && port_free(port + 10000)) return port;
  }
  throw std::runtime_error("no free port pair (p, p+10000) for a cluster node");
}

std::string make_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/dlock-redis-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp(" + tmpl + "): " + std::strerror(errno));
  }
  return tmpl;
}

std::string redis_server_binary() {
  const char* env = std::getenv("DLOCK_REDIS_SERVER");
  if (env && *env) return env;
  std::string found = detail::find_in_path("redis-server");
  return found.find('/') != std::string::npos ? found : "/usr/bin/redis-server";
}

std::string read_from(const std::string& path, std::streamoff offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(offset);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::streamoff file_size(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<std::streamoff>(size);
}

enum class Probe { down, ready, foreign };

// Does a server that is ours answer on 127.0.0.1:port? "foreign" means a
// different process owns the port (it was stolen), so ours will fail to bind.
Probe probe(int port, pid_t expected_pid) {
  timeval tv{0, 200 * 1000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == nullptr) return Probe::down;
  Probe result = Probe::down;
  if (!c->err) {
    redisSetTimeout(c, tv);
    auto* ping = static_cast<redisReply*>(redisCommand(c, "PING"));
    if (ping != nullptr) {
      std::string text(ping->str ? ping->str : "", ping->str ? ping->len : 0);
      if (ping->type == REDIS_REPLY_STATUS && text == "PONG") {
        result = Probe::ready;
        // Confirm the answer comes from our child, not a squatter.
        auto* info = static_cast<redisReply*>(redisCommand(c, "INFO server"));
        if (info != nullptr && info->type == REDIS_REPLY_STRING) {
          std::string body(info->str, info->len);
          auto at = body.find("process_id:");
          if (at != std::string::npos && std::atol(body.c_str() + at + 11) != expected_pid) {
            result = Probe::foreign;
          }
        }
        if (info) freeReplyObject(info);
      } else if (ping->type == REDIS_REPLY_ERROR && text.rfind("NOAUTH", 0) == 0) {
        // With requirepass PING is refused, which still means "up". The
        // caller's liveness check of the child stands in for the identity check.
        result = Probe::ready;
      }
      // Anything else (e.g. -LOADING while reading the AOF) is "not yet".
      freeReplyObject(ping);
    }
  }
  redisFree(c);
  return result;
}

// Reaps `pid` if it has exited; returns its status then, or -1 if still running.
int reap_if_exited(pid_t pid) {
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &st, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return -1;
  return r == pid ? st : 0;
}

}  // namespace

RedisServer::RedisServer(RedisServerOptions opts) : opts_(std::move(opts)), dir_(make_temp_dir()) {
  try {
    for (int attempt = 1;; ++attempt) {
      port_ = opts_.cluster_bus ? free_cluster_port() : free_port();
      if (opts_.tls) {
        do {
          tls_port_ = free_port();
        } while (tls_port_ == port_);
      }
      if (launch() == Launch::ready) return;
      if (attempt == kNewPortAttempts) {
        throw std::runtime_error("redis-server: no free port after " + std::to_string(attempt) +
                                 " attempts\n" + log_tail());
      }
    }
  } catch (...) {
    // The destructor does not run for a throwing constructor.
    kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

RedisServer::~RedisServer() {
  kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

int RedisServer::port() const { return port_; }
int RedisServer::tls_port() const { return tls_port_; }
std::string RedisServer::tls_url() const { return "rediss://127.0.0.1:" + std::to_string(tls_port_); }
std::string RedisServer::host() const { return "127.0.0.1"; }
std::string RedisServer::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
std::string RedisServer::unix_path() const { return dir_ + "/redis.sock"; }
const std::string& RedisServer::dir() const { return dir_; }
std::string RedisServer::log_path() const { return dir_ + "/redis.log"; }

pid_t RedisServer::pid() const {
  running();  // forget a pid that has exited
  return pid_;
}

bool RedisServer::running() const {
  if (pid_ <= 0) return false;
  if (reap_if_exited(pid_) == -1) return true;
  pid_ = -1;
  return false;
}

std::vector<std::string> RedisServer::command_line() const {
  std::vector<std::string> args = {redis_server_binary()};
  if (opts_.sentinel) {
    // Sentinel mode needs a writable config file as the first argument (it rewrites it).
    const std::string conf = dir_ + "/sentinel.conf";
    if (!std::filesystem::exists(conf)) std::ofstream(conf).flush();
    args.insert(args.end(), {conf, "--sentinel"});
  }
  args.insert(args.end(), {"--port", std::to_string(port_),
                           "--bind", "127.0.0.1",
                           "--dir", dir_,
                           "--logfile", log_path(),
                           "--daemonize", "no",
                           "--protected-mode", "no"});
  if (opts_.appendonly) {
    args.insert(args.end(), {"--appendonly", "yes", "--appendfsync", "always"});
  } else {
    args.insert(args.end(), {"--save", "", "--appendonly", "no"});
  }
  if (opts_.unix_socket) {
    args.insert(args.end(), {"--unixsocket", unix_path(), "--unixsocketperm", "700"});
  }
  if (opts_.tls) {
    args.insert(args.end(), {"--tls-port", std::to_string(tls_port_),
                             "--tls-cert-file", opts_.tls->cert_file,
                             "--tls-key-file", opts_.tls->key_file,
                             "--tls-ca-cert-file", opts_.tls->ca_file,
                             "--tls-auth-clients", opts_.tls->auth_clients ? "yes" : "no"});
  }
  args.insert(args.end(), opts_.extra_args.begin(), opts_.extra_args.end());
  return args;
}

RedisServer::Launch RedisServer::launch() {
  const std::vector<std::string> args = command_line();
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Only this launch's part of the (appended-to) log tells why it failed.
  const std::string log_file = log_path();
  const std::streamoff log_start = file_size(log_file);

  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    // Only async-signal-safe calls between fork and exec: the test process
    // has other threads, one of which may hold the malloc lock.
    detail::die_with_parent(parent);
    detail::reset_signals();
    // stdout/stderr go to the log too: errors in the command line are
    // printed there before the logfile option takes effect.
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    int log = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (log >= 0) {
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
    }
    detail::close_fds_from(3);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = child;

  const auto deadline = Clock::now() + kReadyTimeout;
  while (true) {
    if (int st = reap_if_exited(child); st != -1) {
      pid_ = -1;
      const std::string log = read_from(log_path(), log_start);
      if (log.find("Address already in use") != std::string::npos) return Launch::port_in_use;
      throw std::runtime_error("redis-server (" + args[0] + ") exited during startup with code " +
                               std::to_string(detail::exit_code_from_status(st)) + " (port " +
                               std::to_string(port_) + ")\n" + log_tail());
    }
    Probe p = probe(port_, child);
    // Re-check the child after a NOAUTH answer: it may have come from a
    // squatter while ours was failing to bind.
    if (p == Probe::ready && reap_if_exited(child) == -1) return Launch::ready;
    if (Clock::now() >= deadline) {
      kill();
      throw std::runtime_error("redis-server did not answer PING within " +
                               std::to_string(std::chrono::seconds(kReadyTimeout).count()) + " s on port " +
                               std::to_string(port_) + "\n" + log_tail());
    }
    std::this_thread::sleep_for(20ms);
  }
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);  // also ends a SIGSTOPped server
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

void RedisServer::start() {
  if (running()) throw std::logic_error("RedisServer::start: already running");
  // Clients reconnect to the same address, so keep the port; it may be busy
  // for a moment (e.g. an outgoing connection got it as its ephemeral port).
  const auto deadline = Clock::now() + kSamePortRetryFor;
  while (launch() == Launch::port_in_use) {
    if (Clock::now() >= deadline) {
      throw std::runtime_error("redis-server: port " + std::to_string(port_) + " still in use after " +
                               std::to_string(std::chrono::seconds(kSamePortRetryFor).count()) + " s\n" +
                               log_tail());
    }
    std::this_thread::sleep_for(100ms);
  }
}

void RedisServer::restart() {
  kill();
  start();
}

void RedisServer::restart_empty() {
  kill();
  // Everything but the log is server state (dump.rdb, appendonlydir/,
  // appendonly.aof, a stale socket): removing it all is robust to the
  // persistence-file layout of the Redis version.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.path().filename() == "redis.log") continue;
    std::error_code ignored;
    std::filesystem::remove_all(entry.path(), ignored);
  }
  start();
}

void RedisServer::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string RedisServer::log_tail(std::size_t lines) const {
  std::ifstream in(log_path());
  if (!in) return "(no redis log at " + log_path() + ")";
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(std::move(line));
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += l + "\n";
  return out;
}

}  // namespace dlock::test
