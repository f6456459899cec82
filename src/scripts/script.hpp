// An embedded Lua script: its name, source and SHA1 (computed at build time).
//
// The sources live in src/scripts/*.lua; cmake/embed_scripts.cmake turns each file NAME.lua into
// a constant dlock::detail::scripts::NAME, so EVALSHA can be sent without loading anything at
// start-up. A line "--@include NAME.lua" in a script is replaced by src/scripts/include/NAME.lua
// first (code several scripts share: Redis runs each script alone); `source` and `sha1` are the
// expanded text's. The scripts several files use are declared below; a lock kind declares its
// own scripts in its source file.
//
// Scripts that renew, release, withdraw or dequeue open with "#!lua flags=allow-oom" (Redis 7):
// at maxmemory (noeviction) Redis refuses a script's first write that may grow memory (SET,
// ZADD, INCR), and a holder must still be able to keep and give back what it holds. Acquire
// scripts have no flags: an acquisition at maxmemory fails, as it should.
#pragma once

namespace dlock::detail {

struct Script {
  const char* name;
  const char* source;
  const char* sha1;
};

namespace scripts {
extern const Script mutex_acquire;
extern const Script mutex_release;
extern const Script mutex_renew;
extern const Script fenced_set;
}  // namespace scripts

}  // namespace dlock::detail
