#include "dlock/redlock.hpp"

#include <algorithm>
#include <stop_token>

#include "client_core.hpp"
#include "locks/redlock_acquire.hpp"
#include "locks/redlock_attempt.hpp"
#include "locks/thread_holds.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock {

using namespace detail;

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
  for (Client* c : nodes) {
    if (auto ok = refuse_replication_ack("Redlock", lease, c->core()->options()); !ok) {
      throw_error(ok.code(), ok.error().what());
    }
  }
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
  for (const auto& core : spec_->nodes.cores) {
    // Every wait runs on the home Client's loop; a try's replies arrive on every node's.
    if (core->on_loop_thread()) {
      return Error(errc::called_from_event_loop,
                   "blocking acquire of Redlock '" + name_ + "' called on a client's event-loop thread; use async_acquire");
    }
  }
  auto result = std::make_shared<SyncWait<Result<Lease>>>();
  // By pointer: the wait drops it before it delivers, while this caller still waits below.
  start_redlock_acquire(
      spec_, wait, [result](Result<Lease> r) { result->set(std::move(r)); }, stop,
      [parked = result.get()] { parked->park(); });
  // The caller runs the home Client's loop while it waits, when it may (SyncWait): the wait's
  // steps run there, and without this each try cost two hand-overs to that loop's own thread
  // and back (measured: a third fewer uncontended pairs/s with 1 thread).
  return result->wait(*spec_->nodes.cores.front());
}

void Redlock::async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop) {
  start_redlock_acquire(spec_, wait, std::move(done), std::move(stop));
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
