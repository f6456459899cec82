#include "dlock/reentrant_mutex.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "client_core.hpp"
#include "locks/acquire_op.hpp"
#include "locks/reentrant_hold.hpp"
#include "locks/script_attempt.hpp"  // refuse_late
#include "util/names.hpp"
#include "util/slot.hpp"

namespace dlock {

using namespace detail;

namespace {

constexpr std::size_t max_owner_length = 256;

// Per process, counting up, never reused: a thread that ends cannot pass its holds on to a
// later thread that happens to get the same OS thread id.
std::uint64_t thread_number() {
  static std::atomic<std::uint64_t> next{0};
  thread_local const std::uint64_t n = ++next;
  return n;
}

Result<void> validate_owner(std::string_view owner) {
  if (owner.empty() || owner.size() > max_owner_length) {
    return Error(errc::invalid_argument, "owner identity must be 1 to 256 bytes");
  }
  if (owner.front() == ':') return Error(errc::invalid_argument, "owner identity must not start with ':'");
  if (std::all_of(owner.begin(), owner.end(), [](unsigned char c) { return c >= '0' && c <= '9'; })) {
    return Error(errc::invalid_argument, "owner identity '" + std::string(owner) +
                                             "' is only digits; those are reserved for threads");
  }
  for (unsigned char c : owner) {
    if (c < 0x20 || c == 0x7f) return Error(errc::invalid_argument, "owner identity contains a control character");
  }
  return {};
}

// Redisson uses lock names as they are, braces included.
Result<void> validate_redisson_name(std::string_view name) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  if (name.size() > max_name_length) {
    return Error(errc::invalid_argument,
                 "lock name is " + std::to_string(name.size()) + " bytes; at most 512 are allowed");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return Error(errc::invalid_argument, "lock name contains a control character");
  }
  return {};
}

// Redisson's RedissonObject.prefixName: a name with a brace already carries its hash tag, so it
// is appended after a colon; any other is wrapped in braces. Either way the derived name hashes
// to the lock key's Cluster slot, and Java listens on (and deletes) exactly these names.
std::string redisson_prefix_name(std::string_view prefix, const std::string& name) {
  if (name.find('{') != std::string::npos) return std::string(prefix) + ":" + name;
  return std::string(prefix) + ":{" + name + "}";
}

// Redisson names its client instance with a UUID; ours is the Client's 128 random bits, shaped
// as a version-4 UUID: 8-4-4-4-12 hex digits.
std::string uuid_from(const std::string& hex32) {
  std::string h = hex32;
  h.resize(32, '0');
  h[12] = '4';
  static constexpr char hex[] = "0123456789abcdef";
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  h[16] = hex[(nibble(h[16]) & 0x3) | 0x8];
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

}  // namespace

// The takes of each owner through the standard members: a stack per owner identity, so a
// thread (or an explicit owner, from any thread) gives back its latest take first.
class ReentrantMutex::Holds {
 public:
  ~Holds() { release_all(); }

  void push(const std::string& owner, Lease lease) {
    std::lock_guard lock(mu_);
    Stack& s = stacks_[owner];
    if (s.takes.empty()) {
      s.lost = false;
      s.last_error = {};
    }
    s.token = lease.token();
    s.takes.push_back(std::move(lease));
  }

  // Gives back the latest take (blocking, never throws) and records the outcome.
  void release_latest(const std::string& owner) noexcept {
    Lease lease;
    {
      std::lock_guard lock(mu_);
      auto it = stacks_.find(owner);
      if (it == stacks_.end() || it->second.takes.empty()) return;
      lease = std::move(it->second.takes.back());
      it->second.takes.pop_back();
    }
    Result<void> r = lease.release();  // outside the lock: it blocks for a round trip
    std::lock_guard lock(mu_);
    Stack& s = stacks_[owner];
    s.last_error = r.error();
    s.lost = s.lost || lease.lost() || r.code() == errc::lock_lost;
  }

  void release_all() noexcept {
    std::unordered_map<std::string, Stack> all;
    {
      std::lock_guard lock(mu_);
      all.swap(stacks_);
    }
    for (auto& [owner, s] : all) {
      while (!s.takes.empty()) {
        (void)s.takes.back().release();
        s.takes.pop_back();
      }
    }
  }

