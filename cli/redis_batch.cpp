#include "redis_batch.hpp"

#include <unordered_set>

namespace dlock::cli {

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

}  // namespace dlock::cli
