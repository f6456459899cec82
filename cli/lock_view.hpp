// lock_view.hpp — how status, list, leaks and unlock show what dlock::inspect() and
// dlock::force_unlock() found: the kind's name, who a holder is, and the JSON of a lock.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dlock/admin.hpp"
#include "json.hpp"
#include "owner_token.hpp"

namespace dlock::cli {

// Text read from the server, made safe to print: as is when every byte is printable ASCII,
// else quoted and escaped as a JSON string. A foreign value under a lock's key is whatever
// its writer chose; raw, its escape sequences would drive the operator's terminal.
std::string shown(std::string_view text);

// "mutex", "reentrant", "fair", "rw", "semaphore"; for a key that is no dlock lock, its Redis
// type ("hash", "list"...); "none" when nothing lives under the name.
std::string kind_name(const dlock::LockInfo& info);

// "held"; "foreign" for a key that is no dlock lock (acquisitions fail on it with wrong_type, so
// it is not free); "free" otherwise.
const char* state_name(const dlock::LockInfo& info);

// "exclusive", "read", "write", "permits".
const char* mode_name(dlock::LockHolder::Mode mode);

// Host, pid and since-when of a holder: from an owner token, or from the "@<host>:<pid>" end of
// a ReentrantMutex owner identity (which carries no time).
std::optional<OwnerInfo> holder_info(const std::string& owner);

// The TTL for people: "12s", "never" (no expiry) or "-".
std::string ttl_text(const std::optional<std::chrono::milliseconds>& ttl);

// One holder as a JSON object: owner, mode, ttl_ms (null: no expiry), count, token, holder.
void json_holder(Json& j, const dlock::LockHolder& h);
// {"host", "pid", "since_unix_ms"} of a holder, or null.
void json_holder_info(Json& j, const std::optional<OwnerInfo>& info);

// The members every lock object in status/list output has: name, key, state, kind, owner,
// holder, ttl_ms, fencing_counter, fencing_counter_fault, holders, queue, waiters, subscribers,
// permits_limit.
void json_lock_members(Json& j, const dlock::LockInfo& info);

// The number of waiters dlock can see: a FairLock's live queue places, a SharedMutex's live
// writer intents plus its channel's subscribers, else the channel's subscribers.
long long waiter_count(const dlock::LockInfo& info);

}  // namespace dlock::cli
