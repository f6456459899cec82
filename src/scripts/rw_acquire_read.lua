-- Take a SharedMutex for reading (shared).
-- KEYS[1]  P{N}          hash: kind = 'SharedMutex'; writer = owner token while write-held
-- KEYS[2]  P{N}:readers  zset: reader owner token -> expiry (server ms, from TIME)
-- KEYS[3]  P{N}:wintent  zset: waiting writers' intents -> expiry (server ms)
-- KEYS[4]  P{N}:fence    the fencing counter (no TTL, never deleted)
-- ARGV[1]  owner token
-- ARGV[2]  lease TTL in milliseconds
-- Reply:   {1, token}  acquired; token is the current writer epoch (the counter's value)
--          {0, pttl}   write-held, or a writer waits (writers go first); pttl: when the
--                      writer's hold or the last intent ends unless renewed
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
if kind == 'none' then redis.call('DEL', KEYS[2]) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)

if redis.call('HEXISTS', KEYS[1], 'writer') == 1 then return {0, redis.call('PTTL', KEYS[1])} end
local intent = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if #intent > 0 then return {0, tonumber(intent[2]) - now} end

if redis.call('EXISTS', KEYS[4]) == 0 then
  redis.call('SET', KEYS[4], t[1] .. string.format('%06d', tonumber(t[2])))
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
redis.call('HSET', KEYS[1], 'kind', 'SharedMutex')
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return {1, tonumber(redis.call('GET', KEYS[4]))}
