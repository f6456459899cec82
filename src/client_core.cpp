#include "client_core.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <future>

#include "renewal/lease_record.hpp"
#include "scripts/script_call.hpp"

namespace dlock::detail {
namespace {

std::string host_name() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return "unknown-host";
  return buf.data();
}

// 128 bits from the kernel's CSPRNG, as 32 hex digits.
std::string random_hex128() {
  std::array<unsigned char, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (unsigned char b : bytes) {
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
  return out;
}

}  // namespace

ClientCore::ClientCore(ServerAddress address, ClientOptions options)
    : address_(std::move(address)),
      options_(std::move(options)),
      identity_(host_name() + ":" + std::to_string(::getpid())),
      client_id_(random_hex128()) {
  const unsigned n = std::max(1u, options_.connections_per_node);
  for (unsigned i = 0; i < n; ++i) {
    connections_.push_back(std::make_shared<Connection>(io_, address_, options_, this, false));
  }
  notifier_ = std::make_unique<Notifier>(io_, address_, options_);
  renewals_ = std::make_unique<RenewalScheduler>(*this, io_);
}

ClientCore::~ClientCore() { shutdown(); }

void ClientCore::start() {
  work_.emplace(io_.get_executor());
  std::promise<void> started;
  auto ready = started.get_future();
  thread_ = std::thread([this, &started] {
    loop_thread_id_.store(std::this_thread::get_id());
    started.set_value();
    io_.run();
    loop_exited_.set_value();
  });
  ready.wait();
  post([this] {
    for (auto& c : connections_) c->start();
  });
}

std::string ClientCore::new_owner_token() const {
  std::string token = random_hex128();
  token.push_back('@');
  token += identity_;
  // Wall-clock time of the acquisition, for operators ("held for 3 min"); never used for
  // validity, which is measured on BootClock.
  const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  token.push_back(':');
  token += std::to_string(unix_ms.count());
  return token;
}

void ClientCore::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

void ClientCore::send(std::string payload, ReplyHandler done) {
  if (shut_down_.load()) return done(Error(errc::shutdown, "client is shut down"));
  if (on_loop_thread()) return send_now(std::move(payload), std::move(done));
  bool first = false;
  {
    std::lock_guard lock(submit_mu_);
    first = submitted_.empty();
    submitted_.push_back(Command{std::move(payload), std::move(done)});
  }
  // One post per batch: callers that arrive while a drain is pending just append.
  if (first) asio::post(io_, [self = shared_from_this()] { self->drain(); });
}

void ClientCore::drain() {
  std::vector<Command> batch;
  {
    std::lock_guard lock(submit_mu_);
    batch.swap(submitted_);
  }
  for (auto& c : batch) send_now(std::move(c.payload), std::move(c.done));
}

Connection& ClientCore::pick_connection() {
  // Prefer a ready connection, round robin; otherwise the next one (it queues or fails fast).
  const std::size_t n = connections_.size();
  for (std::size_t i = 0; i < n; ++i) {
    Connection& c = *connections_[(next_connection_ + i) % n];
    if (c.state() == Connection::State::ready) {
      next_connection_ = (next_connection_ + i + 1) % n;
      return c;
    }
  }
  Connection& c = *connections_[next_connection_];
  next_connection_ = (next_connection_ + 1) % n;
  return c;
}

void ClientCore::send_now(std::string payload, ReplyHandler done) {
  if (shut_down_.load() && !work_) return done(Error(errc::shutdown, "client is shut down"));
  pick_connection().send(Command{std::move(payload), std::move(done)});
}

// Scripts from caller threads go through the same batched submission as every other command
// (one post per batch, not one per call).
void ClientCore::eval(const Script& s, const std::vector<std::string>& keys, const std::vector<std::string>& args,
                      ReplyHandler done) {
  std::string payload = encode_evalsha(s, keys, args);
  ReplyHandler handler = with_eval_fallback(s, payload, std::move(done));
  send(std::move(payload), std::move(handler));
}

void ClientCore::eval_now(const Script& s, std::string payload, ReplyHandler done) {
  ReplyHandler handler = with_eval_fallback(s, payload, std::move(done));
  send_now(std::move(payload), std::move(handler));
}

ReplyHandler ClientCore::with_eval_fallback(const Script& s, const std::string& evalsha_payload, ReplyHandler done) {
  // The EVALSHA encoding is kept for the one EVAL fallback after NOSCRIPT.
  return [this, &s, copy = evalsha_payload, done = std::move(done)](Result<Reply> r) mutable {
    if (r.ok() && r->is_error() && r->error_prefix() == "NOSCRIPT") {
      return send_now(evalsha_to_eval(s, copy), std::move(done));
    }
    done(std::move(r));
  };
}

void ClientCore::on_connection_state(Connection& c, Connection::State s) {
  if (s != Connection::State::ready) return;
  // Re-read on every (re)connect: the setting may have changed, or this may be another server
  // after a failover. An ACL that denies CONFIG simply leaves keyspace events unused.
  c.send(Command{format_command({"CONFIG", "GET", "notify-keyspace-events"}), [this](Result<Reply> r) {
                   if (!r.ok() || !r->is_array() || r->size() != 2) return;
                   const std::string& flags = (*r)[1].str();
                   auto has = [&](char f) { return flags.find(f) != std::string::npos; };
                   keyspace_events_.store(has('K') && (has('A') || has('g') || has('x')));
                 }});
}

void ClientCore::close_all() {
  const Error why(errc::shutdown, "client is shut down");
  fail_waiters(why);
  for (auto& c : connections_) c->close(why);
  notifier_->close(why);
  renewals_->take_all();
  work_.reset();
}

void ClientCore::shutdown() {
  if (shut_down_.exchange(true)) return;
  if (!thread_.joinable()) return;
  if (on_loop_thread()) {
    // Destroyed from one of its own callbacks: the loop cannot wait for itself. Close at once;
    // the keys of leases still held expire at their TTL.
    close_all();
    thread_.detach();
    return;
  }
  // 1. Release what is still held, best effort, bounded by shutdown_timeout. Renewal stops first.
  auto released = std::make_shared<std::promise<void>>();
  auto done = released->get_future();
  asio::post(io_, [this, released] {
    auto leases = renewals_->take_all();
    auto left = std::make_shared<std::size_t>(leases.size() + 1);
    auto one_done = [left, released] {
      if (--*left == 0) released->set_value();
    };
    for (auto& rec : leases) {
      if (!rec->begin_release()) {
        one_done();
        continue;
      }
      active_leases_.fetch_sub(1);
      eval_now(*rec->scripts.release, encode_evalsha(*rec->scripts.release, rec->scripts.release_keys, rec->release_args()),
               [rec, one_done](Result<Reply>) {
                 rec->finish_release();
                 one_done();
               });
    }
    one_done();
  });
  (void)done.wait_for(options_.shutdown_timeout);
  // 2. Fail everything still pending and let the loop run out of work, so no caller is left
  //    waiting on a handler that never runs. A loop that does not finish in time is stopped.
  asio::post(io_, [this] { close_all(); });
  auto exited = loop_exited_.get_future();
  if (exited.wait_for(std::chrono::seconds(2)) != std::future_status::ready) io_.stop();
  thread_.join();
}

}  // namespace dlock::detail
