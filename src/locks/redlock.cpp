#include "dlock/redlock.hpp"

#include <algorithm>
#include <optional>
#include <stop_token>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"
#include "locks/hold_back.hpp"
#include "locks/redlock_attempt.hpp"
#include "locks/redlock_turns.hpp"
#include "locks/redlock_wait.hpp"
#include "locks/thread_holds.hpp"
#include "util/jitter_rng.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock {

using namespace detail;

namespace {

using Steady = std::chrono::steady_clock;

// One try, waited for until `deadline` at most (without one, until its verdict, which slow or
// paused nodes delay by up to their command timeout) or until `stop` is requested: nullopt when
// either came first. The try itself goes on; a lease it brings after that is released, as
// nobody will hold it.
std::optional<RedlockTry> try_blocking(const std::shared_ptr<const RedlockSpec>& spec,
                                       std::optional<Steady::time_point> deadline, const std::stop_token& stop) {
  auto wait = std::make_shared<SyncWait<RedlockTry>>();
  redlock_try(spec, [wait](RedlockTry t) {
    std::shared_ptr<LeaseRecord> lease = t.lease;
    if (!wait->set(std::move(t)) && lease) release_unwanted(lease);  // the waiter gave up first
  });
  // Set first by a stop request or the deadline, the value is a placeholder: a later report is
  // not taken. Exactly one value wins, so a lease is either returned or released.
  auto abandon = [wait] {
    RedlockTry placeholder;
    placeholder.abandoned = true;
    wait->set(std::move(placeholder));
  };
  std::stop_callback on_stop(stop, abandon);
  const auto spin = spec->nodes.cores.front()->busy_poll();
  std::optional<RedlockTry> t;
  if (!deadline) {
    t = wait->wait(spin);
  } else {
    t = wait->wait_for(std::max<Steady::duration>(*deadline - Steady::now(), Steady::duration::zero()), spin);
    if (!t) {
      abandon();
      t = wait->wait();  // the placeholder, or the report that came in between
    }
  }
  if (t->abandoned) return std::nullopt;
  return t;
}

}  // namespace

Redlock::Redlock(const std::vector<Client*>& nodes, std::string name, LeaseOptions lease)
    : name_(std::move(name)), holds_(std::make_unique<ThreadHolds>()) {
  if (nodes.empty() || nodes.size() % 2 == 0) {
    throw_error(errc::invalid_argument, "Redlock needs an odd number of nodes (got " + std::to_string(nodes.size()) + ")");
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] == nullptr) throw_error(errc::invalid_argument, "Redlock node " + std::to_string(i) + " is null");
    if (std::count(nodes.begin(), nodes.end(), nodes[i]) > 1) {
      throw_error(errc::invalid_argument, "Redlock node " + nodes[i]->address().display() + " is given twice");
    }
    // Two Clients of one server are one master counted twice: the quorum would be a lie.
    for (std::size_t j = 0; j < i; ++j) {
      if (nodes[j] != nullptr && nodes[j]->address().display() == nodes[i]->address().display()) {
        throw_error(errc::invalid_argument, "Redlock node " + nodes[i]->address().display() +
                                                " is given twice: the masters must be independent servers");
      }
    }
  }
  if (auto ok = validate_lock_name(name_); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease); !ok) throw_error(ok.code(), ok.error().what());
  auto spec = std::make_shared<RedlockSpec>();
  for (Client* c : nodes) spec->nodes.cores.push_back(c->core());
  spec->fanout = std::make_shared<const QuorumFanout>(spec->nodes);
  spec->name = name_;
  key_ = spec->nodes.cores.front()->lock_key(name_);
  spec->key = key_;
  spec->lease = std::move(lease);
  spec->max_token = std::make_shared<std::atomic<std::uint64_t>>(0);
  spec_ = std::move(spec);
}

Redlock::~Redlock() = default;  // ThreadHolds releases what lock() took

