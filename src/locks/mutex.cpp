#include "dlock/mutex.hpp"

#include <algorithm>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"
#include "locks/script_attempt.hpp"
#include "locks/thread_holds.hpp"
#include "util/names.hpp"

namespace dlock {

using namespace detail;

namespace {

// How long the release marker (P{N}:rel) lives: long enough for any retry of a release.
constexpr milliseconds release_marker_ttl{30000};

}  // namespace

Mutex::Mutex(Client& client, std::string name, LeaseOptions lease) : core_(client.core()) {
  if (auto ok = validate_lock_name(name); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease); !ok) throw_error(ok.code(), ok.error().what());
  // Built by concatenation, the key has spare capacity; a lock object lives long, so trim it.
  key_ = core_->lock_key(name);
  key_.shrink_to_fit();
  auto spec = std::make_shared<ScriptAttemptSpec>();
  spec->name = std::move(name);
  spec->kind = "Mutex";
  spec->acquire = &scripts::mutex_acquire;
  spec->keys = {key_, key_ + ":fence"};
  spec->hold.renew = &scripts::mutex_renew;
  spec->hold.renew_keys = {key_};
  spec->hold.release = &scripts::mutex_release;
  spec->hold.release_keys = {key_, key_ + ":rel"};
  spec->hold.release_extra = {key_ + ":ch", std::to_string(release_marker_ttl.count())};
  spec->hold.channel.reserve(key_.size() + 3);  // exactly, not with a concatenation's slack
  spec->hold.channel.append(key_).append(":ch");
  spec->lease = std::move(lease);
  spec_ = std::move(spec);
}

Mutex::~Mutex() { delete holds_.load(); }  // ThreadHolds releases what lock() took

const std::string& Mutex::name() const noexcept { return spec_->name; }

ThreadHolds& Mutex::holds() {
  ThreadHolds* h = holds_.load(std::memory_order_acquire);
  if (h != nullptr) return *h;
  // Two threads may race to lock() a fresh Mutex: one installs its ThreadHolds, the other
  // drops its own and uses the winner's.
  auto mine = std::make_unique<ThreadHolds>();
  if (holds_.compare_exchange_strong(h, mine.get(), std::memory_order_acq_rel)) return *mine.release();
  return *h;
}

AcquireRequest Mutex::request(WaitOptions wait) const {
  AcquireRequest req;
  req.key = key_;
  req.channel = std::string(spec_->hold.channel);
  req.what = "Mutex '" + spec_->name + "' on " + core_->address().display();
  req.wait = wait;
  req.attempt = script_attempt(core_, spec_);
  return req;
}

Result<Lease> Mutex::acquire(WaitOptions wait, std::stop_token stop) {
  return acquire_blocking(core_, request(wait), std::move(stop));
}

void Mutex::async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop) {
  start_acquire(core_, request(wait), std::move(done), std::move(stop));
}

void Mutex::lock() {
  std_lock(holds(), 0, "Mutex '" + spec_->name + "' (use ReentrantMutex to take it again)",
           [this](WaitOptions w) { return acquire(w); });
}

bool Mutex::timed_try(milliseconds d) {
  return std_timed_try(holds(), 0, d, [this](WaitOptions w) { return acquire(w); });
}

// Before the first lock()/try_lock*() there are no holds: the queries answer "none".
bool Mutex::try_lock() { return timed_try(milliseconds(0)); }
void Mutex::unlock() noexcept {
  if (ThreadHolds* h = holds_.load(std::memory_order_acquire)) h->release_mine();
}
bool Mutex::owns_lock() const noexcept {
  const ThreadHolds* h = holds_.load(std::memory_order_acquire);
  return h != nullptr && h->holds();
}
FencingToken Mutex::fencing_token() const noexcept {
  const ThreadHolds* h = holds_.load(std::memory_order_acquire);
  return h != nullptr ? h->token() : FencingToken{};
}
bool Mutex::lost() const noexcept {
  const ThreadHolds* h = holds_.load(std::memory_order_acquire);
  return h != nullptr && h->lost();
}
milliseconds Mutex::remaining() const noexcept {
  const ThreadHolds* h = holds_.load(std::memory_order_acquire);
  return h != nullptr ? h->remaining() : milliseconds(0);
}
Error Mutex::last_error() const {
  const ThreadHolds* h = holds_.load(std::memory_order_acquire);
  return h != nullptr ? h->last_error() : Error{};
}

}  // namespace dlock
