#include "raw_redis.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <dlock/url.hpp>

namespace bench {

RawRedis::RawRedis(const std::string& url) {
  auto addr = dlock::parse_url(url);
  if (!addr) throw std::runtime_error("bad --redis URL: " + addr.error().what());
  if (addr->transport == dlock::ServerAddress::Transport::unix_socket) {
    ctx_ = redisConnectUnix(addr->path.c_str());
  } else {
    ctx_ = redisConnect(addr->host.c_str(), addr->port);
  }
  if (ctx_ == nullptr || ctx_->err != 0) {
    const std::string why = ctx_ != nullptr ? ctx_->errstr : "out of memory";
    if (ctx_ != nullptr) redisFree(ctx_);
    ctx_ = nullptr;
    throw std::runtime_error("cannot connect to " + addr->display() + ": " + why);
  }
  // hiredis sets TCP_NODELAY itself; this only makes the floor's setting explicit.
  if (addr->transport == dlock::ServerAddress::Transport::tcp) {
    int one = 1;
    ::setsockopt(ctx_->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  // As the Client does (connection.cpp): a named user is authenticated even with an empty
  // password, or the floor would run as the default user.
  if (!addr->password.empty() || !addr->user.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!addr->user.empty()) auth.push_back(addr->user);
    auth.push_back(addr->password);
    auto r = command(auth);
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error(std::string("AUTH refused: ") + r->str);
  }
  if (addr->db != 0) {
    auto r = command({"SELECT", std::to_string(addr->db)});
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error(std::string("SELECT refused: ") + r->str);
  }
}

RawRedis::~RawRedis() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

void RawRedis::fail(const char* what) const {
  throw std::runtime_error(std::string("redis ") + what + " failed: " + (ctx_->errstr[0] ? ctx_->errstr : "unknown"));
}

ReplyPtr RawRedis::command(const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
  if (r == nullptr) fail(argv.empty() ? "command" : argv[0].c_str());
  return ReplyPtr(r);
}

std::string RawRedis::load_script(const std::string& source) {
  auto r = command({"SCRIPT", "LOAD", source});
  if (r->type != REDIS_REPLY_STRING) throw std::runtime_error("SCRIPT LOAD failed");
  return std::string(r->str, r->len);
}

std::string RawRedis::info(const std::string& section) {
  auto r = command({"INFO", section});
  if (r->type != REDIS_REPLY_STRING) throw std::runtime_error("INFO failed");
  return std::string(r->str, r->len);
}

void RawRedis::delete_matching(const std::string& pattern) {
  std::string cursor = "0";
  do {
    auto r = command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) throw std::runtime_error("SCAN failed");
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const redisReply* keys = r->element[1];
    if (keys->elements == 0) continue;
    std::vector<std::string> unlink{"UNLINK"};
    for (size_t i = 0; i < keys->elements; ++i) unlink.emplace_back(keys->element[i]->str, keys->element[i]->len);
    (void)command(unlink);
  } while (cursor != "0");
}

}  // namespace bench
