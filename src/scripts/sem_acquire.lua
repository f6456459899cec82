-- Take k permits of a Semaphore at once, if that keeps the number of live permits <= the limit.
-- KEYS[1]  P{N}           must not exist: a Semaphore never writes it (another kind's lock does)
-- KEYS[2]  P{N}:permits   zset: permit id -> expiry (server ms, from TIME)
-- KEYS[3]  P{N}:limit     string: the number of permits N (no TTL)
-- KEYS[4]  P{N}:fence     counter of acquisitions (no TTL, never deleted)
-- ARGV[1]  owner token; the permit ids are "<owner>#1" .. "<owner>#k"
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  k, the number of permits (>= 1)
-- ARGV[4]  the limit to store when none is stored yet
-- Reply:   {1, token}  acquired; token numbers this acquisition (unique, increasing)
--          {0, pttl}   not enough free permits; pttl: when enough would expire unless renewed
--                      (-1: never, k exceeds the limit)
--          {-1, type}  a key holds a value of another type or kind
local base = redis.call('TYPE', KEYS[1])['ok']
if base ~= 'none' then return {-1, base .. ' (a lock of another kind has this name)'} end
local pt = redis.call('TYPE', KEYS[2])['ok']
if pt ~= 'none' and pt ~= 'zset' then return {-1, pt .. ' at ' .. KEYS[2]} end
local lt = redis.call('TYPE', KEYS[3])['ok']
if lt ~= 'none' and lt ~= 'string' then return {-1, lt .. ' at ' .. KEYS[3]} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Permits of holders that died (or lost their lease) are reclaimed here.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local limit = tonumber(redis.call('GET', KEYS[3]))
if not limit then
  limit = tonumber(ARGV[4])
  redis.call('SET', KEYS[3], ARGV[4])
end
local k = tonumber(ARGV[3])
local held = redis.call('ZCARD', KEYS[2])
if held + k <= limit then
  if redis.call('EXISTS', KEYS[4]) == 0 then
    redis.call('SET', KEYS[4], t[1] .. string.format('%06d', tonumber(t[2])))
  end
  local token = redis.call('INCR', KEYS[4])
  local ttl = tonumber(ARGV[2])
  for i = 1, k do redis.call('ZADD', KEYS[2], now + ttl, ARGV[1] .. '#' .. i) end
  if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
  return {1, token}
end
if k > limit then return {0, -1} end
-- The (held + k - limit)-th earliest expiry is when enough permits would free up by expiry.
local need = held + k - limit
local r = redis.call('ZRANGE', KEYS[2], need - 1, need - 1, 'WITHSCORES')
return {0, math.max(0, tonumber(r[2]) - now)}
