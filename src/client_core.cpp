#include "client_core.hpp"

#include <unistd.h>

#include <array>
#include <charconv>
#include <functional>
#include <memory>
#include <thread>
#include <vector>
#include <future>
#include <utility>

#include <openssl/evp.h>

#include "cluster/cluster_router.hpp"
#include "cluster/node.hpp"
#include "cluster/sentinel_watcher.hpp"
#include "cluster/sharded_scripts.hpp"
#include "renewal/lease_record.hpp"
#include "scripts/script_call.hpp"
#include "util/random_hex.hpp"

namespace dlock::detail {
namespace {

std::string host_name() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return "unknown-host";
  return buf.data();
}

std::string sha1_hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha1(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 15]);
  }
  return out;
}

// Replaces the SHA1 of an EVALSHA encoding ("*N\r\n$7\r\nEVALSHA\r\n$40\r\n<sha1>..."), in place.
void rewrite_evalsha(std::string& payload, const char* sha1) {
  const std::size_t at = payload.find("\r\n") + 2 + std::string_view("$7\r\nEVALSHA\r\n$40\r\n").size();
  payload.replace(at, 40, sha1, 40);
}

}  // namespace

// A script as run on Redis Cluster: its PUBLISH calls become SPUBLISH, so a release is delivered
// by the one shard that holds the lock instead of being broadcast over the whole cluster bus.
struct ScriptVariant {
  std::string name, source, sha1;
  Script script{};
};

ClientCore::ClientCore(Deployment deployment, ClientOptions options)
    : deployment_(std::move(deployment)),
      address_(deployment_.nodes.front()),
      address_display_(address_.display()),
      cluster_mode_(deployment_.kind == Deployment::Kind::cluster),
      options_(std::move(options)),
      identity_(host_name() + ":" + std::to_string(::getpid())),
      client_id_(random_hex(16)) {
  notifier_ = std::make_unique<Notifier>(io_, address_, options_);
  switch (deployment_.kind) {
    case Deployment::Kind::standalone:
      primary_ = std::make_unique<Node>(io_, address_, options_, this);
      primary_known_ = true;
      break;
    case Deployment::Kind::cluster:
      cluster_ = std::make_unique<ClusterRouter>(io_, deployment_.nodes, options_, this);
      cluster_->on_topology([this] { notifier_->reroute(); });
      notifier_->use_sharded([this](const std::string& channel) { return cluster_->node_of(channel); },
                             [this] { cluster_->refresh_soon(); });
      break;
    case Deployment::Kind::sentinel:
      // Messages name the primary, not the first sentinel (whose address the URL gives first).
      address_display_ = "the primary '" + deployment_.master_name + "' of its sentinels";
      // The primary's address is not known yet: its connections start when a sentinel names it.
      primary_ = std::make_unique<Node>(io_, address_, options_, this);
      notifier_->hold_until_retarget();
      sentinel_ = std::make_unique<SentinelWatcher>(io_, deployment_.nodes, deployment_.master_name, address_, options_,
                                                    [this](Result<ServerAddress> p) { on_primary(std::move(p)); });
      break;
  }
  renewals_ = std::make_unique<RenewalScheduler>(*this, io_);
}

ClientCore::~ClientCore() { shutdown(); }

void ClientCore::on_primary(Result<ServerAddress> primary) {
  if (!primary) {
    discovery_error_ = primary.error();
    if (!primary_known_) {
      discovery_failed_ = true;
      // Commands queued while waiting for the first answer fail now instead of hanging.
      for (auto& c : primary_->conns) c->fail_queued(discovery_error_);
      notifier_->fail_queued(discovery_error_);
    }
    return;
  }
  discovery_error_ = {};
  discovery_failed_ = false;
  const bool first = !primary_known_;
  primary_known_ = true;
  primary_->retarget(*primary);
  notifier_->retarget(*primary);
  if (ack_node_) ack_node_->retarget(*primary);
  if (first) {
    primary_->start();
    if (ack_node_) ack_node_->start();
  }
}

std::vector<ServerAddress> ClientCore::primaries() const {
  if (cluster_) return cluster_->primaries();
  return {primary_->address};
}

void ClientCore::send_to(const ServerAddress& node, std::string payload, ReplyHandler done) {
  if (shut_down_.load() && !work_) return done(Error(errc::shutdown, "client is shut down"));
  if (cluster_) return cluster_->send_to(NodeEndpoint{node.host, node.port}, std::move(payload), std::move(done));
  send_now(std::move(payload), std::move(done));
}

