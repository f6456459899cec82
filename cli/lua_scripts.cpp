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

// For a wait that ran out while its last try was unanswered (lock_wait.cpp): that try, still
// queued on the same connection, reaches the server first and may take a free lock, which the
// library then gives back. Its owner token is this process's, so it is not counted.
const char* const held_by_others = R"lua(
-- This process's tokens carry ARGV[1] ("@host:pid") followed by ':' (owner tokens, permits
-- "<owner>#i") or at their end (ReentrantMutex holders, "<client>:<thread>@host:pid").
local function foreign(token)
  local i, j = string.find(token, ARGV[1], 1, true)
  while i do
    local next = string.sub(token, j + 1, j + 1)
    if next == '' or next == ':' then return false end
    i, j = string.find(token, ARGV[1], j + 1, true)
  end
  return true
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then
  if foreign(redis.call('GET', KEYS[1])) then return 1 end
elseif kind == 'hash' then
  local pairs_ = redis.call('HGETALL', KEYS[1])
  for i = 1, #pairs_, 2 do
    local field, value = pairs_[i], pairs_[i + 1]
    if field == 'writer' then
      if foreign(value) then return 1 end
    elseif field ~= 'kind' and string.sub(field, 1, 1) ~= ':' and foreign(field) then
      return 1
    end
  end
elseif kind ~= 'none' then
  return 1
end
-- Readers, intents and permits are scored by when they expire (server ms): one that expired (a
-- crashed holder's, not yet reclaimed) holds nothing. Without TIME (an ACL) every one counts.
local clock = redis.pcall('TIME')
local now = type(clock) == 'table' and clock[2] and tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) or 0
for k = 2, 4 do
  local t = redis.call('TYPE', KEYS[k])['ok']
  if t == 'zset' then
    for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[k], '(' .. now, '+inf')) do
      if foreign(member) then return 1 end
    end
  elseif t ~= 'none' then
    return 1
  end
end
return 0
)lua";

// After a cancelled Redlock wait (lock_wait.cpp, settle_cancelled_redlock): does this master
// still hold a key that the cancelled try took?
const char* const held_by_this_process = R"lua(
if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then return 0 end
if string.find(redis.call('GET', KEYS[1]), ARGV[1], 1, true) then return 1 end
return 0
)lua";

}  // namespace dlock::cli::lua