namespace {

// The comma that ends the URL starting at urls[0]: the first one followed (after spaces) by a
// scheme ("redis://", "rediss://", "unix://"), so that a password may hold a ','.
std::size_t next_url_comma(std::string_view urls) {
  for (std::size_t comma = urls.find(','); comma != std::string_view::npos; comma = urls.find(',', comma + 1)) {
    std::string_view next = urls.substr(comma + 1);
    while (!next.empty() && next.front() == ' ') next.remove_prefix(1);
    const std::size_t sep = next.find("://");
    if (sep != std::string_view::npos && sep > 0 &&
        std::all_of(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(sep),
                    [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); })) {
      return comma;
    }
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<std::unique_ptr<Client>> Redlock::connect(std::string_view urls, const ClientOptions& options) {
  std::vector<std::unique_ptr<Client>> out;
  while (!urls.empty()) {
    const std::size_t comma = next_url_comma(urls);
    std::string_view url = urls.substr(0, comma);
    while (!url.empty() && url.front() == ' ') url.remove_prefix(1);
    while (!url.empty() && url.back() == ' ') url.remove_suffix(1);
    if (url.empty()) throw_error(errc::invalid_argument, "empty URL in the Redlock node list");
    out.push_back(std::make_unique<Client>(url, options));
    if (comma == std::string_view::npos) break;
    urls.remove_prefix(comma + 1);
  }
  if (out.empty() || out.size() % 2 == 0) {
    throw_error(errc::invalid_argument, "Redlock needs an odd number of node URLs (got " + std::to_string(out.size()) + ")");
  }
  for (std::size_t i = 1; i < out.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (out[i]->address().display() == out[j]->address().display()) {
        throw_error(errc::invalid_argument, "Redlock node " + out[i]->address().display() +
                                                " is given twice: the masters must be independent servers");
      }
    }
  }
  return out;
}

std::size_t Redlock::node_count() const noexcept { return spec_->nodes.size(); }
std::size_t Redlock::quorum() const noexcept { return spec_->nodes.quorum(); }

Result<Lease> Redlock::acquire(WaitOptions wait, std::stop_token stop) {
  wait = normalize_wait(wait);
  const std::string what = "Redlock '" + name_ + "'";
  milliseconds subscribe_bound{0};
  for (const auto& core : spec_->nodes.cores) {
    if (core->on_loop_thread()) {
      return Error(errc::called_from_event_loop, "blocking acquire of " + what + " called on a client's event-loop thread");
    }
    if (core->is_shut_down()) return Error(errc::shutdown, "client " + core->address().display() + " is shut down");
    subscribe_bound = std::max(subscribe_bound, core->options().command_timeout);
  }
  const bool single = wait.timeout && wait.timeout->count() <= 0;
  std::optional<Steady::time_point> deadline;
  if (wait.timeout) deadline = Steady::now() + std::max(*wait.timeout, milliseconds(0));
  auto bounded = [&](Steady::time_point t) { return deadline ? std::min(t, *deadline) : t; };
  const milliseconds recheck = wait.recheck_interval;  // normalize_wait: never zero

  if (single) {
    std::optional<RedlockTry> answer = try_blocking(spec_, std::nullopt, stop);
    if (!answer) return Error(errc::cancelled, "acquiring " + what + " was cancelled");
    RedlockTry& t = *answer;
    if (t.kind == RedlockTry::Kind::acquired) return Lease(std::move(t.lease));
    if (t.kind == RedlockTry::Kind::failed) return t.error;
    return Error(errc::busy, what + " is held by another owner");
  }

  // Waiters of this lock in this process take turns (redlock_turns.hpp): only the head tries.
  RedlockTurns::Place place(RedlockTurns::of(spec_->nodes.cores.front().get(), key_));
  if (!place.await_head(deadline, stop)) {
    if (stop.stop_requested()) return Error(errc::cancelled, "waiting for " + what + " was cancelled");
    return Error(errc::timeout, "timed out waiting for " + what);
  }
  // The head's first try goes out before subscribing (a free lock costs one round trip); once it
  // finds the lock busy, the queue subscribes on every node and the head tries again, so a
  // release between the two tries cannot be missed. A head whose predecessor here just took the
  // lock waits for its release instead of trying (a try now could only fail), and then lets
  // the waiters of other processes, woken by the same release, try first: two heads trying at
  // once on every node split the nodes between them, and a split costs both a pause of
  // milliseconds. It holds back for hold_back_after_release() of its own tries' round trip: the
  // price of a handoff within this process when nobody else waits.
  bool after_holder = place.after_holder();
  while (true) {
    if (stop.stop_requested()) return Error(errc::cancelled, "waiting for " + what + " was cancelled");
    // A sleep, pause or turn that ended at the deadline ends the wait: a try sent now would be
    // given up at once, and if it won, released (a fencing token and a wake-up spent for nothing).
    if (deadline && Steady::now() >= *deadline) return Error(errc::timeout, "timed out waiting for " + what);
    RedlockWakeups* wakeups = place.wakeups();
    if (after_holder && wakeups) {
      after_holder = false;
      const auto now = Steady::now();
      if (wakeups->sleep(place.handover_generation(),
                         bounded(now + std::chrono::duration_cast<Steady::duration>(recheck * jitter_between(0.8, 1.2))),
                         stop)) {
        wakeups->pause(bounded(Steady::now() + hold_back_after_release(place.last_try_round_trip())), stop);
      }
      continue;
    }
    after_holder = false;
    const std::uint64_t seen = wakeups ? wakeups->generation() : 0;
    const auto sent = Steady::now();
    std::optional<RedlockTry> answer = try_blocking(spec_, deadline, stop);
    if (!answer && stop.stop_requested()) return Error(errc::cancelled, "waiting for " + what + " was cancelled");
    if (!answer) return Error(errc::timeout, "timed out waiting for " + what + " (its last try was still unanswered)");
    RedlockTry& t = *answer;
    place.note_try_round_trip(Steady::now() - sent);
    if (t.kind == RedlockTry::Kind::acquired) {
      Lease lease(std::move(t.lease));
      if (stop.stop_requested()) {
        (void)lease.release();  // the caller gave up while this try was in flight
        return Error(errc::cancelled, "waiting for " + what + " was cancelled");
      }
      place.took_it();
      return lease;
    }
    if (t.kind == RedlockTry::Kind::failed) return t.error;
    const auto now = Steady::now();
    if (deadline && now >= *deadline) return Error(errc::timeout, "timed out waiting for " + what);
    if (!wakeups) {
      place.subscribe(spec_->nodes, key_ + ":ch").await_subscribed(bounded(now + subscribe_bound), stop);
      continue;
    }
    if (t.split) {
      // Two contenders each took some nodes and both released: back off for a random moment,
      // deaf to their release notifications, so the next round is not split again.
      const auto pause = std::chrono::duration_cast<Steady::duration>(
          std::clamp(spec_->lease.ttl / 100, milliseconds(5), milliseconds(50)) * jitter_between(0.5, 1.5));
      wakeups->pause(bounded(now + pause), stop);
      continue;
    }
    if (wakeups->generation() != seen) continue;  // a release was announced during the try
    auto d = std::chrono::duration_cast<Steady::duration>(recheck * jitter_between(0.8, 1.2));
    // The holders' TTL bounds the wait: a crashed holder's keys expire without a notification.
    if (t.holder_ttl) d = std::min<Steady::duration>(d, *t.holder_ttl + milliseconds(1));
    // As in acquire_op.cpp (sleep): the last try goes out about one try's round trip before the
    // deadline; after that time the sleep runs to the deadline, and the wait ends there.
    Steady::time_point until = now + d;
    if (deadline) {
      const auto last_try = *deadline - place.last_try_round_trip();
      until = std::min(until, last_try > now ? last_try : *deadline);
    }
    wakeups->sleep(seen, until, stop);
  }
}

void Redlock::lock() {
  std_lock(*holds_, 0, "Redlock '" + name_ + "'", [this](WaitOptions w) { return acquire(w); });
}

bool Redlock::timed_try(milliseconds d) {
  return std_timed_try(*holds_, 0, d, [this](WaitOptions w) { return acquire(w); });
}

bool Redlock::try_lock() { return timed_try(milliseconds(0)); }
void Redlock::unlock() noexcept { holds_->release_mine(); }
bool Redlock::owns_lock() const noexcept { return holds_->holds(); }
FencingToken Redlock::fencing_token() const noexcept { return holds_->token(); }
bool Redlock::lost() const noexcept { return holds_->lost(); }
milliseconds Redlock::remaining() const noexcept { return holds_->remaining(); }
Error Redlock::last_error() const { return holds_->last_error(); }

}  // namespace dlock