Connection& ClientCore::ack_connection() {
  if (!ack_node_) {
    // Observed on Sentinel: a READONLY or a lost connection here means a failover as much as on
    // the primary's other connections (acquisitions with replication_ack use only this one).
    ack_node_ = std::make_unique<Node>(io_, primary_->address, options_, sentinel_ ? this : nullptr);
    ack_node_->conns.resize(1);
    if (primary_known_) ack_node_->start();
  }
  return ack_node_->pick();
}

void ClientCore::eval_acknowledged(const Script& s, std::string payload, ReplyHandler done) {
  if (shut_down_.load() && !work_) return done(Error(errc::shutdown, "client is shut down"));
  const Script& run = script_to_run(s, payload);
  if (!cluster_ && !primary_known_ && discovery_failed_) return done(discovery_error_);
  // The one retry after NOSCRIPT (or an ACL that refuses EVAL) is the connection's, so it
  // stays on the connection whose WAIT must cover its write (Connection::retry_script).
  if (cluster_) return cluster_->send_acked(std::move(payload), std::move(done), &run);
  ack_connection().send(Command{std::move(payload), std::move(done), {}, &run});
}

void ClientCore::wait_replicas(const ReplicationAck& ack, const std::string& key,
                               std::function<void(Result<long long>)> done) {
  const auto what = "WAIT " + std::to_string(ack.replicas) + " " + std::to_string(ack.timeout.count());
  // WAIT 0 blocks forever. The Client's option and per-lock overrides are refused where they
  // are given (Client and lock constructors); this guard keeps a WAIT that would never end from
  // being sent should one ever get through.
  if (ack.timeout.count() <= 0) {
    return done(Error(errc::invalid_argument, "replication_ack.timeout must be positive, not " +
                                                  std::to_string(ack.timeout.count()) + " ms (WAIT 0 blocks forever)"));
  }
  ReplyHandler on_reply = [what, done = std::move(done)](Result<Reply> r) {
    if (!r.ok()) return done(Error(r.code(), what + ": " + r.error().what()));
    if (r->is_error()) return done(Error(classify_error_reply(*r), what + ": " + r->str()));
    if (!r->is_integer()) return done(Error(errc::protocol, what + ": unexpected reply " + r->to_string()));
    done(r->integer());
  };
  // The server holds the reply for up to the ack timeout: the reply gets command_timeout on top
  // of that, or a WAIT at least as long as command_timeout would close the acknowledgement
  // connection as stuck (errc::timeout) instead of answering (errc::not_replicated).
  Command wait{format_command({"WAIT", std::to_string(ack.replicas), std::to_string(ack.timeout.count())}),
               std::move(on_reply), ack.timeout + options_.command_timeout};
  if (cluster_) return cluster_->wait_on(key, std::move(wait));
  ack_connection().send(std::move(wait));
}

const Script& ClientCore::cluster_variant(const Script& s) {
  std::lock_guard lock(variants_mu_);
  auto& v = variants_[&s];
  if (!v) {
    v = std::make_unique<ScriptVariant>();
    v->name = s.name;
    v->source = to_sharded_pubsub(s.source);
    v->sha1 = sha1_hex(v->source);
    v->script = Script{v->name.c_str(), v->source.c_str(), v->sha1.c_str()};
  }
  return v->script;
}

const Script& ClientCore::script_to_run(const Script& s, std::string& payload) {
  if (!cluster_mode_) return s;
  const Script& run = cluster_variant(s);
  rewrite_evalsha(payload, run.sha1);
  return run;
}

std::string ClientCore::new_owner_token() const {
  // Drawn per acquisition: built in one allocation.
  // Wall-clock time of the acquisition, for operators ("held for 3 min"); never used for
  // validity, which is measured on BootClock.
  const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  char ms[24];
  const std::size_t ms_len = static_cast<std::size_t>(std::to_chars(ms, ms + sizeof ms, unix_ms.count()).ptr - ms);
  std::string token;
  token.reserve(32 + 1 + identity_.size() + 1 + ms_len);
  append_random_hex(token, 16);
  token.append(1, '@').append(identity_).append(1, ':').append(ms, ms_len);
  return token;
}

