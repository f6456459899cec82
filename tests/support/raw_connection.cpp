#include "support/raw_connection.hpp"

#include <hiredis/hiredis.h>

#include <memory>
#include <stdexcept>

#include "support/redis_server.hpp"

namespace dlock::test {

namespace {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(std::chrono::milliseconds d) {
  return timeval{static_cast<time_t>(d.count() / 1000), static_cast<suseconds_t>((d.count() % 1000) * 1000)};
}

std::string render(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      return std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ERROR:
      return "(error) " + std::string(r->str, r->len);
    case REDIS_REPLY_ARRAY: {
      std::string out;
      for (std::size_t i = 0; i < r->elements; ++i) {
        if (i > 0) out += '\n';
        out += render(r->element[i]);
      }
      return out;
    }
    default:
      return "(unknown reply type " + std::to_string(r->type) + ")";
  }
}

std::string describe(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace

RawConnection::RawConnection(const std::string& host, int port, std::chrono::milliseconds timeout) {
  ctx_ = redisConnectWithTimeout(host.c_str(), port, to_timeval(timeout));
  if (ctx_ == nullptr || ctx_->err) {
    std::string why = ctx_ ? ctx_->errstr : "out of memory";
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
    throw std::runtime_error("RawConnection: cannot connect to " + host + ":" + std::to_string(port) + ": " + why);
  }
  // Without a read timeout a test would hang forever on a paused server.
  redisSetTimeout(ctx_, to_timeval(timeout));
}

RawConnection::RawConnection(const RedisServer& server) : RawConnection(server.host(), server.port()) {}

RawConnection::~RawConnection() {
  if (ctx_) redisFree(ctx_);
}

redisReply* RawConnection::run(const std::vector<std::string>& args) {
  if (args.empty()) throw std::invalid_argument("RawConnection: empty command");
  if (ctx_->err) throw std::runtime_error(std::string("RawConnection: connection is broken: ") + ctx_->errstr);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data()));
  if (reply == nullptr) {
    throw std::runtime_error("RawConnection: " + describe(args) + ": " + ctx_->errstr);
  }
  return reply;
}

std::string RawConnection::cmd(const std::vector<std::string>& args) {
  ReplyPtr r(run(args));
  return render(r.get());
}

long long RawConnection::cmd_int(const std::vector<std::string>& args) {
  ReplyPtr r(run(args));
  if (r->type != REDIS_REPLY_INTEGER) {
    throw std::runtime_error("RawConnection: " + describe(args) + ": expected an integer, got: " + render(r.get()));
  }
  return r->integer;
}

std::vector<std::string> RawConnection::cmd_array(const std::vector<std::string>& args) {
  ReplyPtr r(run(args));
  if (r->type != REDIS_REPLY_ARRAY) {
    throw std::runtime_error("RawConnection: " + describe(args) + ": expected an array, got: " + render(r.get()));
  }
  std::vector<std::string> out;
  out.reserve(r->elements);
  for (std::size_t i = 0; i < r->elements; ++i) out.push_back(render(r->element[i]));
  return out;
}

long long RawConnection::server_ms() {
  const auto t = cmd_array({"TIME"});
  return std::stoll(t.at(0)) * 1000 + std::stoll(t.at(1)) / 1000;
}

std::string RawConnection::next_reply() {
  if (ctx_->err) throw std::runtime_error(std::string("RawConnection: connection is broken: ") + ctx_->errstr);
  void* raw = nullptr;
  if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
    throw std::runtime_error(std::string("RawConnection: waiting for a reply: ") + ctx_->errstr);
  }
  ReplyPtr r(static_cast<redisReply*>(raw));
  return render(r.get());
}

bool RawConnection::auth(const std::string& user, const std::string& password) {
  std::vector<std::string> args = {"AUTH"};
  if (!user.empty()) args.push_back(user);
  args.push_back(password);
  ReplyPtr r(run(args));
  return r->type == REDIS_REPLY_STATUS && std::string(r->str, r->len) == "OK";
}

}  // namespace dlock::test
