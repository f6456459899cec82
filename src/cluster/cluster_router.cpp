#include "cluster/cluster_router.hpp"

#include <algorithm>

#include "cluster/command_slot.hpp"
#include "io/command.hpp"
#include "util/slot.hpp"

namespace dlock::detail {
namespace {

constexpr int max_redirects = 5;
constexpr auto min_refresh_interval = std::chrono::milliseconds(100);
constexpr auto refresh_retry = std::chrono::milliseconds(250);

}  // namespace

struct ClusterRouter::Routed {
  std::string payload;
  ReplyHandler done;
  const Script* script = nullptr;  // Command::script
  std::optional<std::uint16_t> slot;
  int redirects = 0;
  int retries = 0;
  BootClock::time_point deadline;
};

ClusterRouter::ClusterRouter(asio::io_context& io, std::vector<ServerAddress> seeds, const ClientOptions& options,
                             Connection::Observer* observer)
    : io_(io),
      seeds_(std::move(seeds)),
      options_(options),
      observer_(observer),
      slots_(cluster_slots, nullptr),
      refresh_timer_(io) {}

ClusterRouter::~ClusterRouter() { *alive_ = false; }

void ClusterRouter::start() {
  for (const auto& s : seeds_) node(NodeEndpoint{s.host, s.port});
  refresh();
}

ServerAddress ClusterRouter::address_of(const NodeEndpoint& ep) const {
  ServerAddress a = seeds_.front();  // credentials and TLS settings are the same on every node
  a.transport = ServerAddress::Transport::tcp;
  a.host = ep.host;
  a.port = ep.port;
  a.db = 0;
  return a;
}

Node& ClusterRouter::node(const NodeEndpoint& ep) {
  const std::string key = ep.key();
  auto it = nodes_.find(key);
  if (it != nodes_.end()) return *it->second;
  auto n = std::make_unique<Node>(io_, address_of(ep), options_, observer_);
  Node& ref = *n;
  nodes_.emplace(key, std::move(n));
  if (!closed_) ref.start();
  return ref;
}

Node* ClusterRouter::any_node() {
  for (const auto& p : primaries_) {
    Node& n = node(p);
    if (n.any_ready()) return &n;
  }
  for (auto& [key, n] : nodes_) {
    if (n->any_ready()) return n.get();
  }
  for (auto& [key, n] : nodes_) {
    if (!n->all_down()) return n.get();
  }
  return &node(NodeEndpoint{seeds_.front().host, seeds_.front().port});
}

bool ClusterRouter::owns(const Connection& c) const {
  for (const auto& [key, n] : nodes_) {
    if (n->owns(c)) return true;
  }
  return false;
}

void ClusterRouter::send(std::string payload, ReplyHandler done, const Script* script) {
  auto r = std::make_shared<Routed>();
  r->script = script;
  r->slot = command_slot(payload);
  r->payload = std::move(payload);
  r->done = std::move(done);
  r->deadline = BootClock::now() + options_.command_timeout;
  dispatch(r);
}

Connection& ClusterRouter::ack_connection(Node& n) {
  auto& c = ack_conns_[&n];
  if (!c) {
    c = std::make_shared<Connection>(io_, n.address, options_, nullptr, false);
    c->start();
  }
  return *c;
}

void ClusterRouter::send_acked(std::string payload, ReplyHandler done, const Script* script) {
  auto r = std::make_shared<Routed>();
  r->script = script;
  r->slot = command_slot(payload);
  r->payload = std::move(payload);
  r->done = std::move(done);
  r->deadline = BootClock::now() + options_.command_timeout;
  dispatch_acked(r);
}

void ClusterRouter::dispatch_acked(const std::shared_ptr<Routed>& r) {
  if (closed_) return r->done(Error(errc::shutdown, "client is shut down"));
  Node* n = (r->slot && slots_[*r->slot] != nullptr) ? slots_[*r->slot] : any_node();
  ack_connection(*n).send(Command{r->payload, [this, alive = std::weak_ptr<bool>(alive_), r, n](Result<Reply> res) {
    if (alive.expired() || closed_) return r->done(std::move(res));
    if (!res.ok() || !res->is_error()) {
      // The reply's handler sends the WAIT (wait_on): to this node, whatever the map says now.
      answering_acked_ = n;
      r->done(std::move(res));
      answering_acked_ = nullptr;
      return;
    }
    const std::string& text = res->str();
    auto redirect = parse_redirect(text, n->address.host);
    if (redirect && !redirect->ask && ++r->redirects <= max_redirects) {
      // Go where the redirect says: the command's own slot may be a guess (its key is not
      // always the first argument: OBJECT ENCODING k, XREAD ... STREAMS k).
      moved(redirect->slot, redirect->to);
      r->slot = redirect->slot;
      return dispatch_acked(r);
    }
    if (redirect || text.starts_with("TRYAGAIN") || text.starts_with("CLUSTERDOWN") || text.starts_with("MOVED ") ||
        text.starts_with("ASK ")) {
      // A migrating slot: the acknowledged path needs the script and its WAIT on one node, so
      // it waits for the migration to end instead of following ASK. (A redirect naming no
      // usable node, "?:port", waits for a new map.)
      if (!redirect && !text.starts_with("TRYAGAIN")) refresh_soon();
      return retry_later(r, std::move(res), true);
    }
    r->done(std::move(res));
  }, {}, r->script});
}

void ClusterRouter::wait_on(const std::string& key, Command wait) {
  if (closed_) return wait.done(Error(errc::shutdown, "client is shut down"));
  Node* n = answering_acked_ ? answering_acked_ : slots_[key_slot(key)];
  if (n == nullptr) n = any_node();
  ack_connection(*n).send(std::move(wait));
}

void ClusterRouter::moved(std::uint16_t slot, const NodeEndpoint& to) {
  slots_[slot] = &node(to);
  refresh_soon();
}

void ClusterRouter::send_to(const NodeEndpoint& ep, std::string payload, ReplyHandler done) {
  if (closed_) return done(Error(errc::shutdown, "client is shut down"));
  Connection& c = node(ep).pick_for(payload);
  c.send(Command{std::move(payload), std::move(done)});
}

void ClusterRouter::dispatch(const std::shared_ptr<Routed>& r) {
  if (closed_) return r->done(Error(errc::shutdown, "client is shut down"));
  Node* n = (r->slot && slots_[*r->slot] != nullptr) ? slots_[*r->slot] : any_node();
  Connection& c = n->pick(r->slot);
  if (c.state() == Connection::State::down) {
    // The owner is unreachable: the command has not left, so it may wait for a new map (a
    // replica being promoted) within its deadline. Past it, the send below fails fast.
    refresh_soon();
    if (BootClock::now() + std::chrono::milliseconds(50) < r->deadline) {
      Result<Reply> none = Error(errc::connection, n->address.display() + " is unreachable");
      return retry_later(r, std::move(none));
    }
  }
  c.send(Command{r->payload, [this, alive = std::weak_ptr<bool>(alive_), r, from = n->address.host](Result<Reply> res) {
                   if (alive.expired()) return r->done(std::move(res));
                   handle(r, std::move(res), from);
                 }, {}, r->script});
}

void ClusterRouter::handle(const std::shared_ptr<Routed>& r, Result<Reply>&& res, const std::string& from_host) {
  if (closed_) return r->done(std::move(res));
  if (!res.ok()) {
    if (res.code() == errc::connection || res.code() == errc::timeout) refresh_soon();
    return r->done(std::move(res));
  }
  if (!res->is_error()) return r->done(std::move(res));
  const std::string& text = res->str();
  if (auto redirect = parse_redirect(text, from_host)) {
    if (++r->redirects > max_redirects) {
      return r->done(Error(errc::server, "too many cluster redirections; last: " + text));
    }
    if (!redirect->ask) {
      // Go where the redirect says: the command's own slot may be a guess (its key is not
      // always the first argument: OBJECT ENCODING k, XREAD ... STREAMS k).
      moved(redirect->slot, redirect->to);
      r->slot = redirect->slot;
      return dispatch(r);
    }
    // ASK: this one command, on the importing node, preceded by ASKING on the same connection.
    Connection& to = node(redirect->to).pick(r->slot);
    to.send(Command{format_command({"ASKING"}), [](Result<Reply>) {}});
    return to.send(Command{r->payload, [this, alive = std::weak_ptr<bool>(alive_), r, from = redirect->to.host](Result<Reply> again) {
                             if (alive.expired()) return r->done(std::move(again));
                             handle(r, std::move(again), from);
                           }, {}, r->script});
  }
  if (text.starts_with("TRYAGAIN") || text.starts_with("CLUSTERDOWN") || text.starts_with("MOVED ") ||
      text.starts_with("ASK ")) {
    // A redirect that names no usable node ("?": its host is unknown): a new map may say.
    if (!text.starts_with("TRYAGAIN")) refresh_soon();
    return retry_later(r, std::move(res));
  }
  r->done(std::move(res));
}

void ClusterRouter::retry_later(const std::shared_ptr<Routed>& r, Result<Reply>&& last, bool acked) {
  const auto delay = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(10 << std::min(r->retries, 5)),
                                                         std::chrono::milliseconds(250));
  if (BootClock::now() + delay >= r->deadline) return r->done(std::move(last));
  ++r->retries;
  r->redirects = 0;  // a new attempt: the redirection limit guards against loops within one
  auto timer = std::make_shared<BootTimer>(io_);
  timer->expires_after(delay);
  timer->async_wait([this, alive = std::weak_ptr<bool>(alive_), r, timer, acked](std::error_code) {
    if (alive.expired()) return r->done(Error(errc::shutdown, "client is shut down"));
    if (acked) return dispatch_acked(r);
    dispatch(r);
  });
}