std::string ClientCore::lock_what(std::string_view kind, std::string_view name, std::string_view qualifier) const {
  constexpr std::string_view quote = " '", unquote = "'", on = " on ";
  std::string s;
  s.reserve(kind.size() + quote.size() + name.size() + unquote.size() + qualifier.size() + on.size() +
            address_display_.size());
  s.append(kind).append(quote).append(name).append(unquote).append(qualifier).append(on).append(address_display_);
  return s;
}

// Refused once the connections are closed, not as soon as the shutdown begins: its step 1 leaves
// a lease whose release a caller claimed to that caller, and that release, sent a moment after
// the shutdown began, must still go out (refused, it left the key to its TTL: LoopEndTest).
void ClientCore::send(std::string payload, ReplyHandler done, const Script* script) {
  if (closed_.load()) return done(Error(errc::shutdown, "client is shut down"));
  if (on_loop_thread()) return send_now(std::move(payload), std::move(done), script);
  bool first = false;
  {
    std::lock_guard lock(submit_mu_);
    first = submitted_.empty();
    submitted_.push_back(Command{std::move(payload), std::move(done), {}, script});
    if (first) drain_posted_.store(true, std::memory_order_relaxed);
  }
  // One post per batch: callers that arrive while a drain is pending just append.
  if (first) post([self = shared_from_this()] { self->drain(); });
}

void ClientCore::drain() {
  std::vector<Command> batch;
  {
    std::lock_guard lock(submit_mu_);
    batch.swap(submitted_);
    drain_posted_.store(false, std::memory_order_relaxed);
  }
  for (auto& c : batch) send_now(std::move(c.payload), std::move(c.done), c.script);
}

void ClientCore::send_now(std::string payload, ReplyHandler done, const Script* script) {
  if (shut_down_.load() && !work_) return done(Error(errc::shutdown, "client is shut down"));
  if (cluster_) return cluster_->send(std::move(payload), std::move(done), script);
  // Sentinel: until a sentinel has answered, commands wait in the (idle) connections; once
  // every sentinel has failed to, they fail fast with the reason.
  if (sentinel_ && !primary_known_ && discovery_failed_) return done(discovery_error_);
  Connection& c = primary_->pick_for(payload);
  c.send(Command{std::move(payload), std::move(done), {}, script});
}

// Scripts from caller threads go through the same batched submission as every other command
// (one post per batch, not one per call).
void ClientCore::eval(const Script& s, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                      ReplyHandler done) {
  eval(s, encode_evalsha(s, keys, args), std::move(done));
}

// The one EVAL retry after NOSCRIPT is the connection's (Connection::retry_script): the
// payload is not copied for a fallback that almost never runs.
void ClientCore::eval(const Script& s, std::string payload, ReplyHandler done) {
  const Script& run = script_to_run(s, payload);
  send(std::move(payload), std::move(done), &run);
}

void ClientCore::eval_now(const Script& s, std::string payload, ReplyHandler done) {
  const Script& run = script_to_run(s, payload);
  send_now(std::move(payload), std::move(done), &run);
}

void ClientCore::on_connection_state(Connection& c, Connection::State s) {
  if (s == Connection::State::down) {
    if (cluster_) cluster_->on_node_down(c);
    if (sentinel_) sentinel_->rediscover();
  }
  if (s != Connection::State::ready) return;
  // Keyspace notifications are node-local and not sharded: on Cluster, waiters rely on the
  // sharded release notifications and the holder's TTL.
  if (cluster_) return;
  // Re-read on every (re)connect: the setting may have changed, or this may be another server
  // after a failover. An ACL that denies CONFIG simply leaves keyspace events unused.
  c.send(Command{format_command({"CONFIG", "GET", "notify-keyspace-events"}), [this](Result<Reply> r) {
                   if (!r.ok() || !r->is_array() || r->size() != 2) return;
                   const std::string& flags = (*r)[1].str();
                   auto has = [&](char f) { return flags.find(f) != std::string::npos; };
                   keyspace_events_.store(has('K') && (has('A') || has('g') || has('x')));
                 }});
}

void ClientCore::on_error_reply(Connection&, const Reply& reply) {
  // A primary demoted by a failover answers writes with READONLY: ask the sentinels again.
  if (sentinel_ && reply.error_prefix() == "READONLY") sentinel_->rediscover();
}

