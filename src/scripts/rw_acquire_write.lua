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
--          {-1, type}  a key holds a value of another type or kind
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' then
  if kind ~= 'hash' then return {-1, kind} end
  if redis.call('HGET', KEYS[1], 'kind') ~= 'SharedMutex' then return {-1, 'hash of another kind'} end
end
for i = 2, 3 do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' and t ~= 'zset' then return {-1, t .. ' at ' .. KEYS[i]} end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Without the lock key there is no hold: readers left in the zset belong to a lock that was
-- deleted (forced unlock, data loss) and are revoked.
if kind == 'none' then redis.call('DEL', KEYS[2]) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)

local intent_ttl = tonumber(ARGV[3])
local function wait_with(hint)
  if intent_ttl > 0 then
    redis.call('ZADD', KEYS[3], now + intent_ttl, ARGV[1])
    if redis.call('PTTL', KEYS[3]) < intent_ttl then redis.call('PEXPIRE', KEYS[3], intent_ttl) end
    local cap = math.max(1, math.floor(intent_ttl / 3))
    if hint < 0 or hint > cap then hint = cap end
  end
  return {0, hint}
end

if redis.call('HEXISTS', KEYS[1], 'writer') == 1 then
  return wait_with(redis.call('PTTL', KEYS[1]))
end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if #last > 0 then return wait_with(tonumber(last[2]) - now) end

-- A missing counter is seeded from the server's clock in microseconds (as for Mutex), so tokens
-- keep rising after data loss.
if redis.call('EXISTS', KEYS[4]) == 0 then
  redis.call('SET', KEYS[4], t[1] .. string.format('%06d', tonumber(t[2])))
end
local token = redis.call('INCR', KEYS[4])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[1], 'kind', 'SharedMutex', 'writer', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token}
