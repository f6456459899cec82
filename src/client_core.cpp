#include "client_core.hpp"

#include <unistd.h>

#include <array>
#include <charconv>
#include <functional>
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

// The ClientCore whose loop this thread runs now (the own thread: always; a caller: while it
// runs the loop in drive_until()).
thread_local const ClientCore* t_running_loop = nullptr;

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
    ack_node_ = std::make_unique<Node>(io_, primary_->address, options_, nullptr);
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

void ClientCore::start() {
  work_.emplace(io_.get_executor());
  std::promise<void> started;
  auto ready = started.get_future();
  thread_ = std::thread([this, &started] {
    t_running_loop = this;
    started.set_value();
    run_loop();
    loop_exited_.set_value();
  });
  ready.wait();
  post([this] {
    if (cluster_) cluster_->start();
    else if (sentinel_) sentinel_->start();
    else primary_->start();
  });
}

bool ClientCore::on_loop_thread() const noexcept { return t_running_loop == this; }

// The own thread: runs the loop whenever no caller does. Holding it, it polls for events (busy
// polling, ClientOptions::busy_poll) and then sleeps in the kernel; it lets go when a caller asks
// and sleeps until the caller hands the loop back.
void ClientCore::run_loop() {
  std::chrono::steady_clock::time_point poll_from{};  // when the polling before sleeping started (see below)
  for (;;) {
    int owner = loop_free;
    if (!loop_owner_.compare_exchange_strong(owner, loop_own_thread, std::memory_order_acquire)) {
      // A caller runs the loop: sleep until it hands it back (a caller that only asked for it
      // and then took it goes the same way; one that gave up leaves it free).
      const unsigned seen = loop_handbacks_.load(std::memory_order_acquire);
      // Busy polling here too: a caller usually hands the loop back within a round trip, and
      // taking it back awake saves a wake-up. It also keeps this vCPU awake for the server,
      // as the own thread's polling does without callers (docs/BENCHMARKS.md: on an idle VM a
      // request to a server on a halted vCPU costs a wake-up of that vCPU).
      const auto poll_until = std::chrono::steady_clock::now() + options_.busy_poll;
      while (loop_handbacks_.load(std::memory_order_acquire) == seen &&
             loop_owner_.load(std::memory_order_acquire) == loop_caller &&
             std::chrono::steady_clock::now() < poll_until) {
        std::this_thread::yield();
      }
      if (loop_owner_.load(std::memory_order_acquire) == loop_caller) loop_handbacks_.wait(seen);
      if (io_.stopped() && loop_owner_.load() != loop_free) return;  // shutdown() gave up waiting
      // Handed back with nothing else waiting on the loop: the caller usually calls again within
      // microseconds (acquire, then release), and finding the loop free it takes it at once.
      // Taken back now, the caller's next call would wait for this thread to notice and let go:
      // measured in the 1-thread bench, 12-14 us on average per call, on every call (docs/
      // BENCHMARKS.md). So this thread leaves it free for up to busy_poll first, and counts that
      // time as polling (see poll_from below). Events that come meanwhile (a timer, a
      // cancellation) wait that long at most; a command posted by a thread that does not come
      // to run the loop (an async call; after a tenth of busy_poll) or a second blocked caller
      // (who leaves the loop to this thread) ends the wait early.
      poll_from = std::chrono::steady_clock::now();
      if (handback_quiet_.load(std::memory_order_relaxed)) leave_loop_free(poll_from + options_.busy_poll);
      continue;
    }
    const bool stopped = run_owned(poll_from);
    poll_from = {};
    loop_owner_.store(loop_free, std::memory_order_release);
    if (stopped) return;
    // A caller asked for the loop: let it take it before bidding again.
    while (loop_owner_.load(std::memory_order_acquire) == loop_free && loop_wanted_.load() > 0) {
      std::this_thread::yield();
    }
  }
}

void ClientCore::leave_loop_free(std::chrono::steady_clock::time_point until) {
  using clock = std::chrono::steady_clock;
  // How long a posted drain may wait for the thread that posted it to come for the loop: a
  // blocking call posts its command and bids for the loop within a microsecond or so, but a
  // sanitized or descheduled one takes far longer. A tenth of busy_poll (10 us at the default)
  // scales with what the user already accepts as the loop's polling budget.
  const auto unclaimed_drain = options_.busy_poll / 10;
  clock::time_point drain_seen{};
  for (;;) {
    if (loop_owner_.load(std::memory_order_acquire) != loop_free) return;
    if (blocked_callers_.load(std::memory_order_relaxed) > 1) return;
    const auto now = clock::now();
    if (now >= until) return;
    if (drain_posted_.load(std::memory_order_relaxed) && loop_wanted_.load(std::memory_order_relaxed) == 0) {
      if (drain_seen == clock::time_point{}) drain_seen = now;
      else if (now - drain_seen >= unclaimed_drain) return;
    } else {
      drain_seen = {};
    }
    std::this_thread::yield();
  }
}

bool ClientCore::run_owned(std::chrono::steady_clock::time_point poll_from) {
  using clock = std::chrono::steady_clock;
  const auto budget = options_.busy_poll;
  // Polling counts from poll_from when given: time spent leaving the loop free is polling too,
  // so a Client that goes idle spins busy_poll in all, not twice that.
  auto last_event = poll_from == clock::time_point{} ? clock::now() : poll_from;
  for (;;) {
    if (loop_wanted_.load() > 0) return false;
    if (io_.poll() > 0) {
      last_event = clock::now();
      continue;
    }
    if (io_.stopped()) return true;  // poll() stops the loop when it has run out of work
    if (clock::now() - last_event < budget) {
      std::this_thread::yield();
      continue;
    }
    // Sleep in the kernel until the next event. A caller that asks meanwhile sees loop_sleeping_
    // and waits for this thread as before (seq_cst: of the two stores, each side sees the other's).
    loop_sleeping_.store(true);
    if (loop_wanted_.load() > 0) {
      loop_sleeping_.store(false);
      return false;
    }
    const std::size_t ran = io_.run_one();
    loop_sleeping_.store(false);
    if (ran == 0) return true;  // stopped
    last_event = clock::now();
  }
}

