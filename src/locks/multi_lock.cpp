#include "dlock/multi_lock.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "client_core.hpp"
#include "io/command.hpp"
#include "locks/acquire_op.hpp"
#include "locks/multi_lock_ordered.hpp"
#include "locks/script_attempt.hpp"
#include "locks/thread_holds.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail::scripts {
extern const Script multi_acquire;
extern const Script multi_renew;
extern const Script multi_release;
extern const Script multi_token;
}  // namespace dlock::detail::scripts

namespace dlock {

using namespace detail;

namespace {

// How long each release marker (P{N}:rel) lives: as for Mutex.
constexpr milliseconds release_marker_ttl{30000};

}  // namespace

namespace detail {
void MultiLockAccess::force_ordered(MultiLock& m, bool on) { m.force_ordered_ = on; }
bool MultiLockAccess::ordered(const MultiLock& m) { return m.ordered(); }
}  // namespace detail

MultiLock::MultiLock(Client& client, std::vector<std::string> names, LeaseOptions lease)
    : core_(client.core()), names_(std::move(names)), holds_(std::make_unique<ThreadHolds>()) {
  if (names_.empty()) throw_error(errc::invalid_argument, "MultiLock needs at least one lock name");
  for (const auto& n : names_) {
    if (auto ok = validate_lock_name(n); !ok) throw_error(ok.code(), ok.error().what());
  }
  if (auto ok = validate_lease(lease); !ok) throw_error(ok.code(), ok.error().what());
  // One deterministic order for every MultiLock, whatever order the caller gave.
  std::sort(names_.begin(), names_.end());
  names_.erase(std::unique(names_.begin(), names_.end()), names_.end());

  auto spec = std::make_shared<ScriptAttemptSpec>();
  // Braces cannot occur in names, so "{a}{b}" identifies the set unambiguously, and never
  // collides with a Mutex's queue (P{N}).
  queue_key_ = core_->options().key_prefix + "multi:";
  for (const auto& n : names_) queue_key_ += "{" + n + "}";
  // The release names this Client's wait queue first (declared, never touched; its first brace
  // is the first lock's hash tag, so it shares that lock's slot): a release that woke waiters
  // elsewhere holds back this Client's next try on that queue (ClientCore::note_release is keyed
  // by the first release key).
  spec->hold.release_keys.push_back(queue_key_);
  for (const auto& n : names_) {
    const std::string key = core_->lock_key(n);
    keys_.push_back(key);
    if (!display_.empty()) display_ += ",";
    display_ += n;
    spec->keys.push_back(key);
    spec->keys.push_back(key + ":fence");
    spec->place_keys.push_back(key + ":waiters");
    spec->hold.renew_keys.push_back(key);
    spec->hold.release_keys.push_back(key);
    spec->hold.release_keys.push_back(key + ":rel");
    spec->hold.release_keys.push_back(key + ":waiters");  // the release gives the roll's next turn
  }
  spec->name = display_;
  spec->kind = "MultiLock";
  spec->acquire = &scripts::multi_acquire;
  spec->hold.renew = &scripts::multi_renew;
  spec->hold.release = &scripts::multi_release;
  spec->hold.release_extra.push_back(std::to_string(release_marker_ttl.count()));
  spec->hold.release_extra.push_back(core_->client_id());
  for (const auto& key : keys_) {
    spec->hold.release_extra.push_back(key + ":ch");
    spec->hold.renew_extra.push_back(key + ":ch");  // a renewal that finds the set lost frees the rest
  }
  // A forced unlock is announced on the lock's channel; the first lock's is listened to (the
  // renewal that follows a revocation checks every lock anyway).
  spec->hold.channel = keys_.front() + ":ch";
  auto ordered = std::make_shared<OrderedMultiSpec>();
  ordered->name = display_;
  ordered->queue_key = queue_key_;
  ordered->groups = slot_groups(keys_);
  ordered->keys = keys_;
  for (const auto& group : ordered->groups) ordered->holds.push_back(multi_hold_scripts(group, core_->client_id()));
  ordered->lease = lease;
  single_slot_ = ordered->groups.size() == 1;
  ordered_spec_ = std::move(ordered);
  spec->lease = std::move(lease);
  spec_ = std::move(spec);
}

bool MultiLock::ordered() const noexcept { return force_ordered_ || (core_->cluster_mode() && !single_slot_); }

MultiLock::~MultiLock() = default;  // ThreadHolds releases what lock() took

AcquireRequest MultiLock::request(WaitOptions wait) const {
  AcquireRequest req;
  req.key = queue_key_;
  req.channel = keys_.front() + ":ch";
  for (std::size_t i = 1; i < keys_.size(); ++i) req.extra_channels.push_back(keys_[i] + ":ch");
  req.watch_keys = keys_;
  req.what = core_->lock_what("MultiLock", display_);
  req.wait = wait;
  // One script iff it can reach every key: not on Cluster, or all keys in one slot.
  req.attempt = ordered() ? ordered_multi_attempt(core_, ordered_spec_) : script_attempt(core_, spec_);
  return req;
}

Result<Lease> MultiLock::acquire(WaitOptions wait, std::stop_token stop) {
  return acquire_blocking(core_, request(wait), std::move(stop));
}

void MultiLock::async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop) {
  start_acquire(core_, request(wait), std::move(done), std::move(stop));
}

