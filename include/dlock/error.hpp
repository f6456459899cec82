// dlock/error.hpp — the error codes dlock reports.
//
// Defines:
//   dlock::errc            the expected failures, as a scoped enum
//   dlock::error_category  the std::error_category for them ("dlock")
//   dlock::make_error_code lets `std::error_code ec = dlock::errc::timeout;` work
//
// Expected outcomes travel as std::error_code values. Exceptions (std::system_error carrying
// one of these codes) are thrown only where the C++ standard's lock requirements leave no
// other way (the standard-style members of every kind: lock(), lock_shared(), try_lock*() for
// errors other than busy/timeout, Semaphore's acquire()/try_acquire*()/release(n)), by
// constructors, Redlock::connect() and ReentrantMutex::owner(Owner) given an invalid argument,
// and by Result::value() on a failure.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

namespace dlock {

enum class errc {
  // The lock is held by someone else and the caller asked not to wait (try_lock).
  busy = 1,
  // The wait, or a command, ran out of time.
  timeout,
  // The caller cancelled the wait (std::stop_token) or the operation was abandoned.
  cancelled,
  // Release/extend of a lock this owner does not hold (never held, expired, or taken over).
  not_owner,
  // A lock that was held is no longer held: it expired without renewal, or its key was
  // deleted or replaced behind the holder's back.
  lock_lost,
  // The server could not be reached, or the connection broke before a reply arrived.
  connection,
  // AUTH was refused (wrong password, unknown user) or the ACL denies a command or key.
  auth,
  // The lock's key holds a value of another type than the lock kind expects.
  wrong_type,
  // A Lua script failed on the server in a way the script did not expect.
  script,
  // Any other error reply from the server (OOM, READONLY, LOADING, ...).
  server,
  // A malformed URL, duration, lock name, prefix or option.
  invalid_argument,
  // The server sent something that is not valid RESP or exceeds dlock's reply limits.
  protocol,
  // The Client was shut down (destroyed) while the operation was pending.
  shutdown,
  // A blocking call was made on the Client's event loop (in a callback), where it would deadlock.
  called_from_event_loop,
  // Too many commands queued for one node; the caller should back off.
  overloaded,
  // ReplicationAck: fewer replicas than required acknowledged an acquisition in time. The
  // acquisition was undone (fail closed).
  not_replicated,
};

const std::error_category& error_category() noexcept;

// The enumerator's name ("busy", "not_replicated", ...): a stable identifier for logs and
// machine-readable output (the CLI's --json). "unknown" for a value outside the enum.
std::string_view errc_name(errc e) noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// A std::system_error that carries a dlock code and a message naming the lock or server.
[[noreturn]] void throw_error(std::error_code ec, const std::string& what);

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};
