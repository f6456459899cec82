#include "dlock/semaphore.hpp"

#include <algorithm>
#include <atomic>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"
#include "locks/script_attempt.hpp"
#include "scripts/script_call.hpp"
#include "util/names.hpp"
#include "util/sync_wait.hpp"

namespace dlock::detail::scripts {
extern const Script sem_acquire;
extern const Script sem_renew;
extern const Script sem_release;
extern const Script sem_set_limit;
extern const Script sem_state;
}  // namespace dlock::detail::scripts

namespace dlock {

using namespace detail;

namespace {

// How long a release is remembered (P{N}:released): long enough for any retry of a release.
constexpr milliseconds release_marker_ttl{30000};

// Permit waiters must not share a process-local wait queue: only a queue's head tries, and after
// it took a permit the next would wait for a release although more permits may be free. Each
// acquisition waits on a queue of its own; all listen on the semaphore's one channel.
std::atomic<std::uint64_t> next_permit_queue{0};

Result<Reply> eval_blocking(const std::shared_ptr<ClientCore>& core, const Script& s,
                            const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  if (core->on_loop_thread()) {
    return Error(errc::called_from_event_loop, "blocking Semaphore call on the client's event-loop thread");
  }
  auto wait = std::make_shared<SyncWait<Result<Reply>>>();
  core->eval(s, keys, args, [wait](Result<Reply> reply) { wait->set(std::move(reply)); });
  return wait->wait();
}

}  // namespace

Semaphore::Semaphore(Client& client, std::string name, std::size_t permits, LeaseOptions lease)
    : core_(client.core()), name_(std::move(name)), initial_permits_(permits), lease_(std::move(lease)) {
  if (auto ok = validate_lock_name(name_); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease_); !ok) throw_error(ok.code(), ok.error().what());
  key_ = core_->lock_key(name_);
}

Semaphore::~Semaphore() {
  std::deque<Lease> all;
  {
    std::lock_guard lock(mu_);
    all.swap(held_);
  }
  for (auto& l : all) (void)l.release();
}

AcquireRequest Semaphore::request(std::size_t k, WaitOptions wait) const {
  const std::string count = std::to_string(k);
  auto spec = std::make_shared<ScriptAttemptSpec>();
  spec->name = name_;
  spec->kind = "Semaphore";
  spec->acquire = &scripts::sem_acquire;
  spec->keys = {key_, key_ + ":permits", key_ + ":limit", key_ + ":fence"};
  spec->extra_args = {count, std::to_string(initial_permits_)};
  spec->hold.renew = &scripts::sem_renew;
  spec->hold.renew_keys = {key_ + ":permits"};
  spec->hold.renew_extra = {count};
  spec->hold.release = &scripts::sem_release;
  spec->hold.release_keys = {key_ + ":permits", key_ + ":released"};
  spec->hold.release_extra = {key_ + ":ch", std::to_string(release_marker_ttl.count()), count};
  spec->lease = lease_;
  AcquireRequest req;
  req.key = key_ + ":permits:" + std::to_string(next_permit_queue.fetch_add(1));
  req.channel = key_ + ":ch";
  req.what = "Semaphore '" + name_ + "' (" + count + (k == 1 ? " permit" : " permits") + ") on " +
             core_->address().display();
  req.wait = wait;
  req.attempt = script_attempt(core_, std::move(spec));
  req.watch_keys = {key_ + ":permits"};  // gone when the last permit is released or expires
  return req;
}

Result<Lease> Semaphore::acquire(std::size_t k, WaitOptions wait, std::stop_token stop) {
  if (k == 0) return Error(errc::invalid_argument, "Semaphore::acquire(): k must be at least 1");
  return acquire_blocking(core_, request(k, wait), std::move(stop));
}

void Semaphore::async_acquire(std::size_t k, WaitOptions wait, std::function<void(Result<Lease>)> done,
                              std::stop_token stop) {
  if (k == 0) return done(Error(errc::invalid_argument, "Semaphore::async_acquire(): k must be at least 1"));
  start_acquire(core_, request(k, wait), std::move(done), std::move(stop));
}

// ---------------------------------------------------------------- counting_semaphore members

void Semaphore::acquire() {
  Result<Lease> r = acquire(1, WaitOptions{});
  if (!r) throw_error(r.code(), r.error().what());
  std::lock_guard lock(mu_);
  held_.push_back(std::move(*r));
}

bool Semaphore::timed_try(milliseconds d) {
  WaitOptions wait;  // the default recheck interval
  wait.timeout = std::max(d, milliseconds(0));
  Result<Lease> r = acquire(1, wait);
  if (!r) {
    if (r.code() == errc::busy || r.code() == errc::timeout) return false;
    throw_error(r.code(), r.error().what());
  }
  std::lock_guard lock(mu_);
  held_.push_back(std::move(*r));
  return true;
}

bool Semaphore::try_acquire() { return timed_try(milliseconds(0)); }

void Semaphore::release(std::size_t n) {
  std::vector<Lease> mine;
  {
    std::lock_guard lock(mu_);
    if (n > held_.size()) {
      throw_error(make_error_code(errc::invalid_argument),
                  "Semaphore '" + name_ + "': release(" + std::to_string(n) + ") but only " +
                      std::to_string(held_.size()) + " permits are held through acquire()");
    }
    for (std::size_t i = 0; i < n; ++i) {
      mine.push_back(std::move(held_.front()));
      held_.pop_front();
    }
  }
  Error last;
  for (auto& l : mine) {  // outside the lock: each blocks for a round trip
    Result<void> r = l.release();
    if (!r.ok() && (!last || r.code() == errc::lock_lost)) last = r.error();
  }
  std::lock_guard lock(mu_);
  last_error_ = last;
}

std::size_t Semaphore::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

Error Semaphore::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

// ----------------------------------------------------------------------------------- limit

Result<void> Semaphore::set_permits(std::size_t n) {
  const std::string what = "Semaphore '" + name_ + "' on " + core_->address().display();
  Result<Reply> r = eval_blocking(core_, scripts::sem_set_limit, {key_, key_ + ":permits", key_ + ":limit"},
                                  {std::to_string(n), key_ + ":ch"});
  if (!r.ok()) return Error(r.code(), "set_permits of " + what + ": " + r.error().what());
  if (r->is_error()) return Error(classify_error_reply(*r), "set_permits of " + what + ": " + r->str());
  return {};
}

Result<std::pair<long long, long long>> Semaphore::state() const {
  const std::string what = "Semaphore '" + name_ + "' on " + core_->address().display();
  Result<Reply> r = eval_blocking(core_, scripts::sem_state, {key_, key_ + ":permits", key_ + ":limit"}, {});
  if (!r.ok()) return Error(r.code(), what + ": " + r.error().what());
  if (r->is_error()) return Error(classify_error_reply(*r), what + ": " + r->str());
  if (!r->is_array() || r->size() != 2 || !(*r)[0].is_integer() || !(*r)[1].is_integer()) {
    return Error(errc::protocol, what + ": unexpected reply " + r->to_string());
  }
  long long limit = (*r)[0].integer();
  if (limit < 0) limit = static_cast<long long>(initial_permits_);
  return std::pair<long long, long long>{limit, (*r)[1].integer()};
}

Result<std::size_t> Semaphore::permits() const {
  auto s = state();
  if (!s) return s.error();
  return static_cast<std::size_t>(s->first);
}

Result<std::size_t> Semaphore::available() const {
  auto s = state();
  if (!s) return s.error();
  return static_cast<std::size_t>(std::max(0LL, s->first - s->second));
}

}  // namespace dlock