Result<std::vector<FencingToken>> MultiLock::tokens(const Lease& lease) const {
  const std::string what = "reading the tokens of MultiLock '" + display_ + "'";
  if (!lease.held()) return Error(errc::lock_lost, what + ": the lease is not held");
  if (core_->on_loop_thread()) {
    return Error(errc::called_from_event_loop, what + " on the client's event-loop thread");
  }
  // One script per lock, sent together (on Cluster the locks may live in different slots),
  // each reading the counter only where the key is still this owner's (multi_token.lua).
  struct Replies {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<Result<Reply>>> got;
    std::size_t left = 0;
  };
  auto replies = std::make_shared<Replies>();
  replies->got.resize(keys_.size());
  replies->left = keys_.size();
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    core_->eval(scripts::multi_token, {keys_[i], keys_[i] + ":fence"}, {lease.owner()}, [replies, i](Result<Reply> r) {
      std::lock_guard lock(replies->mu);
      replies->got[i].emplace(std::move(r));
      if (--replies->left == 0) replies->cv.notify_all();
    });
  }
  {
    std::unique_lock lock(replies->mu);
    replies->cv.wait(lock, [&] { return replies->left == 0; });
  }
  std::vector<FencingToken> out;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    Result<Reply>& r = *replies->got[i];
    if (!r.ok()) return Error(r.code(), what + ": " + r.error().what());
    if (r->is_error()) return Error(classify_error_reply(*r), what + ": " + r->str());
    if (r->is_nil()) {
      return Error(errc::lock_lost, what + ": '" + keys_[i] + "' is no longer held by this lease (expired or taken over)");
    }
    std::optional<long long> v = r->as_integer();
    if (!v || *v <= 0) return Error(errc::protocol, what + ": unexpected counter " + r->to_string());
    out.push_back(FencingToken{static_cast<std::uint64_t>(*v)});
  }
  // Each counter was read while its key held this owner, so none had moved since this hold
  // took it. (A loss found meanwhile is reported as well.)
  if (!lease.held()) return Error(errc::lock_lost, what + ": the lease was lost");
  return out;
}

void MultiLock::lock() {
  std_lock(*holds_, 0, "MultiLock '" + display_ + "'", [this](WaitOptions w) { return acquire(w); });
}

bool MultiLock::timed_try(milliseconds d) {
  return std_timed_try(*holds_, 0, d, [this](WaitOptions w) { return acquire(w); });
}

bool MultiLock::try_lock() { return timed_try(milliseconds(0)); }
void MultiLock::unlock() noexcept { holds_->release_mine(); }
bool MultiLock::owns_lock() const noexcept { return holds_->holds(); }
FencingToken MultiLock::fencing_token() const noexcept { return holds_->token(); }
bool MultiLock::lost() const noexcept { return holds_->lost(); }
milliseconds MultiLock::remaining() const noexcept { return holds_->remaining(); }
Error MultiLock::last_error() const { return holds_->last_error(); }

}  // namespace dlock
