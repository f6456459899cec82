// ClusterRouter: sends each command to the Cluster primary that serves its key's slot.
//
// The slot map comes from CLUSTER SLOTS, asked of any known node at start and again (debounced)
// after a MOVED, a connection failure or a CLUSTERDOWN. Redirections are followed on the loop
// thread without the caller noticing:
//   MOVED       the slot has a new owner: patch the map, re-send there, refresh the whole map soon
//   ASK         the slot is migrating: ASKING + the command on the target node, once; map unchanged
//   TRYAGAIN    (multi-key command during a migration) and CLUSTERDOWN: re-sent after a short,
//               growing delay, within the command's deadline (ClientOptions::command_timeout)
// A command is only re-sent when the server said it did not run it (a redirection or one of the
// errors above) or when it never left (its node was down at the time): a command that was written
// and then lost with its connection fails with errc::connection, because it may have run.
//
// Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/node.hpp"
#include "cluster/slot_map.hpp"

namespace dlock::detail {

class ClusterRouter {
 public:
  ClusterRouter(asio::io_context& io, std::vector<ServerAddress> seeds, const ClientOptions& options,
                Connection::Observer* observer);
  ~ClusterRouter();

  void start();
  void send(std::string payload, ReplyHandler done, const Script* script = nullptr);
  // ReplicationAck: `payload` (a script) on the slot owner's acknowledgement connection (one per
  // node, used for nothing else, because WAIT blocks its connection); MOVED is followed (the
  // script did not run). Then `wait` (WAIT, with its own reply deadline: Command::timeout) on
  // the acknowledgement connection the script ran on, when wait_on() is called from the
  // script's reply handler (as ClientCore::wait_replicas is); otherwise on that of the node
  // that serves `key` now. Why not the slot map's node always: it may have changed while the
  // script was in flight (another command's MOVED, a refresh during a failover or a migration),
  // and a WAIT on another node's connection counts that connection's writes, not the script's:
  // it answered at once with that node's replicas, a false acknowledgement. WAIT names no key:
  // it is never redirected, so it is sent once, as it is.
  void send_acked(std::string payload, ReplyHandler done, const Script* script = nullptr);
  void wait_on(const std::string& key, Command wait);
  // A command was redirected for good: `slot` is served by `to` (MOVED). Loop thread.
  void moved(std::uint16_t slot, const NodeEndpoint& to);
  // Sends to one given node, no redirection handling (per-node commands: SCAN, INFO).
  void send_to(const NodeEndpoint& node, std::string payload, ReplyHandler done);
  // The node that serves `key`'s slot now (the seed while the map is unknown).
  ServerAddress node_of(std::string_view key);
  std::vector<ServerAddress> primaries() const;
  bool owns(const Connection& c) const;
  // A command connection went down: a new map is asked for when it was a primary's (or no map
  // is known yet). A node that serves no slots (a seed that left, a primary failed over) goes
  // down on every reconnect attempt while it stays dead: that changes nothing to route by.
  void on_node_down(const Connection& c);
  void refresh_soon();
  // Runs after every installed slot map (the Notifier re-routes its sharded subscriptions).
  void on_topology(std::function<void()> fn) { on_topology_ = std::move(fn); }
  bool has_map() const noexcept { return have_map_; }
  void close(const Error& why);
  // Every command connection (the nodes' and their ReplicationAck ones).
  void for_each_connection(const std::function<void(Connection&)>& fn);

 private:
  struct Routed;
  void dispatch(const std::shared_ptr<Routed>& r);
  // `from_host`: the host the answering node was reached at (for a redirect naming no host).
  void handle(const std::shared_ptr<Routed>& r, Result<Reply>&& res, const std::string& from_host);
  bool is_primary(const std::string& key) const;  // key: "host:port"
  // Closes the node `key` and keeps it in retired_ unless it is a primary, a seed, the owner of
  // a slot in slots_, or connected.
  void retire(const std::string& key);
  // Re-sends `r` after a short, growing delay (through dispatch_acked() when `acked`), or
  // delivers `last` when the delay would pass its deadline.
  void retry_later(const std::shared_ptr<Routed>& r, Result<Reply>&& last, bool acked = false);
  Node& node(const NodeEndpoint& ep);
  Connection& ack_connection(Node& n);
  void dispatch_acked(const std::shared_ptr<Routed>& r);
  Node* any_node();
  void refresh();
  void refresh_from(std::size_t attempt);
  void install(SlotMap map);
  ServerAddress address_of(const NodeEndpoint& ep) const;

  asio::io_context& io_;
  std::vector<ServerAddress> seeds_;
  const ClientOptions& options_;
  Connection::Observer* observer_;
  std::unordered_map<std::string, std::unique_ptr<Node>> nodes_;  // by "host:port"
  std::unordered_map<Node*, std::shared_ptr<Connection>> ack_conns_;
  // Unreachable nodes outside the slot map (on_node_down): their connections are closed, so they
  // stop reconnecting; kept (not freed) because a command in flight may still point at one.
  std::vector<std::unique_ptr<Node>> retired_;
  std::vector<Node*> slots_;                                       // 16384, nullptr: unknown
  Node* answering_acked_ = nullptr;  // while a send_acked() reply handler runs: the node it ran on
  std::vector<NodeEndpoint> primaries_;
  bool have_map_ = false;
  bool refreshing_ = false;
  bool refresh_again_ = false;
  bool closed_ = false;
  BootTimer refresh_timer_;
  BootClock::time_point last_refresh_{};
  std::function<void()> on_topology_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlock::detail
