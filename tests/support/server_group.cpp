#include "support/server_group.hpp"

#include <stdexcept>

namespace dlock::test {

ServerGroup::ServerGroup(std::size_t n, RedisServerOptions opts) {
  for (std::size_t i = 0; i < n; ++i) {
    servers_.push_back(std::make_unique<RedisServer>(opts));
    raws_.push_back(nullptr);
    raw_pids_.push_back(-1);
  }
}

ServerGroup::~ServerGroup() {
  raws_.clear();
  servers_.clear();
}

RawConnection& ServerGroup::raw(std::size_t i) {
  RedisServer& s = server(i);
  if (!raws_.at(i) || raw_pids_[i] != s.pid()) {
    raws_[i].reset();
    raws_[i] = std::make_unique<RawConnection>(s);
    raw_pids_[i] = s.pid();
  }
  return *raws_[i];
}

std::vector<std::string> ServerGroup::urls() const {
  std::vector<std::string> out;
  for (const auto& s : servers_) out.push_back(s->url());
  return out;
}

void ServerGroup::restart_empty(std::size_t i) {
  raws_.at(i).reset();
  server(i).restart_empty();
}

std::vector<std::unique_ptr<dlock::Client>> ServerGroup::clients(const dlock::ClientOptions& options) {
  std::vector<std::unique_ptr<dlock::Client>> out;
  for (const auto& s : servers_) {
    out.push_back(std::make_unique<dlock::Client>(s->url(), options));
    if (s->running() && !out.back()->ping().ok()) {
      throw std::runtime_error("client for " + s->url() + " did not connect: " + s->log_tail());
    }
  }
  return out;
}

std::vector<dlock::Client*> pointers(const std::vector<std::unique_ptr<dlock::Client>>& clients) {
  std::vector<dlock::Client*> out;
  for (const auto& c : clients) out.push_back(c.get());
  return out;
}

}  // namespace dlock::test