void ClusterRouter::refresh_soon() {
  if (closed_) return;
  if (refreshing_) {
    refresh_again_ = true;
    return;
  }
  const auto now = BootClock::now();
  if (now - last_refresh_ >= min_refresh_interval) return refresh();
  if (refresh_again_) return;  // a timer is already armed
  refresh_again_ = true;
  refresh_timer_.expires_at(last_refresh_ + min_refresh_interval);
  refresh_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
    if (ec || alive.expired() || closed_) return;
    refresh_again_ = false;
    if (!refreshing_) refresh();
  });
}

void ClusterRouter::refresh() {
  refreshing_ = true;
  refresh_from(0);
}

void ClusterRouter::refresh_from(std::size_t attempt) {
  // Known primaries first (the ready ones before the others), then the seeds.
  std::vector<NodeEndpoint> candidates;
  for (const auto& p : primaries_) {
    if (node(p).any_ready()) candidates.push_back(p);
  }
  for (const auto& p : primaries_) {
    if (!node(p).any_ready()) candidates.push_back(p);
  }
  for (const auto& s : seeds_) {
    NodeEndpoint ep{s.host, s.port};
    if (std::find(candidates.begin(), candidates.end(), ep) == candidates.end()) candidates.push_back(ep);
  }
  if (attempt >= candidates.size()) {
    // Nobody answered: try again later; commands meanwhile use the old map (or fail fast).
    refreshing_ = false;
    last_refresh_ = BootClock::now();
    refresh_again_ = true;
    refresh_timer_.expires_after(refresh_retry);
    refresh_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
      if (ec || alive.expired() || closed_) return;
      refresh_again_ = false;
      if (!refreshing_) refresh();
    });
    return;
  }
  const NodeEndpoint ep = candidates[attempt];
  node(ep).pick().send(Command{format_command({"CLUSTER", "SLOTS"}),
                               [this, alive = std::weak_ptr<bool>(alive_), ep, attempt](Result<Reply> r) {
                                 if (alive.expired() || closed_) return;
                                 if (r.ok()) {
                                   auto map = SlotMap::parse(*r, ep.host);
                                   if (map.ok()) {
                                     install(std::move(*map));
                                     refreshing_ = false;
                                     last_refresh_ = BootClock::now();
                                     if (refresh_again_) {
                                       refresh_again_ = false;
                                       refresh_soon();
                                     }
                                     return;
                                   }
                                 }
                                 refresh_from(attempt + 1);
                               }});
}

