// Node: the command connections to one Redis node (a standalone server, the Sentinel-managed
// primary, or one Cluster primary). A small fixed number of pipelined connections: a command
// with a key goes to the one its hash slot names, others round robin among those that are ready.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "cluster/command_slot.hpp"
#include "io/connection.hpp"

namespace dlock::detail {

struct Node {
  Node(asio::io_context& io, ServerAddress addr, const ClientOptions& options, Connection::Observer* observer)
      : address(std::move(addr)) {
    const unsigned n = std::max(1u, options.connections_per_node);
    for (unsigned i = 0; i < n; ++i) {
      conns.push_back(std::make_shared<Connection>(io, address, options, observer, false));
    }
  }

  // A keyed command (slot: its first key's hash slot) goes to the connection the slot names, so
  // the commands of one lock, whose keys share the hash tag {N}, reach the server in the order
  // they were sent, as on a single connection: a waiter's withdrawal cannot overtake its own
  // try, nor a release the acquire it follows. While that connection is connecting, the command
  // queues behind the ones sent before it. Only while it is down (its commands fail fast) does
  // another connection take the command. A script whose keys span slots (a MultiLock on a
  // standalone server) is ordered with its first key's commands only.
  Connection& pick(std::optional<std::uint16_t> slot) {
    if (!slot || conns.size() == 1) return pick();
    Connection& c = *conns[*slot % conns.size()];
    if (c.state() != Connection::State::down) return c;
    return pick();
  }
  // The same for an encoded command, whose key is read back from the payload only when there
  // is more than one connection to choose from.
  Connection& pick_for(std::string_view payload) {
    return conns.size() == 1 ? *conns.front() : pick(command_slot(payload));
  }

  // Prefers a ready connection; otherwise the next one (it queues, or fails fast while down).
  Connection& pick() {
    const std::size_t n = conns.size();
    for (std::size_t i = 0; i < n; ++i) {
      Connection& c = *conns[(next + i) % n];
      if (c.state() == Connection::State::ready) {
        next = (next + i + 1) % n;
        return c;
      }
    }
    Connection& c = *conns[next];
    next = (next + 1) % n;
    return c;
  }
  bool owns(const Connection& c) const {
    for (const auto& p : conns) {
      if (p.get() == &c) return true;
    }
    return false;
  }
  bool any_ready() const {
    for (const auto& p : conns) {
      if (p->state() == Connection::State::ready) return true;
    }
    return false;
  }
  bool all_down() const {
    for (const auto& p : conns) {
      if (p->state() != Connection::State::down) return false;
    }
    return true;
  }
  void start() {
    for (auto& c : conns) c->start();
  }
  void retarget(const ServerAddress& to) {
    address = to;
    for (auto& c : conns) c->retarget(to);
  }
  void close(const Error& why) {
    for (auto& c : conns) c->close(why);
  }

  ServerAddress address;
  std::vector<std::shared_ptr<Connection>> conns;
  std::size_t next = 0;
};

}  // namespace dlock::detail
