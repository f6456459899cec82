#include "dlock/fair_lock.hpp"

#include <algorithm>

#include "client_core.hpp"
#include "locks/fair_wait.hpp"
#include "locks/thread_holds.hpp"
#include "util/names.hpp"

namespace dlock {

using namespace detail;

namespace {

// How long the release marker (P{N}:rel) lives: long enough for any retry of a release.
constexpr milliseconds release_marker_ttl{30000};
// Shorter waiter TTLs would have waiters renew their places every few milliseconds.
constexpr milliseconds min_waiter_ttl{30};

}  // namespace

FairLock::FairLock(Client& client, std::string name, LeaseOptions lease, FairLockOptions fair)
    : core_(client.core()), holds_(std::make_unique<ThreadHolds>()) {
  if (auto ok = validate_lock_name(name); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = refuse_replication_ack("FairLock", lease, core_->options()); !ok) {
    throw_error(ok.code(), ok.error().what());
  }
  if (fair.waiter_ttl < min_waiter_ttl) {
    throw_error(make_error_code(errc::invalid_argument),
                "FairLock waiter TTL must be at least " + std::to_string(min_waiter_ttl.count()) + " ms");
  }
  if (auto ok = validate_bounded("FairLock waiter TTL", fair.waiter_ttl); !ok) throw_error(ok.code(), ok.error().what());
  auto spec = std::make_shared<FairSpec>();
  spec->key = core_->lock_key(name);
  spec->fence_key = spec->key + ":fence";
  spec->queue_key = spec->key + ":queue";
  spec->timeouts_key = spec->key + ":timeouts";
  spec->grant_key = spec->key + ":grant";
  spec->channel_prefix = spec->key + ":ch:";
  // One channel per process and lock: the process part of this Client's owner tokens.
  spec->channel = make_fair_channel(core_, spec->channel_prefix + fair_channel_of(core_->new_owner_token()));
  spec->what = "FairLock '" + name + "' on " + core_->where();
  spec->lease = std::move(lease);
  spec->waiter_ttl = fair.waiter_ttl;
  // The lock key has Mutex's layout, so Mutex's renewal script serves (and the CLI's tools
  // read it alike); the release also hands the lock to the head of the queue. A forced unlock announces
  // "revoked" on P{N}:ch, as for Mutex (LeaseOptions::listen_for_revocation).
  auto hold = std::make_shared<HoldScripts>();
  hold->renew = &scripts::mutex_renew;
  hold->renew_keys = {spec->key};
  hold->release = &scripts::fair_release;
  hold->release_keys = {spec->key, spec->key + ":rel", spec->queue_key, spec->timeouts_key, spec->fence_key,
                        spec->grant_key};
  hold->release_extra = {spec->channel_prefix, std::to_string(release_marker_ttl.count())};
  hold->channel = spec->key + ":ch";
  spec->hold = std::move(hold);
  spec->name = std::move(name);
  spec_ = std::move(spec);
}

// ThreadHolds releases what lock() took; the channel is unsubscribed once no wait uses it.
FairLock::~FairLock() { retire_fair_channel(core_, spec_->channel); }

Result<Lease> FairLock::acquire(WaitOptions wait, std::stop_token stop) {
  return fair_acquire_blocking(core_, spec_, wait, std::move(stop));
}

void FairLock::async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop) {
  start_fair_acquire(core_, spec_, wait, std::move(done), std::move(stop));
}

void FairLock::lock() {
  std_lock(*holds_, 0, "FairLock '" + spec_->name + "'", [this](WaitOptions w) { return acquire(w); });
}

bool FairLock::timed_try(milliseconds d) {
  return std_timed_try(*holds_, 0, d, [this](WaitOptions w) { return acquire(w); });
}

bool FairLock::try_lock() { return timed_try(milliseconds(0)); }
void FairLock::unlock() noexcept { holds_->release_mine(); }
bool FairLock::owns_lock() const noexcept { return holds_->holds(); }
FencingToken FairLock::fencing_token() const noexcept { return holds_->token(); }
bool FairLock::lost() const noexcept { return holds_->lost(); }
milliseconds FairLock::remaining() const noexcept { return holds_->remaining(); }
Error FairLock::last_error() const { return holds_->last_error(); }
const std::string& FairLock::name() const noexcept { return spec_->name; }
const std::string& FairLock::key() const noexcept { return spec_->key; }

}  // namespace dlock
