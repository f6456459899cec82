// Node: the command connections to one Redis node (a standalone server, the Sentinel-managed
// primary, or one Cluster primary). A small fixed number of pipelined connections, used round
// robin among those that are ready.
#pragma once

#include <memory>
#include <vector>

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
