#include "dlock/mutex.hpp"

#include <algorithm>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"
#include "scripts/script_call.hpp"
#include "util/names.hpp"

namespace dlock {

using namespace detail;

namespace {

// How long the release marker (P{N}:rel) lives: long enough for any retry of a release.
constexpr milliseconds release_marker_ttl{30000};

Result<void> validate_lease(const LeaseOptions& o) {
  if (o.ttl.count() <= 0) return Error(errc::invalid_argument, "lease TTL must be positive");
  if (o.renew_interval.count() < 0 || (o.renew_interval.count() > 0 && o.renew_interval >= o.ttl)) {
    return Error(errc::invalid_argument, "renew interval must be shorter than the lease TTL");
  }
  if (o.drift_allowance.count() < 0 || o.drift_allowance >= o.ttl) {
    return Error(errc::invalid_argument, "drift allowance must be shorter than the lease TTL");
  }
  return {};
}

}  // namespace

Mutex::Mutex(Client& client, std::string name, LeaseOptions lease)
    : core_(client.core()), name_(std::move(name)), lease_(std::move(lease)) {
  if (auto ok = validate_lock_name(name_); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease_); !ok) throw_error(ok.code(), ok.error().what());
  key_ = core_->lock_key(name_);
}

Mutex::~Mutex() {
  std::lock_guard lock(holds_mu_);
  for (auto& h : holds_) (void)h.lease.release();
}

namespace {

// One try: one script round trip. Runs on the loop thread.
AttemptFn mutex_attempt(std::shared_ptr<ClientCore> core, std::string name, std::string key, LeaseOptions lease) {
  HoldScripts scripts;
  scripts.renew = &scripts::mutex_renew;
  scripts.renew_keys = {key};
  scripts.release = &scripts::mutex_release;
  scripts.release_keys = {key, key + ":rel"};
  scripts.release_extra = {key + ":ch", std::to_string(release_marker_ttl.count())};
  auto shared = std::make_shared<HoldScripts>(std::move(scripts));
  const std::string fence_key = key + ":fence";
  return [core, name, key, fence_key, lease, shared](std::function<void(Attempt)> report) {
    std::string owner = core->new_owner_token();
    const auto sent = BootClock::now();
    const std::string ttl = std::to_string(lease.ttl.count());
    const std::string_view keys[] = {key, fence_key};
    const std::string_view args[] = {owner, ttl};
    core->eval_now(scripts::mutex_acquire, encode_evalsha(scripts::mutex_acquire, keys, args),
                   [core, name, key, owner, sent, lease, shared, report = std::move(report)](Result<Reply> r) {
                     const std::string what = "lock '" + name + "' on " + core->address().display();
                     Attempt a;
                     if (!r.ok()) {
                       // The outcome is unknown: the SET may have happened. Compare-and-delete
                       // our token so a lock we never learned about does not sit out its TTL.
                       std::vector<std::string> cleanup{owner};
                       cleanup.insert(cleanup.end(), shared->release_extra.begin(), shared->release_extra.end());
                       core->eval_now(*shared->release, encode_evalsha(*shared->release, shared->release_keys, cleanup),
                                      [](Result<Reply>) {});
                       a.error = Error(r.code(), "acquiring " + what + ": " + r.error().what());
                       return report(std::move(a));
                     }
                     const Reply& rep = *r;
                     if (rep.is_error()) {
                       a.error = Error(classify_error_reply(rep), "acquiring " + what + ": " + rep.str());
                       return report(std::move(a));
                     }
                     if (!rep.is_array() || rep.size() != 2 || !rep[0].is_integer()) {
                       a.error = Error(errc::protocol, "acquiring " + what + ": unexpected reply " + rep.to_string());
                       return report(std::move(a));
                     }
                     const long long code = rep[0].integer();
                     if (code == 1) {
                       a.kind = Attempt::Kind::acquired;
                       a.lease = std::make_shared<LeaseRecord>(core, name, owner,
                                                               FencingToken{static_cast<std::uint64_t>(rep[1].integer())},
                                                               *shared, lease, sent);
                       core->active_leases_.fetch_add(1);
                       core->renewals().add(a.lease);
                     } else if (code == 0) {
                       a.kind = Attempt::Kind::busy;
                       if (rep[1].integer() >= 0) a.holder_ttl = milliseconds(rep[1].integer());
                     } else {
                       a.error = Error(errc::wrong_type, what + ": key '" + key + "' holds a " + rep[1].str() +
                                                             ", not a dlock Mutex");
                     }
                     report(std::move(a));
                   });
  };
}

}  // namespace

