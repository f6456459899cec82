#!lua flags=allow-oom
-- Force-unlock whatever lock lives under one name (dlock/admin.hpp: force_unlock): remove every
-- hold, announce the revocation, and wake waiters -- for a FairLock, the head of its queue.
-- KEYS[1] P{N}  KEYS[2] P{N}:queue  KEYS[3] P{N}:readers  KEYS[4] P{N}:permits
-- ARGV[1] the lock's channel P{N}:ch ("revoked": what holders listen for; wakes its waiters)
-- ARGV[2] prefix of a FairLock waiter's channel, P{N}:ch:
-- Reply: {kind, {owner, mode, count} ..., woken fair head | false}
--        a WRONGTYPE error for a key that is not a dlock lock (nothing is changed)
-- The kind rules are admin_inspect.lua's. Release markers (:rel, :released) are not set: an
-- old holder's own release must report that the lock was no longer its own. Queue places and
-- writer intents stay: they belong to live waiters.
local function ty(k) return redis.call('TYPE', k)['ok'] end
local base = ty(KEYS[1])
local kind = 'none'
local removed = {}
if base == 'string' then
  kind = (ty(KEYS[2]) == 'list') and 'fair' or 'mutex'
  removed[1] = {redis.call('GET', KEYS[1]), 'exclusive', 1}
  redis.call('DEL', KEYS[1])
elseif base == 'hash' then
  local k = redis.call('HGET', KEYS[1], 'kind')
  if k == 'SharedMutex' then
    kind = 'rw'
    local w = redis.call('HGET', KEYS[1], 'writer')
    if w then removed[#removed + 1] = {w, 'write', 1} end
  elseif k == 'Semaphore' then
    kind = 'semaphore'  -- its claim; the permits are taken below
  elseif redis.call('HEXISTS', KEYS[1], ':fence') == 1 then
    kind = 'reentrant'
    local f = redis.call('HGETALL', KEYS[1])
    for i = 1, #f, 2 do
      if f[i] ~= ':fence' then
        if not tonumber(f[i + 1]) then return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash but no dlock lock') end
        removed[#removed + 1] = {f[i], 'exclusive', tonumber(f[i + 1])}
      end
    end
  else
    return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a hash but no dlock lock')
  end
  redis.call('DEL', KEYS[1])
elseif base ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. base .. ', not a dlock lock')
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function take_live(k, f)
  if ty(k) ~= 'zset' then return end
  local e = redis.call('ZRANGEBYSCORE', k, '(' .. now, '+inf')
  for i = 1, #e do f(e[i]) end
  redis.call('DEL', k)
end
if kind == 'rw' or (kind == 'none' and ty(KEYS[3]) == 'zset') then
  -- Readers of a SharedMutex (stale ones may outlive a deleted P{N}: they are dropped as well).
  take_live(KEYS[3], function(id)
    kind = 'rw'
    removed[#removed + 1] = {id, 'read', 1}
  end)
end
if (kind == 'none' or kind == 'semaphore') and ty(KEYS[4]) == 'zset' then
  kind = 'semaphore'
  local index = {}
  take_live(KEYS[4], function(id)
    local owner = string.match(id, '^(.*)#%d+$') or id
    if index[owner] then
      index[owner][3] = index[owner][3] + 1
    else
      index[owner] = {owner, 'permits', 1}
      removed[#removed + 1] = index[owner]
    end
  end)
end

local woken = false
if #removed > 0 then
  -- pcall: a user without channel rights still removes the lock (waiters notice at their recheck).
  redis.pcall('PUBLISH', ARGV[1], 'revoked')
  if ty(KEYS[2]) == 'list' then
    local head = redis.call('LINDEX', KEYS[2], 0)
    if head then
      -- Its channel and payload: fair_acquire.lua's channel_of, 'released <id>'.
      redis.pcall('PUBLISH', ARGV[2] .. (string.match(head, '^%x+@(.+):%d+$') or head), 'released ' .. head)
      woken = head
    end
  end
end
return {kind, removed, woken}