  bool holds(const std::string& owner) const {
    std::lock_guard lock(mu_);
    const Stack* s = find(owner);
    return s != nullptr && !s->takes.empty() && s->takes.back().held();
  }
  std::size_t count(const std::string& owner) const {
    std::lock_guard lock(mu_);
    const Stack* s = find(owner);
    return s != nullptr ? s->takes.size() : 0;
  }
  FencingToken token(const std::string& owner) const {
    std::lock_guard lock(mu_);
    const Stack* s = find(owner);
    return s != nullptr ? s->token : FencingToken{};
  }
  bool lost(const std::string& owner) const {
    std::lock_guard lock(mu_);
    const Stack* s = find(owner);
    return s != nullptr && (s->lost || (!s->takes.empty() && s->takes.back().lost()));
  }
  milliseconds remaining(const std::string& owner) const {
    std::lock_guard lock(mu_);
    const Stack* s = find(owner);
    return s != nullptr && !s->takes.empty() ? reentrant_hold_remaining(s->takes.back()) : milliseconds(0);
  }
  Error last_error(const std::string& owner) const {
    std::lock_guard lock(mu_);
    const Stack* s = find(owner);
    return s != nullptr ? s->last_error : Error{};
  }

 private:
  struct Stack {
    std::vector<Lease> takes;
    FencingToken token;
    bool lost = false;
    Error last_error;
  };
  const Stack* find(const std::string& owner) const {
    auto it = stacks_.find(owner);
    return it != stacks_.end() ? &it->second : nullptr;
  }

