-- Take a SharedMutex for writing (exclusive), or register this writer's intent while it waits.
-- KEYS[1]  P{N}          hash: kind = 'SharedMutex'; writer = the writer's owner token while
--                        write-held. Exists while any hold exists; its PTTL covers every hold.
-- KEYS[2]  P{N}:readers  zset: reader owner token -> expiry (server ms, from TIME)
-- KEYS[3]  P{N}:wintent  zset: waiting writer's owner token -> expiry of its intent (server ms)
-- KEYS[4]  P{N}:fence    the fencing counter (no TTL, never deleted)
-- ARGV[1]  owner token (the same for every try of one acquisition)
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  intent TTL in milliseconds; 0: register no intent (a try that will not wait)
-- Reply:   {1, token}  acquired; token is the new fencing token (the new writer epoch)
--          {0, pttl}   held (by a writer, or by live readers); pttl: when to try again at the
--                      latest (capped to a third of the intent TTL so the intent is refreshed)
--          {-1, type}  a key holds a value of another type or kind, or the fencing counter
--                      holds no counter (next_token); 'type at key' names a key other than P{N}
--
-- Types: one TYPE on the lock key (the free lock's path then needs no other check); the other
-- keys' types are checked only when a pcall on them fails (issue #6: Redis calls per EVALSHA
-- cost throughput; three TYPEs ran on every call before).

--@include next_token.lua

local function wrong_type(key) return {-1, redis.call('TYPE', key)['ok'] .. ' at ' .. key} end
local function failed(r) return type(r) == 'table' and r.err end

local kind = redis.call('TYPE', KEYS[1])['ok']
local writer = false
if kind ~= 'none' then
  if kind ~= 'hash' then return {-1, kind} end
  local h = redis.call('HMGET', KEYS[1], 'kind', 'writer')
  if h[1] ~= 'SharedMutex' then return {-1, 'hash of another kind'} end
  writer = h[2]
end
local t = nil
local now = nil
local function clock()
  if not now then
    t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
-- Without the lock key there is no hold: readers left in the zset belong to a lock that was
-- deleted (forced unlock, data loss) and are revoked. Otherwise expired readers go.
if failed(redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', kind == 'none' and '+inf' or clock())) then
  return wrong_type(KEYS[2])
end

local intent_ttl = tonumber(ARGV[3])
local function wait_with(hint)
  if intent_ttl > 0 then
    -- Expired intents (writers that died waiting) go; they would keep readers out.
    if failed(redis.pcall('ZREMRANGEBYSCORE', KEYS[3], '-inf', clock())) then return wrong_type(KEYS[3]) end
    redis.call('ZADD', KEYS[3], now + intent_ttl, ARGV[1])
    if redis.call('PTTL', KEYS[3]) < intent_ttl then redis.call('PEXPIRE', KEYS[3], intent_ttl) end
    local cap = math.max(1, math.floor(intent_ttl / 3))
    if hint < 0 or hint > cap then hint = cap end
  end
  return {0, hint}
end

if writer then return wait_with(redis.call('PTTL', KEYS[1])) end
if kind ~= 'none' then
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if #last > 0 then return wait_with(tonumber(last[2]) - now) end
end

-- This writer's own intent, if an earlier try left one; before any write, as the type check of
-- the intents' key.
if failed(redis.pcall('ZREM', KEYS[3], ARGV[1])) then return wrong_type(KEYS[3]) end
-- Counted before the hold is written, so a failure here leaves no lock.
local token, bad = next_token(KEYS[4])
if not token then return {-1, bad .. ' at ' .. KEYS[4]} end
redis.call('HSET', KEYS[1], 'kind', 'SharedMutex', 'writer', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token}
