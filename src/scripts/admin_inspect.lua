-- Inspect whatever lock lives under one name (dlock/admin.hpp: inspect). Writes nothing.
-- KEYS[1] P{N}  KEYS[2] P{N}:fence  KEYS[3] P{N}:queue  KEYS[4] P{N}:timeouts
-- KEYS[5] P{N}:readers  KEYS[6] P{N}:wintent  KEYS[7] P{N}:permits  KEYS[8] P{N}:limit
-- KEYS[9] P{N}:waiters (a Mutex's roll of waiting Clients; optional)
-- Reply: {kind, type of P{N}, pttl of the main key, fence counter (its text; {its type} when the
--         key is no string) | false, semaphore limit | false,
--         value of a string P{N} | false, holders, waiters}
--   holders: {owner, mode, ttl ms (-1: no expiry), count, hold token | false} ...
--   waiters: {id, role, ttl ms} ...   (fair places in queue order, then writer intents, then
--            a Mutex's live places on its roll, next first: role 'roll', id a Client id or '*')
-- The kind rules are the ones documented in dlock/admin.hpp; admin_force_unlock.lua applies the
-- same ones (a script cannot include another).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function ty(k) return redis.call('TYPE', k)['ok'] end

local base = ty(KEYS[1])
local kind = 'none'
if base == 'string' then
  kind = (ty(KEYS[3]) == 'list') and 'fair' or 'mutex'
elseif base == 'hash' then
  local k = redis.call('HGET', KEYS[1], 'kind')
  if k == 'SharedMutex' then
    kind = 'rw'
  elseif k == 'Semaphore' then
    kind = 'semaphore'
  elseif redis.call('HEXISTS', KEYS[1], ':fence') == 1 then
    kind = 'reentrant'
    local f = redis.call('HGETALL', KEYS[1])
    for i = 1, #f, 2 do
      if f[i] ~= ':fence' and not tonumber(f[i + 1]) then kind = 'foreign' end
    end
  else
    kind = 'foreign'
  end
elseif base ~= 'none' then
  kind = 'foreign'
elseif ty(KEYS[7]) == 'zset' or ty(KEYS[8]) == 'string' then
  kind = 'semaphore'
elseif ty(KEYS[3]) == 'list' then
  kind = 'fair'
elseif ty(KEYS[5]) == 'zset' or ty(KEYS[6]) == 'zset' then
  kind = 'rw'
end

local pttl = redis.call('PTTL', KEYS[1])
local fence = false
local fence_type = ty(KEYS[2])
if fence_type == 'string' then fence = redis.call('GET', KEYS[2]) elseif fence_type ~= 'none' then fence = {fence_type} end
local limit = false
local value = false
local holders, waiters = {}, {}
local function live(k, f)
  if ty(k) ~= 'zset' then return end
  local e = redis.call('ZRANGEBYSCORE', k, '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #e, 2 do f(e[i], tonumber(e[i + 1]) - now) end
end

if kind == 'mutex' or kind == 'fair' then
  if base == 'string' then
    value = redis.call('GET', KEYS[1])
    holders[#holders + 1] = {value, 'exclusive', pttl, 1, false}
  end
  if kind == 'mutex' and KEYS[9] then
    live(KEYS[9], function(id, ttl) waiters[#waiters + 1] = {id, 'roll', ttl} end)
  end
elseif kind == 'reentrant' then
  local f = redis.call('HGETALL', KEYS[1])
  local token = redis.call('HGET', KEYS[1], ':fence')
  for i = 1, #f, 2 do
    if f[i] ~= ':fence' then holders[#holders + 1] = {f[i], 'exclusive', pttl, tonumber(f[i + 1]), token} end
  end
elseif kind == 'rw' then
  if base == 'hash' then
    local w = redis.call('HGET', KEYS[1], 'writer')
    if w then holders[#holders + 1] = {w, 'write', pttl, 1, false} end
  end
  live(KEYS[5], function(id, ttl) holders[#holders + 1] = {id, 'read', ttl, 1, false} end)
  live(KEYS[6], function(id, ttl) waiters[#waiters + 1] = {id, 'writer_intent', ttl} end)
elseif kind == 'semaphore' then
  pttl = redis.call('PTTL', KEYS[7])
  if ty(KEYS[8]) == 'string' then limit = redis.call('GET', KEYS[8]) end
  -- Permit ids are "<owner token>#<i>": one holder per acquisition, with its permit count.
  local index = {}
  live(KEYS[7], function(id, ttl)
    local owner = string.match(id, '^(.*)#%d+$') or id
    local h = index[owner]
    if h then
      h[4] = h[4] + 1
      if ttl < h[3] then h[3] = ttl end
    else
      h = {owner, 'permits', ttl, 1, false}
      index[owner] = h
      holders[#holders + 1] = h
    end
  end)
end
if ty(KEYS[3]) == 'list' then
  local q = redis.call('LRANGE', KEYS[3], 0, -1)
  local has_timeouts = ty(KEYS[4]) == 'zset'
  for i = 1, #q do
    local deadline = has_timeouts and redis.call('ZSCORE', KEYS[4], q[i])
    local ttl = deadline and (tonumber(deadline) - now) or 0
    waiters[#waiters + 1] = {q[i], 'fair_queue', ttl}
  end
end
return {kind, base, pttl, fence, limit, value, holders, waiters}
