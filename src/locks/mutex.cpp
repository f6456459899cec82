#include "dlock/mutex.hpp"

#include <algorithm>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"
#include "locks/script_attempt.hpp"
#include "locks/thread_holds.hpp"
#include "scripts/script_call.hpp"
#include "util/names.hpp"

namespace dlock {

namespace detail::scripts {
extern const Script mutex_withdraw;
}  // namespace detail::scripts

using namespace detail;

namespace {

// How long the release marker (P{N}:rel) lives, in ms: long enough for any retry of a release.
constexpr std::string_view release_marker_ttl_ms = "30000";

// Every list of a Mutex's scripts is its key plus a suffix (see the layout in mutex.hpp), so a
// Mutex keeps only its key and the lists are built when a script is sent.
//   mutex_acquire.lua   KEYS {P{N}, P{N}:fence, P{N}:waiters}
//   mutex_renew.lua     KEYS {P{N}}
//   mutex_release.lua   KEYS {P{N}, P{N}:rel, P{N}:waiters}  ARGV {owner, P{N}:ch, marker TTL, client id}
//   mutex_withdraw.lua  KEYS {P{N}, P{N}:waiters}            ARGV {waiter id, P{N}:ch}
using Item = KeyLayout::Item;
constexpr Item acquire_keys[] = {{""}, {":fence"}, {":waiters"}};
constexpr Item renew_keys[] = {{""}};
constexpr Item release_keys[] = {{""}, {":rel"}, {":waiters"}};
constexpr Item release_extra[] = {{":ch"}, {release_marker_ttl_ms, true}};
constexpr KeyLayout layout{acquire_keys, {}, renew_keys, {}, release_keys, release_extra, ":ch", true};

// AcquireRequest::withdraw. Best effort: a place that is not given back lapses by itself
// (mutex_acquire.lua). Also while the Client shuts down, whose releases then wait for the answer
// (ClientCore::cleanup_started): a place left on the roll had the shutdown's own release name
// this Client, which was going away, and a waiter elsewhere slept on to its recheck. Once the
// connections are closed the command just fails.
void withdraw_place(ClientCore& core, const std::string& key, std::string_view waiter) {
  auto payload = encode_evalsha(scripts::mutex_withdraw, {key, key + ":waiters"}, {std::string(waiter), key + ":ch"});
  // Only a shutdown awaits the answer; otherwise the handler captures nothing, and so costs no
  // allocation of its own.
  if (auto answered = core.cleanup_started()) {
    return core.eval_now(scripts::mutex_withdraw, std::move(payload),
                         [answered = std::move(answered)](Result<Reply>) { answered(); });
  }
  core.eval_now(scripts::mutex_withdraw, std::move(payload), [](Result<Reply>) {});
}

std::shared_ptr<const ScriptAttemptSpec> make_spec(ClientCore& core, std::string name, LeaseOptions lease) {
  if (auto ok = validate_lock_name(name); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = validate_lease(lease); !ok) throw_error(ok.code(), ok.error().what());
  auto spec = std::make_shared<ScriptAttemptSpec>();
  // Built by concatenation, the key has spare capacity; a lock object lives long, so trim it.
  spec->hold.key = core.lock_key(name);
  spec->hold.key.shrink_to_fit();
  spec->name = std::move(name);
  spec->kind = "Mutex";
  spec->acquire = &scripts::mutex_acquire;
  spec->hold.renew = &scripts::mutex_renew;
  spec->hold.release = &scripts::mutex_release;
  spec->hold.layout = &layout;
  spec->keeps_roll = true;
  spec->lease = std::move(lease);
  return spec;
}

}  // namespace

Mutex::Mutex(Client& client, std::string name, LeaseOptions lease)
    : core_(client.core()), spec_(make_spec(*core_, std::move(name), std::move(lease))) {}

Mutex::~Mutex() { delete holds_.load(); }  // ThreadHolds releases what lock() took

const std::string& Mutex::name() const noexcept { return spec_->name; }
const std::string& Mutex::key() const noexcept { return spec_->hold.key; }

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
  req.key = spec_->hold.key;
  req.channel = spec_->hold.channel_name();
  req.what = core_->lock_what("Mutex", spec_->name);
  req.wait = wait;
  req.attempt = script_attempt(core_, spec_);
  req.withdraw = &withdraw_place;
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
