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

Mutex::Mutex(Client& client, std::string name, LeaseOptions lease)
    : core_(client.core()), name_(std::move(name)), holds_(std::make_unique<ThreadHolds>()) {
  if (auto ok = validate_lock_name(name_); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease); !ok) throw_error(ok.code(), ok.error().what());
  key_ = core_->lock_key(name_);
  auto spec = std::make_shared<ScriptAttemptSpec>();
  spec->name = name_;
  spec->kind = "Mutex";
  spec->acquire = &scripts::mutex_acquire;
  spec->keys = {key_, key_ + ":fence"};
  spec->hold.renew = &scripts::mutex_renew;
  spec->hold.renew_keys = {key_};
  spec->hold.release = &scripts::mutex_release;
  spec->hold.release_keys = {key_, key_ + ":rel"};
  spec->hold.release_extra = {key_ + ":ch", std::to_string(release_marker_ttl.count())};
  spec->hold.channel = key_ + ":ch";
  spec->lease = std::move(lease);
  spec_ = std::move(spec);
}

Mutex::~Mutex() = default;  // ThreadHolds releases what lock() took

AcquireRequest Mutex::request(WaitOptions wait) const {
  AcquireRequest req;
  req.key = key_;
  req.channel = key_ + ":ch";
  req.what = "Mutex '" + name_ + "' on " + core_->address().display();
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
  std_lock(*holds_, 0, "Mutex '" + name_ + "' (use ReentrantMutex to take it again)", [this](WaitOptions w) { return acquire(w); });
}

bool Mutex::timed_try(milliseconds d) {
  return std_timed_try(*holds_, 0, d, [this](WaitOptions w) { return acquire(w); });
}

bool Mutex::try_lock() { return timed_try(milliseconds(0)); }
void Mutex::unlock() noexcept { holds_->release_mine(); }
bool Mutex::owns_lock() const noexcept { return holds_->holds(); }
FencingToken Mutex::fencing_token() const noexcept { return holds_->token(); }
bool Mutex::lost() const noexcept { return holds_->lost(); }
milliseconds Mutex::remaining() const noexcept { return holds_->remaining(); }
Error Mutex::last_error() const { return holds_->last_error(); }

}  // namespace dlock
