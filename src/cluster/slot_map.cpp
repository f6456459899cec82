#include "cluster/slot_map.hpp"

#include "util/port.hpp"
#include "util/slot.hpp"

namespace dlock::detail {
namespace {

constexpr std::uint16_t unowned = 0xffff;

std::optional<long long> integer_of(const Reply& r) {
  if (r.is_integer()) return r.integer();
  return r.as_integer();
}

}  // namespace

Result<SlotMap> SlotMap::parse(const Reply& reply, std::string_view queried_host) {
  if (reply.is_error()) return Error(errc::server, "CLUSTER SLOTS failed: " + reply.str());
  if (!reply.is_array()) return Error(errc::protocol, "CLUSTER SLOTS: the reply is not an array");
  SlotMap map;
  map.owner_.assign(cluster_slots, unowned);
  for (std::size_t i = 0; i < reply.size(); ++i) {
    const Reply& range = reply[i];
    if (!range.is_array() || range.size() < 3 || !range[2].is_array() || range[2].size() < 2) {
      return Error(errc::protocol, "CLUSTER SLOTS: malformed slot range " + std::to_string(i));
    }
    auto first = integer_of(range[0]);
    auto last = integer_of(range[1]);
    auto port = integer_of(range[2][1]);
    if (!first || !last || !port || *first < 0 || *last >= cluster_slots || *first > *last || *port <= 0 ||
        *port > 65535) {
      return Error(errc::protocol, "CLUSTER SLOTS: bad numbers in slot range " + std::to_string(i));
    }
    NodeEndpoint ep{range[2][0].str(), static_cast<std::uint16_t>(*port)};
    if (ep.host.empty() || ep.host == "?") ep.host = std::string(queried_host);
    std::uint16_t index = 0;
    while (index < map.primaries_.size() && !(map.primaries_[index] == ep)) ++index;
    if (index == map.primaries_.size()) map.primaries_.push_back(ep);
    for (long long s = *first; s <= *last; ++s) map.owner_[static_cast<std::size_t>(s)] = index;
  }
  for (std::size_t s = 0; s < cluster_slots; ++s) {
    if (map.owner_[s] == unowned) {
      return Error(errc::server, "the cluster does not serve slot " + std::to_string(s) + " (not all slots are assigned)");
    }
  }
  return map;
}

std::optional<Redirect> parse_redirect(std::string_view text, std::string_view from_host) {
  Redirect r;
  if (text.starts_with("MOVED ")) {
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    r.ask = true;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + space, slot);
  if (ec != std::errc() || ptr != text.data() + space || slot >= cluster_slots) return std::nullopt;
  r.slot = static_cast<std::uint16_t>(slot);
  std::string_view hostport = text.substr(space + 1);
  auto colon = hostport.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto port = parse_port(hostport.substr(colon + 1));
  if (!port) return std::nullopt;
  r.to.host = std::string(hostport.substr(0, colon));
  if (r.to.host == "?") return std::nullopt;  // the target's hostname is not known: no node to go to
  if (r.to.host.empty()) r.to.host = std::string(from_host);
  r.to.port = *port;
  return r;
}

}  // namespace dlock::detail