namespace {
template <class Fn>
void for_each_command_connection(ClusterRouter* cluster, Node* primary, Node* ack_node, Fn&& fn) {
  if (cluster) cluster->for_each_connection(fn);
  if (primary) {
    for (auto& c : primary->conns) fn(*c);
  }
  if (ack_node) {
    for (auto& c : ack_node->conns) fn(*c);
  }
}
}  // namespace

bool ClientCore::commands_queued() {
  bool any = false;
  for_each_command_connection(cluster_.get(), primary_.get(), ack_node_.get(),
                              [&any](Connection& c) { any = any || c.queued() > 0; });
  return any;
}

// A reply may send more behind the PINGs (a MOVED or ASK re-sent, the EVAL after NOSCRIPT, the
// WAIT after an acknowledged script): another round then, until none is left or time is up.
void ClientCore::settle_in_flight(std::chrono::steady_clock::time_point deadline, std::function<void()> done) {
  auto count = Countdown::make(1, [this, deadline, done = std::move(done)]() mutable {
    if (std::chrono::steady_clock::now() >= deadline || !commands_queued()) return done();
    settle_in_flight(deadline, std::move(done));
  });
  for_each_command_connection(cluster_.get(), primary_.get(), ack_node_.get(), [&count](Connection& c) {
    if (c.queued() == 0) return;
    count->add();
    c.send(Command{format_command({"PING"}), [count](Result<Reply>) { count->done(); }});
  });
  count->done();
}

bool ClientCore::adopt_helper(std::function<void()> fn) {
  std::lock_guard lock(helpers_mu_);
  if (helpers_joined_) return false;
  // Those done already are joined now, so that they do not pile up until the shutdown.
  std::erase_if(helpers_, [](Helper& h) {
    if (!h.finished->load()) return false;
    h.thread.join();
    return true;
  });
  auto finished = std::make_shared<std::atomic<bool>>(false);
  helpers_.push_back(Helper{std::thread([fn = std::move(fn), finished] {
                              fn();
                              finished->store(true);
                            }),
                            finished});
  return true;
}

// After close_all: a blocking call on this Client from a helper fails at once, so a join cannot
// wait for this thread.
void ClientCore::join_helpers() {
  std::vector<Helper> helpers;
  {
    std::lock_guard lock(helpers_mu_);
    helpers_joined_ = true;
    helpers.swap(helpers_);
  }
  for (auto& h : helpers) {
    if (h.thread.get_id() == std::this_thread::get_id()) h.thread.detach();  // shut down from that helper
    else h.thread.join();
  }
}

void ClientCore::close_all() {
  closed_.store(true);
  const Error why(errc::shutdown, "client is shut down");
  if (drain_timer_) drain_timer_->cancel();
  fail_waiters(why);
  if (cluster_) cluster_->close(why);
  if (sentinel_) sentinel_->close(why);
  if (primary_) primary_->close(why);
  if (ack_node_) ack_node_->close(why);
  notifier_->close(why);
  renewals_->take_all();
  work_.reset();
}

// Shutdown, step 1 (loop thread): releases every lease still held; `released` is set once each
// release was answered.
void ClientCore::release_held(const std::shared_ptr<std::promise<void>>& released) {
  auto leases = renewals_->take_all();
  auto left = Countdown::make(leases.size() + 1, [released] { released->set_value(); });
  auto one_done = [left] { left->done(); };
  for (auto& rec : leases) {
    if (!rec->begin_release()) {
      one_done();
      continue;
    }
    active_leases_.fetch_sub(1);
    // The record says what the answer was, for a Lease::release() waiting on another thread
    // (release_at_shutdown): released when the key was deleted; lost (and reported) when it was
    // no longer ours; left `releasing` when the outcome is unknown (no answer, an error reply).
    // A Redlock lease is judged by its home node alone, so only its success is taken as final.
    auto answered = [rec, one_done](Result<Reply> r) {
      if (r.ok() && r->is_integer() && r->integer() >= 1) {
        rec->finish_release();
      } else if (r.ok() && !r->is_error() && !rec->scripts.fanout) {
        if (rec->mark_lost(LossReason::taken) && rec->events.on_lost) rec->events.on_lost(LossReason::taken);
      }
      one_done();
    };
    // A Redlock lease: released on the other masters too (those whose Clients are still
    // up), not only here, on its home node.
    if (rec->scripts.fanout) {
      rec->scripts.fanout->send_to_others(*rec->scripts.release, rec->scripts.release_key_list(), rec->release_args());
    }
    eval_now(*rec->scripts.release, rec->release_payload(),
             std::move(answered));
  }
  one_done();
}

