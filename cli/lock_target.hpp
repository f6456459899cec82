// lock_target.hpp — the lock kinds `dlock run` can hold, behind one acquire call:
//   --kind mutex (default) | reentrant | fair | rw | semaphore
//   --read         a shared (reader) hold of a rw lock; implies --kind rw
//   --permits N    the semaphore's SIZE (its limit in Redis); implies --kind semaphore. When the
//                  stored limit differs, it is set to N before acquiring (set_permits: waiters
//                  wake, held permits are never revoked). Without it, a semaphore must exist.
//   --take K       permits to take at once (default 1); implies --kind semaphore
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "args.hpp"
#include "dlock/client.hpp"
#include "dlock/lease.hpp"
#include "dlock/options.hpp"

namespace dlock {
class Mutex;
class ReentrantMutex;
class FairLock;
class SharedMutex;
class Semaphore;
class Redlock;
}  // namespace dlock

namespace dlock::cli {

enum class Kind { mutex, reentrant, fair, rw, semaphore };

struct LockSpec {
  Kind kind = Kind::mutex;
  bool read = false;                  // rw: shared hold
  std::optional<std::size_t> permits;  // semaphore: its size
  std::size_t take = 1;               // semaphore: permits taken
};

// The options above, for a command's OptionSpec list.
const std::vector<OptionSpec>& lock_spec_options();
// Reads and checks them (UsageError on a bad or contradictory combination).
LockSpec parse_lock_spec(const ParsedArgs& a);
// --replicas K (run, acquire, doctor): replicas that must acknowledge each acquisition
// (ClientOptions::replication_ack); nullopt when not given. UsageError unless 0..100.
std::optional<unsigned> replicas_option(const ParsedArgs& a);
const char* kind_text(Kind kind);
// "mutex", "rw (read)", "rw (write)", "semaphore (2 of 5 permits)"...
std::string describe_spec(const LockSpec& spec);

class LockTarget {
 public:
  LockTarget(dlock::Client& client, std::string name, const LockSpec& spec, const dlock::LeaseOptions& lease);
  // A Redlock over `nodes` (--redlock): mutex only (UsageError otherwise), as Redlock is a mutex.
  LockTarget(const std::vector<dlock::Client*>& nodes, std::string name, const LockSpec& spec,
             const dlock::LeaseOptions& lease);
  ~LockTarget();
  LockTarget(const LockTarget&) = delete;
  LockTarget& operator=(const LockTarget&) = delete;

  // Blocking set-up before the wait. Semaphore: checks that a limit exists or --permits gave
  // one, and stores --permits when it differs (`changed_from` says from what). Others: nothing.
  Result<void> prepare(std::optional<std::size_t>& changed_from);
  // `done` runs on the Client's event-loop thread (for a Redlock, the first node's): it must
  // not block.
  void async_acquire(dlock::WaitOptions wait, std::function<void(Result<dlock::Lease>)> done, std::stop_token stop);

  const std::string& name() const noexcept { return name_; }
  const LockSpec& spec() const noexcept { return spec_; }

 private:
  dlock::Client& client_;
  std::string name_;
  LockSpec spec_;
  std::unique_ptr<dlock::Mutex> mutex_;
  std::unique_ptr<dlock::ReentrantMutex> reentrant_;
  std::unique_ptr<dlock::FairLock> fair_;
  std::unique_ptr<dlock::SharedMutex> rw_;
  std::unique_ptr<dlock::Semaphore> semaphore_;
  std::unique_ptr<dlock::Redlock> redlock_;
};

}  // namespace dlock::cli