bool ClientCore::take_loop() {
  using clock = std::chrono::steady_clock;
  loop_wanted_.fetch_add(1);
  bool got = false;
  // The own thread, awake, lets go within one pass of its loop; don't wait longer than a few
  // of those (it may be running a long batch of handlers, or be preempted).
  const auto give_up = clock::now() + std::chrono::microseconds(50);
  for (;;) {
    int owner = loop_free;
    if (loop_owner_.compare_exchange_weak(owner, loop_caller, std::memory_order_acquire)) {
      got = true;
      break;
    }
    // Another caller runs the loop (it runs this caller's handlers too), or the own thread sleeps
    // in the kernel and this caller's command has just woken it: waiting for it is what the
    // caller would do anyway.
    if (owner == loop_caller || loop_sleeping_.load() || clock::now() >= give_up) break;
    std::this_thread::yield();
  }
  loop_wanted_.fetch_sub(1);
  return got;
}

// What else may need the loop soon, seen by the caller that is about to hand it back: commands
// awaiting replies, subscriptions (waiters of any kind listen on channels; a lingering one
// counts too), other blocked callers (they wait for the loop's thread to read their replies).
// Cluster: never quiet (its nodes are not looked at), so the own thread takes the loop back
// at once, as before.
bool ClientCore::loop_quiet() noexcept {
  if (cluster_ || blocked_callers_.load(std::memory_order_relaxed) > 1 || notifier_->channel_count() > 0) return false;
  for (const auto& c : primary_->conns) {
    if (c->queued() > 0) return false;
  }
  if (ack_node_) {
    for (const auto& c : ack_node_->conns) {
      if (c->queued() > 0) return false;
    }
  }
  return true;
}

void ClientCore::give_loop_back() {
  loop_owner_.store(loop_free, std::memory_order_release);
  loop_handbacks_.fetch_add(1, std::memory_order_release);
  loop_handbacks_.notify_one();
}

// A blocking caller runs the loop itself: it writes its command and waits for the reply on the
// sockets, with no hand-over to another thread and back. It polls for busy_poll after the last
// event, like the own thread, then sleeps in the kernel until the next one.
bool ClientCore::drive_until(const std::atomic<bool>& ready, std::chrono::steady_clock::time_point deadline) {
  if (!options_.callers_run_loop || ready.load(std::memory_order_acquire)) return false;
  // A thread that runs a loop already (a handler, or a caller inside another Client's handler)
  // never runs this one too: it would interleave two loops' handlers on one stack.
  if (t_running_loop != nullptr) return false;
  // With other callers waiting too, the loop's own thread serves them all (their commands share
  // writes, their replies one read): measured, callers taking turns at running the loop cost
  // each of them a hand-over to the next and were slower than that (docs/BENCHMARKS.md).
  if (blocked_callers_.load(std::memory_order_relaxed) > 1 || !take_loop()) return false;
  using clock = std::chrono::steady_clock;
  t_running_loop = this;
  // Hand the loop back however this ends (a handler that throws included), or the own thread
  // would sleep for good.
  struct HandBack {
    ClientCore* core;
    ~HandBack() {
      core->handback_quiet_.store(core->loop_quiet(), std::memory_order_relaxed);  // still holding it
      t_running_loop = nullptr;
      core->give_loop_back();
    }
  } hand_back{this};
  const auto budget = options_.busy_poll;
  auto last_event = clock::now();
  while (!ready.load(std::memory_order_acquire) && !io_.stopped()) {
    const auto now = clock::now();
    if (now >= deadline) break;
    if (io_.poll_one() > 0) {
      last_event = now;
      continue;
    }
    if (now - last_event < budget) {
      std::this_thread::yield();
      continue;
    }
    if (io_.run_one_until(deadline) > 0) last_event = clock::now();
  }
  return ready.load(std::memory_order_acquire);
}

void ClientCore::interrupt() {
  asio::post(io_, [] {});
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

void ClientCore::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

void ClientCore::send(std::string payload, ReplyHandler done, const Script* script) {
  if (shut_down_.load()) return done(Error(errc::shutdown, "client is shut down"));
  if (on_loop_thread()) return send_now(std::move(payload), std::move(done), script);
  bool first = false;
  {
    std::lock_guard lock(submit_mu_);
    first = submitted_.empty();
    submitted_.push_back(Command{std::move(payload), std::move(done), {}, script});
    if (first) drain_posted_.store(true, std::memory_order_relaxed);
  }
  // One post per batch: callers that arrive while a drain is pending just append.
  if (first) asio::post(io_, [self = shared_from_this()] { self->drain(); });
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
    if (cluster_) cluster_->on_node_down();
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

bool ClientCore::on_a_loop_thread() noexcept { return t_running_loop != nullptr; }

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
    thread_.detach();
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
  // 2. Fail everything still pending and let the loop run out of work, so no caller is left
  //    waiting on a handler that never runs. A loop that does not finish in time is stopped.
  asio::post(io_, [this] { close_all(); });
  auto exited = loop_exited_.get_future();
  if (exited.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    io_.stop();
    loop_handbacks_.fetch_add(1);  // the own thread may sleep until a caller hands the loop back
    loop_handbacks_.notify_all();
  }
  thread_.join();
}

}  // namespace dlock::detail
