#include "lua_scripts.hpp"

namespace dlock::cli::lua {

// Compare-and-pexpire, as the library's mutex_renew.lua, but telling a key of another type
// apart. Never re-creates a missing key.
const char* const extend = R"lua(
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return 0 end
if kind ~= 'string' then return {-1, kind} end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
)lua";

// Compare-and-delete, then the release marker and the notification, as the library's
// mutex_release.lua (pcall on PUBLISH: a user without channel rights still releases). ARGV[4] is
// the publishing command: SPUBLISH on a Cluster, where waiters SSUBSCRIBE on the lock's shard
// (a plain PUBLISH there is broadcast to classic subscribers only, and wakes no dlock waiter).
const char* const release = R"lua(
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then return {-1, kind} end
if kind == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  redis.pcall(ARGV[4], ARGV[2], 'released')
  return 1
end
if redis.pcall('GET', KEYS[2]) == ARGV[1] then return 2 end
return 0
)lua";

}  // namespace dlock::cli::lua
