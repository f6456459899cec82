#pragma once
// A "foreign client" speaking to Redis with hiredis directly, never through
// dlock: tests use it to act behind dlock's back (delete keys, read TTLs,
// PUBLISH, CLIENT KILL, SCRIPT FLUSH, CONFIG SET, ACL SETUSER...) and to check
// what dlock really wrote.

#include <chrono>
#include <string>
#include <vector>

struct redisContext;
struct redisReply;

namespace dlock::test {

class RedisServer;

class RawConnection {
 public:
  // Connects (and uses `timeout` for every command too). Throws
  // std::runtime_error if it cannot connect.
  RawConnection(const std::string& host, int port,
                std::chrono::milliseconds timeout = std::chrono::seconds(5));
  explicit RawConnection(const RedisServer& server);
  ~RawConnection();

  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Runs one command given as separate, binary-safe arguments. The reply is
  // rendered as text: bulk/status -> its text, integer -> decimal, nil ->
  // "(nil)", error -> "(error) <text>", array -> elements joined by "\n".
  // Redis errors are returned, not thrown; I/O failures (including a timeout)
  // throw std::runtime_error, after which the connection is unusable.
  std::string cmd(const std::vector<std::string>& args);
  // Throws std::runtime_error if the reply is not an integer.
  long long cmd_int(const std::vector<std::string>& args);
  // Each element rendered as by cmd(). Throws std::runtime_error if the reply
  // is not an array (an error reply included).
  std::vector<std::string> cmd_array(const std::vector<std::string>& args);
  // The server's clock (TIME) in milliseconds: the clock the scripts read, and the one Redis
  // times a blocked command's timeout by (WAIT's included).
  long long server_ms();
  // AUTH user password (AUTH password if `user` is empty). True on OK.
  bool auth(const std::string& user, const std::string& password);
  // The next reply the server sends unasked (after MONITOR or SUBSCRIBE), rendered as by cmd().
  // Throws std::runtime_error when none comes within the timeout.
  std::string next_reply();

 private:
  redisReply* run(const std::vector<std::string>& args);  // never null; caller frees

  redisContext* ctx_ = nullptr;
};

}  // namespace dlock::test
