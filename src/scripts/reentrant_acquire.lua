-- Take a ReentrantMutex, or take it again: a hash of owner -> hold count, in one atomic step.
-- The same script serves the dlock layout and the Redisson-compatible one; only the keys differ.
-- KEYS[1]  the lock key            P{N} (dlock layout) or N (Redisson layout)
-- KEYS[2]  the fencing counter     P{N}:fence (no TTL, never deleted); absent in Redisson mode,
--                                  which has no fencing token (a Java holder could not show one)
-- ARGV[1]  owner identity (the hash field)
-- ARGV[2]  lease TTL in milliseconds
-- Reply:   {1, token, count}  acquired; count 1: a new hold with a new token; more: a re-take,
--                             which returns the hold's (outer) token and leaves its TTL alone
--                             (the hold's one renewal keeps the whole hold alive)
--          {0, pttl}          held by another owner; pttl is its remaining TTL (-1: no expiry)
--          {-1, type}         the key holds a value of another type (e.g. a dlock Mutex)
--          {-1, what, key}    the fencing counter at key holds no counter (next_token); no lock
-- The hold's token lives in the hash under the field ':fence'; owner identities never start
-- with ':' (ReentrantMutex rejects such explicit owners), so no owner can collide with it.
--
-- PTTL answers for a key of any type: -2 is a free lock, the common case, which then needs no
-- type check at all. The type is asked only when the HMGET on an existing key fails (issue #6:
-- Redis calls per EVALSHA cost throughput; a TYPE on every call was one of six).

--@include next_token.lua

local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 then
  local token = 0
  if KEYS[2] then
    -- Mutex and ReentrantMutex share the counter, so tokens rise across both kinds. Counted
    -- before the hold is written, so a failure here leaves no lock.
    local bad
    token, bad = next_token(KEYS[2])
    if not token then return {-1, bad, KEYS[2]} end
    -- %d, not tostring: the hash field must hold the exact decimal text (tostring would write
    -- 1.7e+15); tokens stay below 2^53, exact in Lua's numbers.
    redis.call('HSET', KEYS[1], ARGV[1], 1, ':fence', string.format('%d', token))
  else
    redis.call('HSET', KEYS[1], ARGV[1], 1)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, token, 1}
end
-- A SharedMutex's or a Semaphore's hash has a field 'kind' naming its kind. No owner identity is
-- 'kind': each one holds a ':' (reentrant_mutex.hpp), in Redisson's layout too.
local h = redis.pcall('HMGET', KEYS[1], ARGV[1], ':fence', 'kind')
if h.err then return {-1, redis.call('TYPE', KEYS[1])['ok']} end
if h[3] then return {-1, 'hash of a ' .. h[3]} end
if h[1] then
  local count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  local token = 0
  if KEYS[2] then token = tonumber(h[2]) or 0 end
  return {1, token, count}
end
return {0, pttl}
