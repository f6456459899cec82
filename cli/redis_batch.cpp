#include "redis_batch.hpp"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_set>

namespace dlock::cli {

std::vector<dlock::Result<dlock::Reply>> pipeline(dlock::Client& client,
                                                  const std::vector<std::vector<std::string>>& commands) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<dlock::Result<dlock::Reply>>> replies;
    std::size_t left = 0;
  };
  auto st = std::make_shared<State>();
  st->replies.resize(commands.size());
  st->left = commands.size();
  for (std::size_t i = 0; i < commands.size(); ++i) {
    client.async_command(commands[i], [st, i](dlock::Result<dlock::Reply> r) {
      std::lock_guard lock(st->mu);
      st->replies[i].emplace(std::move(r));
      if (--st->left == 0) st->cv.notify_all();
    });
  }
  std::unique_lock lock(st->mu);
  st->cv.wait(lock, [&] { return st->left == 0; });
  std::vector<dlock::Result<dlock::Reply>> out;
  out.reserve(commands.size());
  for (auto& r : st->replies) out.push_back(std::move(*r));
  return out;
}

namespace {

// A failure that makes the whole inspection pointless (not a per-key WRONGTYPE).
bool fatal(const dlock::Error& e) { return e.code != dlock::errc::wrong_type; }

}  // namespace

dlock::Result<std::vector<KeyInfo>> inspect_keys(dlock::Client& client, const std::vector<std::string>& keys) {
  std::vector<std::vector<std::string>> cmds;
  cmds.reserve(keys.size() * 3);
  for (const auto& k : keys) {
    cmds.push_back({"TYPE", k});
    cmds.push_back({"GET", k});
    cmds.push_back({"PTTL", k});
  }
  auto replies = pipeline(client, cmds);
  std::vector<KeyInfo> out;
  out.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto& type = replies[3 * i];
    auto& value = replies[3 * i + 1];
    auto& pttl = replies[3 * i + 2];
    for (auto* r : {&type, &value, &pttl}) {
      if (!r->ok() && fatal(r->error())) return r->error();
    }
    KeyInfo info;
    info.key = keys[i];
    info.type = type->str();
    if (value.ok() && value->is_string()) info.value = value->str();
    if (pttl->is_integer()) info.pttl = pttl->integer();
    out.push_back(std::move(info));
  }
  return out;
}

dlock::Result<void> scan_keys(dlock::Client& client, const std::string& match,
                              const std::function<dlock::Result<void>(std::vector<std::string>)>& batch) {
  std::string cursor = "0";
  std::unordered_set<std::string> seen;
  do {
    auto r = client.command({"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
    if (!r) return r.error();
    if (!r->is_array() || r->size() != 2 || !(*r)[1].is_array()) {
      return dlock::Error(dlock::errc::protocol, "unexpected SCAN reply: " + r->to_string());
    }
    cursor = (*r)[0].str();
    std::vector<std::string> keys;
    for (const auto& k : (*r)[1].elements()) {
      if (seen.insert(k.str()).second) keys.push_back(k.str());
    }
    if (!keys.empty()) {
      if (auto ok = batch(std::move(keys)); !ok) return ok;
    }
  } while (cursor != "0");
  return {};
}

std::string lock_kind(const std::string& type) {
  if (type == "string") return "mutex";
  return type;
}

}  // namespace dlock::cli
