// dlock/fencing.hpp — fencing tokens, and the resource-side check that makes them useful.
//
// Any lease-based lock can be held by two clients at once when one of them pauses (GC, SIGSTOP,
// swapping, a VM migration) past its lease: when it resumes it still believes it holds the lock.
// Only the resource can reject its late writes. Every dlock acquisition returns a FencingToken;
// a resource that follows ONE rule everywhere —
//
//     accept a write whose token is >= the highest token it has seen, and store the maximum
//
// — rejects every write of a holder that has since been superseded, and still accepts repeated
// writes of the current holder.
//
// For a SQL table the same rule is one statement:
//     UPDATE stock SET qty = :qty, fence = :t WHERE id = :id AND fence <= :t
// (0 rows updated: the write came from a stale holder; reject it).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/result.hpp"

namespace dlock {

class Client;

// A token that increases strictly across successive holders of one lock, as long as the
// lock's fencing counter survives (it has no TTL and is never deleted). When the counter is lost
// (restart without persistence, failover to a replica that lacked it) it is re-seeded from the
// server's clock in microseconds, so tokens keep increasing unless the server's clock went back.
// Tokens lie between 1 and 2^53 - 1: a counter someone set by hand outside 0..2^53 - 2 (or to
// no number) makes every kind's acquisition of that name fail with errc::wrong_type naming
// P{N}:fence, leaving the counter as it was; deleting it repairs the name.
// Not guaranteed: tokens of *different* locks are unrelated.
struct FencingToken {
  std::uint64_t value = 0;  // 0: no token
  explicit operator bool() const noexcept { return value != 0; }
  friend auto operator<=>(const FencingToken&, const FencingToken&) = default;
};

// The outcome of a fenced write.
struct FencedWrite {
  bool accepted = false;     // false: the token was lower than one already seen: a stale holder
  FencingToken highest;      // the highest token the resource has seen, after this write
};

// fenced_set()
//
// Atomically: if `token` >= the highest token stored with `key`, store `value` and make
// `token` the highest; otherwise change nothing. The resource is a hash at `key` with fields
// `value` and `fence`. Blocks for one round trip. Errors: connection, timeout, wrong_type (the
// key is not such a hash, or its `fence` holds no token), invalid_argument (a zero token), auth, script,
// called_from_event_loop. Tokens are compared as Lua numbers: exact below 2^53, which dlock's
// microsecond-seeded counters stay below for centuries.
Result<FencedWrite> fenced_set(Client& client, std::string_view key, std::string_view value,
                               FencingToken token);

// fenced_get(): the value stored by fenced_set(), nullopt if none. One round trip.
Result<std::optional<std::string>> fenced_get(Client& client, std::string_view key);

}  // namespace dlock