bool ClientCore::held_release_pending() const {
  std::lock_guard lock(shutdown_mu_);
  return held_released_.valid() && !closed_.load() &&
         held_released_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
}

void ClientCore::await_held_release() const {
  // Never on a thread that runs a loop: this one's step 1 runs there, and another Client's
  // loop (a Redlock's other node) must not stall for it.
  if (on_a_loop_thread()) return;
  std::shared_future<void> released;
  std::chrono::steady_clock::time_point until;
  {
    std::lock_guard lock(shutdown_mu_);
    released = held_released_;
    until = held_release_deadline_;
  }
  if (released.valid()) (void)released.wait_until(until);
}

void ClientCore::shutdown() {
  const auto shutdown_deadline = std::chrono::steady_clock::now() + options_.shutdown_timeout;
  auto released = std::make_shared<std::promise<void>>();
  std::shared_future<void> done;
  {
    // Published before shut_down_, so a Lease::release() that sees the shutdown also sees what
    // to wait for (await_held_release).
    std::lock_guard lock(shutdown_mu_);
    if (shut_down_.load()) return;
    if (thread_.joinable() && !on_loop_thread()) {
      done = released->get_future().share();
      held_released_ = done;
      held_release_deadline_ = std::chrono::steady_clock::now() + options_.shutdown_timeout;
    }
    shut_down_.store(true);
  }
  if (!thread_.joinable()) return;
  if (on_loop_thread()) {
    // Destroyed from one of its own callbacks: the loop cannot wait for itself. Close at once;
    // the keys of leases still held expire at their TTL.
    close_all();
    {
      // The thread may outlive this call and the Client: it holds the core until it is done.
      std::lock_guard lock(shutdown_mu_);
      keep_alive_ = weak_from_this().lock();
    }
    thread_.detach();
    join_helpers();
    return;
  }
  // 1. Waits end and leave their places while the connections still work; then what is still
  //    held is released (its renewal stopped first). Best effort, bounded by shutdown_timeout.
  //    In that order because a release hands a FairLock straight to the head of its queue (and
  //    names the next Client on a Mutex's roll): a waiter of this Client still queued was given
  //    the lock, which then sat out its TTL with nobody holding it.
  asio::post(io_, [this, released] {
    // The releases go out once every wait has cleaned up, or after half the shutdown's time
    // at the latest: a cleanup stuck on one node (a paused Cluster primary) must not keep the
    // leases on the others from being released before the connections close.
    auto release_once = std::make_shared<std::function<void()>>([this, released] { release_held(released); });
    auto fire = [release_once] {
      if (*release_once) std::exchange(*release_once, {})();
    };
    drain_timer_ = std::make_unique<BootTimer>(io_);
    drain_timer_->expires_after(options_.shutdown_timeout / 2);
    drain_timer_->async_wait([fire](std::error_code ec) {
      if (!ec) fire();
    });
    fail_waiters(Error(errc::shutdown, "client is shut down"), [this, fire] {
      drain_timer_->cancel();
      fire();
    });
  });
  (void)done.wait_for(options_.shutdown_timeout);
  // Then what was sent before, and is still unanswered, is given the rest of that time: a
  // release made just before the Client's destruction without waiting for it (async_release)
  // is a lease that step 1 left to its caller, and cut off unwritten it left the key to its TTL.
  auto settled = std::make_shared<std::promise<void>>();
  auto in_flight = settled->get_future();
  asio::post(io_, [this, settled, shutdown_deadline] {
    settle_in_flight(shutdown_deadline, [settled] { settled->set_value(); });
  });
  (void)in_flight.wait_until(shutdown_deadline);
  // 2. Fail everything still pending and let the loop run out of work, so no caller is left
  //    waiting on a handler that never runs. A loop that does not finish in time is stopped.
  asio::post(io_, [this] { close_all(); });
  auto exited = loop_exited_.get_future();
  if (exited.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    {
      // Once the loop has ended, its own thread runs what is left in it (close_loop) and must
      // not be stopped; join() then waits for that.
      std::lock_guard lock(after_loop_mu_);
      if (!loop_ended_.load()) io_.stop();
    }
    loop_handbacks_.fetch_add(1);  // the own thread may sleep until a caller hands the loop back
    loop_handbacks_.notify_all();
  }
  thread_.join();
  join_helpers();
}

}  // namespace dlock::detail
