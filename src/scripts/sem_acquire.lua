-- Take k permits of a Semaphore at once, if that keeps the number of live permits <= the limit.
-- KEYS[1]  P{N}           hash: kind = 'Semaphore', while any permit is held; it claims the name,
--                          so a lock of another kind under it is refused. Its TTL is the longest
--                          live permit's. Any other value: another kind's lock has the name.
-- KEYS[2]  P{N}:permits   zset: permit id -> expiry (server ms, from TIME)
-- KEYS[3]  P{N}:limit     string: the number of permits N (no TTL)
-- KEYS[4]  P{N}:fence     counter of acquisitions (no TTL, never deleted)
-- ARGV[1]  owner token; the permit ids are "<owner>#1" .. "<owner>#k"
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  k, the number of permits (>= 1)
-- ARGV[4]  the limit to store when none is stored yet
-- Reply:   {1, token, free[, ttl]}  acquired; token numbers this acquisition (unique,
--                      increasing); free: permits still free after this take (the caller's next
--                      local waiter tries at once when it is > 0, instead of waiting for a
--                      release); ttl, when free is 0 and others hold permits: when the first
--                      permit expires unless renewed (bounds that waiter's sleep)
--          {0, pttl}   not enough free permits; pttl: when enough would expire unless renewed
--                      (-1: never, k exceeds the limit)
--          {-1, type, key}  a key holds a value of another type or kind (also a limit or a
--                      counter that is no count)

--@include next_token.lua

--
-- Types are checked only where a key of another type shows up: the first command on each key is
-- a pcall whose WRONGTYPE error is answered with the key's TYPE. That keeps the error and saves
-- two TYPE calls on every acquire (issue #6: Redis calls per EVALSHA cost throughput). P{N} has
-- no command of its own to fail, so it keeps its TYPE.
local base = redis.call('TYPE', KEYS[1])['ok']
if base ~= 'none' and (base ~= 'hash' or redis.call('HGET', KEYS[1], 'kind') ~= 'Semaphore') then
  return {-1, base .. ' (a lock of another kind has this name)', KEYS[1]}
end

local function wrong_type(key) return {-1, redis.call('TYPE', key)['ok'], key} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Permits of holders that died (or lost their lease) are reclaimed here.
if type(redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)) == 'table' then return wrong_type(KEYS[2]) end
local stored = redis.pcall('GET', KEYS[3])
if type(stored) == 'table' and stored.err then return wrong_type(KEYS[3]) end
local limit
if stored then
  -- A limit is a count as set_permits() stores it. Anything else someone wrote there is refused,
  -- not overwritten: '1e5', '2.5' or 'abc' are not this library's, and may be someone's mistake
  -- that set_permits() can repair once seen. (Only a missing limit takes the caller's.)
  if not string.match(stored, '^%d+$') then
    return {-1, 'string (not a limit)', KEYS[3]}
  end
  limit = tonumber(stored)
else
  limit = tonumber(ARGV[4])
  redis.call('SET', KEYS[3], ARGV[4])
end
local k = tonumber(ARGV[3])
local held = redis.call('ZCARD', KEYS[2])
if held + k <= limit then
  -- Counted before any permit is written, so a failure here takes none.
  local token, bad = next_token(KEYS[4])
  if not token then return {-1, bad, KEYS[4]} end
  local ttl = tonumber(ARGV[2])
  -- In calls of at most 1000 permits: unpack() of a few thousand values overflows Lua's C stack
  -- ("too many results to unpack"), and k is only bounded by the limit.
  for from = 1, k, 1000 do
    local entries = {}
    for i = from, math.min(k, from + 999) do
      entries[#entries + 1] = now + ttl
      entries[#entries + 1] = ARGV[1] .. '#' .. i
    end
    redis.call('ZADD', KEYS[2], unpack(entries))
  end
  -- The zset lives as long as its longest permit, so its expiry (a keyspace event waiters watch)
  -- marks the last permit gone. held == 0: ZADD just created it, without a TTL (GT would treat
  -- that as infinite and set nothing).
  if held == 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  else
    redis.call('PEXPIRE', KEYS[2], ttl, 'GT')
  end
  -- The name's claim P{N} lives exactly as long as the longest live permit (the highest score),
  -- so it never outlasts them: not the zset's TTL, which a released long permit may have set.
  -- held == 0: these are the only live permits. The claim is missing while permits are held
  -- only where an older dlock, which did not write it, took them.
  if base == 'none' then redis.call('HSET', KEYS[1], 'kind', 'Semaphore') end
  if held == 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
  else
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', KEYS[1], string.format('%d', tonumber(last[2]) - now))
  end
  local free = math.max(0, limit - held - k)
  if free > 0 or held == 0 then return {1, token, free} end
  -- Full, with permits of other holders: the next local waiter sleeps until a release, and at
  -- the latest until the first of them expires (a crashed holder sends no release).
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {1, token, 0, math.max(0, tonumber(first[2]) - now)}
end
if k > limit then return {0, -1} end
-- The (held + k - limit)-th earliest expiry is when enough permits would free up by expiry.
local need = held + k - limit
local r = redis.call('ZRANGE', KEYS[2], need - 1, need - 1, 'WITHSCORES')
return {0, math.max(0, tonumber(r[2]) - now)}
