// lua_scripts.hpp — the CLI's own Lua scripts, sent with EVAL through Client::command. They
// follow the Mutex's Redis layout (dlock/mutex.hpp) exactly:
//   P{N}        the holder's owner token, with a PX TTL
//   P{N}:rel    the last releaser's owner token, for 30 s
//   P{N}:ch     channel: "released" after a release
// (Inspection and forced unlocks of every kind use the library: dlock/admin.hpp.)
#pragma once

namespace dlock::cli::lua {

// KEYS[1] P{N}; ARGV[1] owner; ARGV[2] ttl ms.
// Reply: 1 extended; 0 not held by this owner; {-1, type} the key holds another type.
extern const char* const extend;

// KEYS[1] P{N}, KEYS[2] P{N}:rel; ARGV[1] owner, ARGV[2] the channel P{N}:ch, ARGV[3] marker ttl ms,
// ARGV[4] "PUBLISH", or "SPUBLISH" on a Redis Cluster (where dlock's waiters use sharded pub/sub).
// Reply: 1 released; 2 already released by this owner; 0 not held by this owner;
//        {-1, type} the key holds another type.
extern const char* const release;

// KEYS[1] P{N}, KEYS[2] P{N}:readers, KEYS[3] P{N}:wintent, KEYS[4] P{N}:permits (the keys a
// holder or waiting writer of any kind leaves); ARGV[1] "@<host>:<pid>", this process's part of
// dlock's owner tokens ("<hex>@<host>:<pid>:<unix ms>"; a ReentrantMutex holder's ends with it).
// Hash fields that start with ':' (a ReentrantMutex's ':fence') are bookkeeping, not holders.
// Reply: 1 when one of them names an owner that is not this process (a lock of another kind
// under the name counts too); 0 otherwise: free, or held only by this process's own late try.
extern const char* const held_by_others;

// KEYS[1] P{N}, a Redlock's key on one master; ARGV[1] "@<host>:<pid>:", this process's part of
// its owner tokens, with the ':' that follows it. Reply: 1 when the key holds a token of this
// process; 0 otherwise (free, another owner's, or another type).
extern const char* const held_by_this_process;

}  // namespace dlock::cli::lua