Result<Lease> Mutex::acquire(WaitOptions wait, std::stop_token stop) {
  return acquire_blocking(core_,
                          AcquireRequest{key_, key_ + ":ch", "lock '" + name_ + "' on " + core_->address().display(),
                                         wait, mutex_attempt(core_, name_, key_, lease_)},
                          std::move(stop));
}

void Mutex::async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop) {
  start_acquire(core_,
                AcquireRequest{key_, key_ + ":ch", "lock '" + name_ + "' on " + core_->address().display(), wait,
                               mutex_attempt(core_, name_, key_, lease_)},
                std::move(done), std::move(stop));
}

Mutex::Hold* Mutex::hold_of_this_thread() const {
  const auto me = std::this_thread::get_id();
  for (auto& h : holds_) {
    if (h.thread == me) return &h;
  }
  return nullptr;
}

bool Mutex::this_thread_holds() const {
  std::lock_guard lock(holds_mu_);
  const Hold* h = hold_of_this_thread();
  return h != nullptr && h->lease.held();
}

void Mutex::lock() {
  // Mutex is not reentrant: waiting for our own hold would only end when it is lost.
  if (this_thread_holds()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "lock '" + name_ + "' is already held by this thread (use ReentrantMutex)");
  }
  Result<Lease> r = acquire(WaitOptions{});
  if (!r) throw_error(r.code(), r.error().what());
  std::lock_guard lock(holds_mu_);
  Hold* h = hold_of_this_thread();
  if (h == nullptr) h = &holds_.emplace_back(Hold{std::this_thread::get_id(), {}, {}, false, {}});
  h->token = r->token();
  h->lost = false;
  h->last_error = {};
  h->lease = std::move(*r);
}

bool Mutex::timed_try(milliseconds d) {
  if (this_thread_holds()) return false;
  Result<Lease> r = acquire(WaitOptions{std::max(d, milliseconds(0)), {}});
  if (!r) {
    if (r.code() == errc::busy || r.code() == errc::timeout) return false;
    throw_error(r.code(), r.error().what());
  }
  std::lock_guard lock(holds_mu_);
  Hold* h = hold_of_this_thread();
  if (h == nullptr) h = &holds_.emplace_back(Hold{std::this_thread::get_id(), {}, {}, false, {}});
  h->token = r->token();
  h->lost = false;
  h->last_error = {};
  h->lease = std::move(*r);
  return true;
}

bool Mutex::try_lock() { return timed_try(milliseconds(0)); }

void Mutex::unlock() noexcept {
  Lease lease;
  {
    std::lock_guard lock(holds_mu_);
    Hold* h = hold_of_this_thread();
    if (h == nullptr) return;
    lease = std::move(h->lease);
  }
  Result<void> r = lease.release();
  std::lock_guard lock(holds_mu_);
  if (Hold* h = hold_of_this_thread()) {
    h->last_error = r.error();
    h->lost = lease.lost() || r.code() == errc::lock_lost;
  }
}

bool Mutex::owns_lock() const noexcept {
  std::lock_guard lock(holds_mu_);
  const Hold* h = hold_of_this_thread();
  return h != nullptr && h->lease.held();
}

FencingToken Mutex::fencing_token() const noexcept {
  std::lock_guard lock(holds_mu_);
  const Hold* h = hold_of_this_thread();
  return h != nullptr ? h->token : FencingToken{};
}

bool Mutex::lost() const noexcept {
  std::lock_guard lock(holds_mu_);
  const Hold* h = hold_of_this_thread();
  return h != nullptr && (h->lost || h->lease.lost());
}

milliseconds Mutex::remaining() const noexcept {
  std::lock_guard lock(holds_mu_);
  const Hold* h = hold_of_this_thread();
  return h != nullptr ? h->lease.remaining() : milliseconds(0);
}

Error Mutex::last_error() const {
  std::lock_guard lock(holds_mu_);
  const Hold* h = hold_of_this_thread();
  return h != nullptr ? h->last_error : Error{};
}

}  // namespace dlock
