// SlotMap: which primary serves each of the 16384 Cluster slots, parsed from CLUSTER SLOTS.
//
// Pure data, no I/O: the ClusterRouter asks a node for CLUSTER SLOTS and installs the parsed map;
// MOVED replies patch single slots in between. CLUSTER SLOTS (not CLUSTER SHARDS) because it exists
// on every Redis version with Cluster and is what Redis 7.0 (Debian 12) answers fastest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/reply.hpp"
#include "dlock/result.hpp"

namespace dlock::detail {

struct NodeEndpoint {
  std::string host;
  std::uint16_t port = 0;
  std::string key() const { return host + ":" + std::to_string(port); }
  friend bool operator==(const NodeEndpoint&, const NodeEndpoint&) = default;
};

class SlotMap {
 public:
  // `queried_host` replaces an empty or "?" host in the reply (a node that does not know its own
  // address announces itself that way). Fails with errc::protocol on a malformed reply and with
  // errc::server when some slot has no primary (the cluster is not fully configured).
  static Result<SlotMap> parse(const Reply& cluster_slots, std::string_view queried_host);

  // Index into primaries() of the node serving `slot`.
  std::uint16_t owner(std::uint16_t slot) const { return owner_[slot]; }
  const std::vector<NodeEndpoint>& primaries() const noexcept { return primaries_; }

 private:
  std::vector<NodeEndpoint> primaries_;
  std::vector<std::uint16_t> owner_;  // 16384 entries
};

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" (the error reply's text, prefix
// included): the slot and the node to go to. With cluster-preferred-endpoint-type
// unknown-endpoint a node answers "MOVED 3999 :6381": Redis documents that the target is then on
// the host the redirecting node was reached at (`from_host`). "?:6381" (hostname type, the
// target has none) names no reachable node: nullopt, as for any text that is no redirect.
struct Redirect {
  bool ask = false;
  std::uint16_t slot = 0;
  NodeEndpoint to;
};
std::optional<Redirect> parse_redirect(std::string_view error_text, std::string_view from_host);

}  // namespace dlock::detail
