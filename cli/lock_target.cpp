#include "lock_target.hpp"

#include <charconv>

#include "dlock/admin.hpp"
#include "dlock/fair_lock.hpp"
#include "dlock/mutex.hpp"
#include "dlock/redlock.hpp"
#include "dlock/reentrant_mutex.hpp"
#include "dlock/semaphore.hpp"
#include "dlock/shared_mutex.hpp"

namespace dlock::cli {

namespace {

std::size_t parse_count(std::string_view option, const std::string& text) {
  std::size_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v == 0 || v > 1000000) {
    throw UsageError(std::string(option) + " needs a whole number from 1 to 1000000, not '" + text + "'");
  }
  return v;
}

}  // namespace

const std::vector<OptionSpec>& lock_spec_options() {
  static const std::vector<OptionSpec> specs = {
      {"--kind", 0, true}, {"--read", 0, false}, {"--permits", 0, true}, {"--take", 0, true}};
  return specs;
}

const char* kind_text(Kind kind) {
  switch (kind) {
    case Kind::reentrant: return "reentrant";
    case Kind::fair: return "fair";
    case Kind::rw: return "rw";
    case Kind::semaphore: return "semaphore";
    case Kind::mutex: break;
  }
  return "mutex";
}

LockSpec parse_lock_spec(const ParsedArgs& a) {
  LockSpec s;
  std::optional<Kind> kind;
  if (auto k = a.last("--kind")) {
    if (*k == "mutex") kind = Kind::mutex;
    else if (*k == "reentrant") kind = Kind::reentrant;
    else if (*k == "fair") kind = Kind::fair;
    else if (*k == "rw") kind = Kind::rw;
    else if (*k == "semaphore") kind = Kind::semaphore;
    else throw UsageError("--kind must be mutex, reentrant, fair, rw or semaphore, not '" + *k + "'");
  }
  s.read = a.has("--read");
  if (auto p = a.last("--permits")) s.permits = parse_count("--permits", *p);
  if (auto t = a.last("--take")) s.take = parse_count("--take", *t);
  const bool semaphore_options = s.permits || a.has("--take");
  if (s.read && semaphore_options) throw UsageError("--read is for a rw lock; --permits and --take for a semaphore");
  if (s.read) {
    if (kind && *kind != Kind::rw) throw UsageError("--read is a shared hold of a rw lock: it needs --kind rw");
    kind = Kind::rw;
  }
  if (semaphore_options) {
    if (kind && *kind != Kind::semaphore) throw UsageError("--permits and --take are for --kind semaphore");
    kind = Kind::semaphore;
  }
  s.kind = kind.value_or(Kind::mutex);
  if (s.permits && s.take > *s.permits) {
    throw UsageError("--take " + std::to_string(s.take) + " is more than the semaphore's --permits " +
                     std::to_string(*s.permits) + ": it could never be granted");
  }
  return s;
}

std::optional<unsigned> replicas_option(const ParsedArgs& a) {
  const auto text = a.last("--replicas");
  if (!text) return std::nullopt;
  unsigned v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v > 100) {
    throw UsageError("--replicas needs a whole number from 0 to 100, not '" + *text + "'");
  }
  return v;
}

std::string describe_spec(const LockSpec& spec) {
  switch (spec.kind) {
    case Kind::rw: return spec.read ? "rw (read)" : "rw (write)";
    case Kind::semaphore:
      return "semaphore (" + std::to_string(spec.take) + " permit" + (spec.take == 1 ? "" : "s") +
             (spec.permits ? " of " + std::to_string(*spec.permits) : std::string()) + ")";
    default: return kind_text(spec.kind);
  }
}