  mutable std::mutex mu_;
  std::unordered_map<std::string, Stack> stacks_;
};

ReentrantMutex::ReentrantMutex(Client& client, std::string name, Options options)
    : core_(client.core()), name_(std::move(name)), options_(std::move(options)), holds_(std::make_unique<Holds>()) {
  const bool redisson = options_.redisson_compat;
  if (auto ok = redisson ? validate_redisson_name(name_) : validate_lock_name(name_); !ok) {
    throw_error(ok.code(), ok.error().what());
  }
  if (auto ok = validate_lease(options_.lease); !ok) throw_error(ok.code(), ok.error().what());
  if (auto ok = refuse_replication_ack("ReentrantMutex", options_.lease, core_->options()); !ok) {
    throw_error(ok.code(), ok.error().what());
  }
  if (!options_.owner.empty()) {
    if (auto ok = validate_owner(options_.owner); !ok) throw_error(ok.code(), ok.error().what());
  }
  auto layout = std::make_shared<ReentrantLayout>();
  layout->name = name_;
  if (redisson) {
    layout->key = name_;
    layout->channel = redisson_prefix_name("redisson_lock__channel", name_);
    layout->message = "0";
    layout->latch_prefix = redisson_prefix_name("redisson_unlock_latch", name_) + ":";
    // On a Cluster the release names the lock, a latch and (SPUBLISH) the channel: one slot.
    // Redisson's names share it for a name without braces and for one with a non-empty {tag};
    // for any other ("a{}b", "a{b", "a}b") they hash elsewhere (in Java too), and every release
    // would fail with CROSSSLOT while the watchdog kept the lock.
    if (core_->cluster_mode() && (detail::hash_tag(layout->channel) != detail::hash_tag(name_) ||
                                  detail::hash_tag(layout->latch_prefix) != detail::hash_tag(name_))) {
      throw_error(make_error_code(errc::invalid_argument),
                  "lock name '" + name_ + "': in Redisson mode on a Redis Cluster a name with braces needs a " +
                      "non-empty {hash tag} (its channel and release latch would hash to other slots)");
    }
    owner_base_ = uuid_from(core_->client_id()) + ":";
  } else {
    layout->key = core_->lock_key(name_);
    layout->fence_key = layout->key + ":fence";
    layout->channel = layout->key + ":ch";
    layout->message = "released";
    layout->latch_prefix = layout->key + ":rel:";
    owner_base_ = core_->client_id() + ":";
    owner_suffix_ = "@" + core_->identity();
  }
  layout_ = std::move(layout);
}

ReentrantMutex::~ReentrantMutex() = default;  // Holds releases what lock() took

const std::string& ReentrantMutex::key() const noexcept { return layout_->key; }

std::string ReentrantMutex::owner() const {
  if (!options_.owner.empty()) return owner_base_ + options_.owner + owner_suffix_;
  return owner_base_ + std::to_string(thread_number()) + owner_suffix_;
}

std::string ReentrantMutex::owner(const Owner& who) const {
  if (auto ok = validate_owner(who.id); !ok) throw_error(ok.code(), ok.error().what());
  return owner_base_ + who.id + owner_suffix_;
}

AcquireRequest ReentrantMutex::request(const std::string& owner, WaitOptions wait) const {
  AcquireRequest req;
  req.key = layout_->key;
  req.channel = layout_->channel;
  req.what = core_->lock_what("ReentrantMutex", name_);
  req.wait = wait;
  // A take whose reply came back after its validity ended is given back (its own release: one
  // decrement, through its latch) and the try reports busy (script_attempt.hpp, refuse_late).
  req.attempt = [take = reentrant_attempt(core_, layout_, owner, options_.lease)](const TryContext& ctx, std::function<void(Attempt)> report) {
    take(ctx, [report = std::move(report)](Attempt a) {
      if (!refuse_late(a, report)) report(std::move(a));
    });
  };
  return req;
}

Result<Lease> ReentrantMutex::take(const std::string& owner, WaitOptions wait, std::stop_token stop) {
  if (reentrant_hold_live(*core_, layout_->key, owner)) {
    // A re-take: one try, outside the wait queue (queued behind this process's waiters it
    // would wait for its own release).
    const bool single = wait.timeout && wait.timeout->count() <= 0;
    Result<Lease> r = acquire_blocking(core_, request(owner, WaitOptions{milliseconds(0), wait.recheck_interval}), stop);
    if (r.code() != errc::busy || single) return r;
    // Held by another owner after all: this owner's hold was lost (its Leases learn it from
    // their renewal). Wait as asked, like anyone else.
  }
  return acquire_blocking(core_, request(owner, wait), std::move(stop));
}

void ReentrantMutex::async_take(std::string owner, WaitOptions wait, std::function<void(Result<Lease>)> done,
                                std::stop_token stop) {
  const bool single = wait.timeout && wait.timeout->count() <= 0;
  if (single || !reentrant_hold_live(*core_, layout_->key, owner)) {
    return start_acquire(core_, request(owner, wait), std::move(done), std::move(stop));
  }
  auto retry = [core = core_, wait_req = request(owner, wait), done, stop](Result<Lease> r) mutable {
    if (r.code() != errc::busy) return done(std::move(r));
    start_acquire(core, std::move(wait_req), std::move(done), std::move(stop));
  };
  start_acquire(core_, request(owner, WaitOptions{milliseconds(0), wait.recheck_interval}), std::move(retry), stop);
}

Result<Lease> ReentrantMutex::acquire(WaitOptions wait, std::stop_token stop) {
  return take(owner(), wait, std::move(stop));
}

Result<Lease> ReentrantMutex::acquire(const Owner& who, WaitOptions wait, std::stop_token stop) {
  if (auto ok = validate_owner(who.id); !ok) return ok.error();
  return take(owner_base_ + who.id + owner_suffix_, wait, std::move(stop));
}

void ReentrantMutex::async_acquire(WaitOptions wait, std::function<void(Result<Lease>)> done, std::stop_token stop) {
  async_take(owner(), wait, std::move(done), std::move(stop));
}

void ReentrantMutex::async_acquire(const Owner& who, WaitOptions wait, std::function<void(Result<Lease>)> done,
                                   std::stop_token stop) {
  if (auto ok = validate_owner(who.id); !ok) return done(ok.error());
  async_take(owner_base_ + who.id + owner_suffix_, wait, std::move(done), std::move(stop));
}

void ReentrantMutex::lock() {
  const std::string who = owner();
  Result<Lease> r = take(who, WaitOptions{}, {});
  if (!r) throw_error(r.code(), r.error().what());
  holds_->push(who, std::move(*r));
}

bool ReentrantMutex::timed_try(milliseconds d) {
  const std::string who = owner();
  Result<Lease> r = take(who, WaitOptions{std::max(d, milliseconds(0)), {}}, {});
  if (!r) {
    if (r.code() == errc::busy || r.code() == errc::timeout) return false;
    throw_error(r.code(), r.error().what());
  }
  holds_->push(who, std::move(*r));
  return true;
}

bool ReentrantMutex::try_lock() { return timed_try(milliseconds(0)); }
void ReentrantMutex::unlock() noexcept {
  try {
    holds_->release_latest(owner());
  } catch (...) {
    // owner() allocates; out of memory leaves the take to its TTL.
  }
}
bool ReentrantMutex::owns_lock() const noexcept { return holds_->holds(owner()); }
std::size_t ReentrantMutex::hold_count() const noexcept { return holds_->count(owner()); }
FencingToken ReentrantMutex::fencing_token() const noexcept { return holds_->token(owner()); }
bool ReentrantMutex::lost() const noexcept { return holds_->lost(owner()); }
milliseconds ReentrantMutex::remaining() const noexcept { return holds_->remaining(owner()); }
Error ReentrantMutex::last_error() const { return holds_->last_error(owner()); }

}  // namespace dlock
