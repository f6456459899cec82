#include "redis_batch.hpp"

#include <unordered_set>

#include "node_fanout.hpp"

namespace dlock::cli {

dlock::Result<void> scan_keys(dlock::Client& client, const std::string& match,
                              const std::function<dlock::Result<void>(std::vector<std::string>)>& batch) {
  auto nodes = data_nodes(client);
  if (!nodes) return nodes.error();
  std::unordered_set<std::string> seen;
  for (const auto& node : *nodes) {
    std::string cursor = "0";
    do {
      auto r = client.command_on(node, {"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
      if (!r) return dlock::Error(r.code(), "scanning " + node.display() + ": " + r.error().what());
      if (!r->is_array() || r->size() != 2 || !(*r)[1].is_array()) {
        return dlock::Error(dlock::errc::protocol, "unexpected SCAN reply from " + node.display() + ": " + r->to_string());
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
  }
  return {};
}

}  // namespace dlock::cli