LockTarget::LockTarget(dlock::Client& client, std::string name, const LockSpec& spec, const dlock::LeaseOptions& lease)
    : client_(client), name_(std::move(name)), spec_(spec) {
  // The library refuses what it cannot hold (a lease the drift allowance eats, say) with
  // invalid_argument: the command line asked for it, so it is a usage error, as with --redlock.
  try {
    switch (spec_.kind) {
      case Kind::mutex: mutex_ = std::make_unique<dlock::Mutex>(client, name_, lease); break;
      case Kind::reentrant: {
        dlock::ReentrantMutex::Options o;
        o.lease = lease;
        reentrant_ = std::make_unique<dlock::ReentrantMutex>(client, name_, o);
        break;
      }
      case Kind::fair: fair_ = std::make_unique<dlock::FairLock>(client, name_, lease); break;
      case Kind::rw: rw_ = std::make_unique<dlock::SharedMutex>(client, name_, lease); break;
      case Kind::semaphore:
        semaphore_ = std::make_unique<dlock::Semaphore>(client, name_, spec_.permits.value_or(1), lease);
        break;
    }
  } catch (const std::system_error& e) {
    if (e.code() != dlock::errc::invalid_argument) throw;
    throw UsageError(e.what());
  }
}

LockTarget::LockTarget(const std::vector<dlock::Client*>& nodes, std::string name, const LockSpec& spec,
                       const dlock::LeaseOptions& lease)
    : client_(*nodes.front()), name_(std::move(name)), spec_(spec) {
  if (spec_.kind != Kind::mutex) {
    throw UsageError(std::string("--redlock holds a mutex (a Redlock); --kind ") + kind_text(spec_.kind) +
                     " needs one deployment named with --redis");
  }
  try {
    redlock_ = std::make_unique<dlock::Redlock>(nodes, name_, lease);
  } catch (const std::system_error& e) {
    throw UsageError(std::string("--redlock: ") + e.what());
  }
}

LockTarget::~LockTarget() = default;

Result<void> LockTarget::prepare(std::optional<std::size_t>& changed_from) {
  if (!semaphore_) return {};
  auto info = dlock::inspect(client_, name_);
  if (!info) return info.error();
  if (info->kind != dlock::LockKind::none && info->kind != dlock::LockKind::semaphore) {
    return Error(errc::wrong_type, "lock '" + name_ + "' is a " + std::string(dlock::to_string(info->kind)) +
                                       " (key " + info->key + "), not a semaphore");
  }
  if (!spec_.permits) {
    if (!info->permits_limit) {
      return Error(errc::invalid_argument, "semaphore '" + name_ + "' does not exist yet: give its size with --permits N");
    }
    // More than it has could only be taken after a resize: without this, the wait went on
    // (for ever without --wait) with nothing said, as if other holders were in the way.
    if (*info->permits_limit >= 0 && spec_.take > static_cast<unsigned long long>(*info->permits_limit)) {
      return Error(errc::invalid_argument, "--take " + std::to_string(spec_.take) + " is more than semaphore '" + name_ +
                                               "' has (" + std::to_string(*info->permits_limit) +
                                               " permits): resize it with --permits N first");
    }
    return {};
  }
  const auto wanted = static_cast<long long>(*spec_.permits);
  if (info->permits_limit && *info->permits_limit == wanted) return {};
  if (info->permits_limit) changed_from = static_cast<std::size_t>(std::max(0LL, *info->permits_limit));
  return semaphore_->set_permits(*spec_.permits);
}

void LockTarget::async_acquire(dlock::WaitOptions wait, std::function<void(Result<dlock::Lease>)> done,
                               std::stop_token stop) {
  if (redlock_) return redlock_->async_acquire(wait, std::move(done), std::move(stop));
  switch (spec_.kind) {
    case Kind::mutex: return mutex_->async_acquire(wait, std::move(done), std::move(stop));
    case Kind::reentrant: return reentrant_->async_acquire(wait, std::move(done), std::move(stop));
    case Kind::fair: return fair_->async_acquire(wait, std::move(done), std::move(stop));
    case Kind::rw:
      if (spec_.read) return rw_->async_acquire_shared(wait, std::move(done), std::move(stop));
      return rw_->async_acquire(wait, std::move(done), std::move(stop));
    case Kind::semaphore: return semaphore_->async_acquire(spec_.take, wait, std::move(done), std::move(stop));
  }
}

}  // namespace dlock::cli