void ClusterRouter::install(SlotMap map) {
  primaries_ = map.primaries();
  std::vector<Node*> by_index;
  by_index.reserve(primaries_.size());
  for (const auto& p : primaries_) by_index.push_back(&node(p));
  for (std::size_t s = 0; s < cluster_slots; ++s) slots_[s] = by_index[map.owner(static_cast<std::uint16_t>(s))];
  have_map_ = true;
  if (on_topology_) on_topology_();
}

bool ClusterRouter::is_primary(const std::string& key) const {
  return std::any_of(primaries_.begin(), primaries_.end(), [&](const NodeEndpoint& p) { return p.key() == key; });
}

void ClusterRouter::on_node_down(const Connection& c) {
  if (!have_map_) return refresh_soon();
  for (const auto& [key, n] : nodes_) {
    if (!n->owns(c)) continue;
    if (is_primary(key)) return refresh_soon();
    // A node outside the map failed to connect (a primary failed over and dead, a redirect
    // target gone): stop it, or it would reconnect for ever. Seeds stay (a refresh may start
    // over there). Posted: not from inside the connection's own failure.
    asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_), key = key] {
      if (!alive.expired() && !closed_) retire(key);
    });
    return;
  }
}

void ClusterRouter::retire(const std::string& key) {
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return;
  Node* n = it->second.get();
  const bool seed = std::any_of(seeds_.begin(), seeds_.end(), [&](const ServerAddress& s) {
    return s.host == n->address.host && s.port == n->address.port;
  });
  // A node a MOVED pointed slots at is kept until a map says otherwise (moved() asked for one).
  const bool routed = std::find(slots_.begin(), slots_.end(), n) != slots_.end();
  if (is_primary(key) || seed || routed || n->any_ready()) return;
  const Error why(errc::connection, n->address.display() + " is unreachable and serves no slots");
  n->close(why);
  if (auto a = ack_conns_.find(n); a != ack_conns_.end()) {
    a->second->close(why);
    ack_conns_.erase(a);
  }
  retired_.push_back(std::move(it->second));
  nodes_.erase(it);
}

ServerAddress ClusterRouter::node_of(std::string_view key) {
  Node* n = slots_[key_slot(key)];
  if (n != nullptr) return n->address;
  return address_of(NodeEndpoint{seeds_.front().host, seeds_.front().port});
}

std::vector<ServerAddress> ClusterRouter::primaries() const {
  std::vector<ServerAddress> out;
  if (primaries_.empty()) {
    out.push_back(seeds_.front());
    return out;
  }
  for (const auto& p : primaries_) out.push_back(address_of(p));
  return out;
}

void ClusterRouter::for_each_connection(const std::function<void(Connection&)>& fn) {
  for (auto& [key, n] : nodes_) {
    for (auto& c : n->conns) fn(*c);
  }
  for (auto& [n, c] : ack_conns_) fn(*c);
}

void ClusterRouter::close(const Error& why) {
  closed_ = true;
  refresh_timer_.cancel();
  for (auto& [key, n] : nodes_) n->close(why);
  for (auto& [n, c] : ack_conns_) c->close(why);
}

}  // namespace dlock::detail
