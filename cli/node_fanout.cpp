#include "node_fanout.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

namespace dlock::cli {

namespace {

// One answer per node, filled by callbacks on the Clients' loops. Shared with them: an answer
// that lands after the caller stopped waiting must not touch its stack.
template <typename T>
struct Answers {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<dlock::Result<T>>> slots;
  std::size_t left = 0;
};

// Runs start(i, done_i) for every node at once, then waits for every done_i.
template <typename T, typename Start>
std::vector<dlock::Result<T>> gather(std::size_t n, Start start) {
  auto answers = std::make_shared<Answers<T>>();
  answers->slots.resize(n);
  answers->left = n;
  for (std::size_t i = 0; i < n; ++i) {
    start(i, [answers, i](dlock::Result<T> r) {
      std::lock_guard lock(answers->mu);
      answers->slots[i].emplace(std::move(r));
      if (--answers->left == 0) answers->cv.notify_all();
    });
  }
  std::unique_lock lock(answers->mu);
  answers->cv.wait(lock, [&] { return answers->left == 0; });
  std::vector<dlock::Result<T>> out;
  out.reserve(n);
  for (auto& slot : answers->slots) out.push_back(std::move(*slot));
  return out;
}

}  // namespace

std::vector<dlock::Result<dlock::Reply>> command_on_all(const std::vector<dlock::Client*>& clients,
                                                        const std::vector<std::string>& args) {
  return gather<dlock::Reply>(clients.size(), [&](std::size_t i, auto done) {
    clients[i]->async_command(args, std::move(done));
  });
}

std::vector<dlock::Result<dlock::LockInfo>> inspect_on_all(const std::vector<dlock::Client*>& clients,
                                                           const std::string& name) {
  // A bad name or a shut-down Client is answered at once on this thread: the same callback.
  return gather<dlock::LockInfo>(clients.size(), [&](std::size_t i, auto done) {
    dlock::async_inspect(*clients[i], name, std::move(done));
  });
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
