#include "node_fanout.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

namespace dlock::cli {

namespace {

struct Replies {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<dlock::Result<dlock::Reply>>> slots;
  std::size_t left = 0;
};

}  // namespace

std::vector<dlock::Result<dlock::Reply>> command_on_all(const std::vector<dlock::Client*>& clients,
                                                        const std::vector<std::string>& args) {
  // Shared with the callbacks: a reply that lands after we stopped waiting must not touch the stack.
  auto replies = std::make_shared<Replies>();
  replies->slots.resize(clients.size());
  replies->left = clients.size();
  for (std::size_t i = 0; i < clients.size(); ++i) {
    clients[i]->async_command(args, [replies, i](dlock::Result<dlock::Reply> r) {
      std::lock_guard lock(replies->mu);
      replies->slots[i].emplace(std::move(r));
      if (--replies->left == 0) replies->cv.notify_all();
    });
  }
  std::unique_lock lock(replies->mu);
  replies->cv.wait(lock, [&] { return replies->left == 0; });
  std::vector<dlock::Result<dlock::Reply>> out;
  out.reserve(clients.size());
  for (auto& slot : replies->slots) out.push_back(std::move(*slot));
  return out;
}

dlock::Result<std::vector<dlock::ServerAddress>> data_nodes(dlock::Client& client) {
  if (auto ping = client.command({"PING"}); !ping) return ping.error();
  if (client.deployment().kind == dlock::Deployment::Kind::cluster) {
    // The Client asks its first seed for the slot map as it starts, and the PING usually
    // follows on the same connection, so its reply comes after the map's. When that seed was
    // down the PING went elsewhere: a keyed command then is routed by the map, or redirected
    // (MOVED), which makes the Client fetch it. primaries() is the seeds until then.
    // Under the prefix, which a restricted ACL user may read; its answer does not matter.
    (void)client.command({"EXISTS", client.options().key_prefix + "{cli-probe}"});
  }
  auto nodes = client.primaries();
  if (nodes.empty()) return dlock::Error(dlock::errc::connection, "no primary known for " + client.deployment().display());
  return nodes;
}

}  // namespace dlock::cli
