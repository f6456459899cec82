// bench/raw_redis.hpp — a plain blocking hiredis connection: the floor's client, and how the
// bench itself talks to the server (INFO commandstats, FLUSHALL, SCRIPT LOAD) outside dlock.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class RawRedis {
 public:
  // Connects (AUTH/SELECT from the URL); throws std::runtime_error on failure.
  explicit RawRedis(const std::string& url);
  ~RawRedis();
  RawRedis(const RawRedis&) = delete;
  RawRedis& operator=(const RawRedis&) = delete;

  // Sends argv and waits for the reply; throws on a transport error (never returns null).
  ReplyPtr command(const std::vector<std::string>& argv);
  // The same for a printf-style format (hiredis redisCommand), for the floor's hot loop.
  template <class... A>
  ReplyPtr format(const char* fmt, A... args) {
    auto* r = static_cast<redisReply*>(redisCommand(ctx_, fmt, args...));
    if (r == nullptr) fail("command");
    return ReplyPtr(r);
  }

  // SCRIPT LOAD: the script's SHA1.
  std::string load_script(const std::string& source);
  // INFO <section> as text.
  std::string info(const std::string& section);
  // Deletes the keys matching `pattern` (SCAN + UNLINK); the bench's own keys only, so that a
  // server given by mistake loses nothing else.
  void delete_matching(const std::string& pattern);

  // The connected socket, for a caller that takes over the connection and does its own I/O
  // (the spinning floor). Only between whole commands: hiredis must have nothing buffered.
  int fd() const noexcept { return ctx_->fd; }

 private:
  [[noreturn]] void fail(const char* what) const;
  redisContext* ctx_ = nullptr;
};

}  // namespace bench
