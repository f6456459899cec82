#include "dlock/client.hpp"

#include "client_core.hpp"
#include "io/tls_context.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock {

namespace {

Result<void> validate(const ClientOptions& o) {
  if (auto ok = detail::validate_prefix(o.key_prefix); !ok) return ok;
  if (o.connect_timeout.count() <= 0) return Error(errc::invalid_argument, "connect_timeout must be positive");
  if (o.command_timeout.count() <= 0) return Error(errc::invalid_argument, "command_timeout must be positive");
  if (o.ping_interval.count() < 0) return Error(errc::invalid_argument, "ping_interval must not be negative (0: off)");
  if (o.busy_poll.count() < 0 || o.busy_poll > std::chrono::milliseconds(10)) {
    return Error(errc::invalid_argument, "busy_poll must be between 0 and 10 ms");
  }
  if (o.connections_per_node == 0 || o.connections_per_node > 64) {
    return Error(errc::invalid_argument, "connections_per_node must be 1-64");
  }
  // Redis refuses CLIENT SETNAME with any byte outside '!'..'~'; the handshake treats SETNAME
  // as optional, so such a name would be dropped without a word.
  for (unsigned char c : o.client_name) {
    if (c < '!' || c > '~') {
      return Error(errc::invalid_argument,
                   "client_name must be printable ASCII without spaces (Redis refuses other names), got '" +
                       o.client_name + "'");
    }
  }
  if (o.max_queued_commands == 0) return Error(errc::invalid_argument, "max_queued_commands must be positive");
  for (auto [what, d] : {std::pair{"connect_timeout", o.connect_timeout}, std::pair{"command_timeout", o.command_timeout},
                         std::pair{"ping_interval", o.ping_interval},
                         std::pair{"shutdown_timeout", o.shutdown_timeout},
                         std::pair{"replication_ack.timeout", o.replication_ack.timeout},
                         std::pair{"reconnect.initial", o.reconnect.initial}, std::pair{"reconnect.max", o.reconnect.max}}) {
    if (auto ok = detail::validate_bounded(what, d); !ok) return ok;
  }
  // Redis reads WAIT's timeout 0 as "block forever", and refuses a negative one; the timeout
  // means nothing while acknowledgement is off (replicas 0).
  if (o.replication_ack.replicas > 0 && o.replication_ack.timeout.count() <= 0) {
    return Error(errc::invalid_argument, "replication_ack.timeout must be positive, not " +
                                             std::to_string(o.replication_ack.timeout.count()) +
                                             " ms (WAIT 0 blocks forever)");
  }
  return {};
}

Result<Reply> to_result(Result<Reply> r, const std::string& where) {
  if (r.ok() && r->is_error()) return Error(detail::classify_error_reply(*r), where + ": " + r->str());
  return r;
}

}  // namespace

Client::Client(std::string_view url, ClientOptions options) {
  auto deployment = parse_deployment_url(url);
  if (!deployment) throw_error(deployment.code(), deployment.error().what());
  if (auto ok = validate(options); !ok) throw_error(ok.code(), ok.error().what());
  for (auto& node : deployment->nodes) {
    if (auto ok = detail::resolve_tls(node, options.tls); !ok) throw_error(ok.code(), ok.error().what());
  }
  core_ = std::make_shared<detail::ClientCore>(std::move(*deployment), std::move(options));
  core_->start();
}

Client::~Client() { core_->shutdown(); }

Result<Reply> Client::command(std::vector<std::string> args, std::stop_token stop) {
  if (args.empty()) return Error(errc::invalid_argument, "empty command");
  if (core_->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "Client::command() called on the client's event-loop thread");
  }
  auto wait = std::make_shared<detail::SyncWait<Result<Reply>>>();
  const std::string where = args[0] + " on " + core_->where();
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
  if (stop.stop_possible()) {
    on_stop.emplace(stop, std::function<void()>([wait, where] {
                      wait->set(Error(errc::cancelled, where + " cancelled"));
                    }));
  }
  core_->send(detail::format_command(args), [wait](Result<Reply> r) { wait->set(std::move(r)); });
  return to_result(wait->wait(*core_), where);
}

std::vector<ServerAddress> Client::primaries() const {
  if (core_->on_loop_thread()) return core_->primaries();
  if (core_->is_shut_down()) return {};
  auto wait = std::make_shared<detail::SyncWait<std::vector<ServerAddress>>>();
  core_->post([wait, core = core_] { wait->set(core->primaries()); });
  return wait->wait();
}

const Deployment& Client::deployment() const noexcept { return core_->deployment(); }

Result<Reply> Client::command_on(const ServerAddress& node, std::vector<std::string> args, std::stop_token stop) {
  if (args.empty()) return Error(errc::invalid_argument, "empty command");
  if (core_->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "Client::command_on() called on the client's event-loop thread");
  }
  auto wait = std::make_shared<detail::SyncWait<Result<Reply>>>();
  const std::string where = args[0] + " on " + node.display();
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
  if (stop.stop_possible()) {
    on_stop.emplace(stop, std::function<void()>([wait, where] {
                      wait->set(Error(errc::cancelled, where + " cancelled"));
                    }));
  }
  core_->post([core = core_, node, payload = detail::format_command(args), wait]() mutable {
    core->send_to(node, std::move(payload), [wait](Result<Reply> r) { wait->set(std::move(r)); });
  });
  return to_result(wait->wait(*core_), where);
}

void Client::async_command(std::vector<std::string> args, std::function<void(Result<Reply>)> done) {
  if (args.empty()) {
    core_->post([done = std::move(done)] { done(Error(errc::invalid_argument, "empty command")); });
    return;
  }
  std::string where = args[0] + " on " + core_->where();
  core_->send(detail::format_command(args),
              [done = std::move(done), where = std::move(where)](Result<Reply> r) { done(to_result(std::move(r), where)); });
}

Result<void> Client::ping(milliseconds timeout) {
  if (core_->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "Client::ping() called on the client's event-loop thread");
  }
  timeout = std::min(timeout, max_duration);  // longer: no end, and now + timeout must not overflow
  const auto until = BootClock::now() + timeout;
  Error last(errc::timeout, "no answer from " + core_->where() + " within " +
                                std::to_string(timeout.count()) + " ms");
  for (;;) {
    const auto left = until - BootClock::now();
    if (left.count() <= 0) return last;
    auto wait = std::make_shared<detail::SyncWait<Result<Reply>>>();
    core_->send(detail::format_command({"PING"}), [wait](Result<Reply> r) { wait->set(std::move(r)); });
    auto r = wait->wait_for(left, *core_);
    if (!r) return last;  // still no answer at the deadline (the command itself runs on)
    auto reply = to_result(std::move(*r), "PING on " + core_->where());
    if (reply.ok()) return {};
    last = reply.error();
    if (reply.code() == errc::auth || reply.code() == errc::shutdown) return last;
    std::this_thread::sleep_for(std::min<BootClock::duration>(milliseconds(20), until - BootClock::now()));
  }
}

std::size_t Client::active_leases() const { return core_->active_leases(); }
const ServerAddress& Client::address() const noexcept { return core_->address(); }
const std::string& Client::owner_identity() const noexcept { return core_->identity(); }
const ClientOptions& Client::options() const noexcept { return core_->options(); }
bool Client::on_event_loop_thread() const noexcept { return core_->on_loop_thread(); }

}  // namespace dlock
