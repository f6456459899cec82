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

-- The next fencing token from the counter at `key`, or nil and why the key holds no counter.
-- A counter counts on from 0 to 2^53 - 2: every token is then at least 1 and exact in Lua's
-- numbers (the last, 2^53 - 1, leaves a counter that gives no more). A missing (or zero)
-- counter, after a restart without persistence or a failover to a replica that lacked it, is
-- seeded from the server's clock in microseconds, so tokens keep rising after data loss; INCR
-- answers 1 only then (a seeded counter is far above), which saves an EXISTS. A negative or
-- larger one was written by hand (INCR would answer no token, or one Lua rounds, so that two
-- holders could get the same): put back, and refused. The same function is in every script
-- that counts a token (scripts cannot share code).
local function next_token(key)
  local token = redis.pcall('INCR', key)
  if type(token) == 'table' then
    if string.find(token.err, 'WRONGTYPE', 1, true) then return nil, redis.call('TYPE', key)['ok'] end
    -- Not about the value (an ACL that denies INCR, OOM under maxmemory): the server's own error.
    if not (string.find(token.err, 'not an integer', 1, true) or string.find(token.err, 'overflow', 1, true)) then
      error(token)
    end
    return nil, 'string (not a counter)'
  end
  if token == 1 then
    -- An ACL without TIME: the counter goes back to missing before the error, so that the next
    -- try seeds it too instead of counting on from the 1 this INCR wrote.
    local t = redis.pcall('TIME')
    if t.err then
      redis.call('DEL', key)
      error(t)
    end
    redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])))
    token = redis.call('INCR', key)
  end
  if token < 1 or token > 9007199254740991 then
    -- pcall: an ACL narrower than the README's (which allows DECR) still gets the refusal.
    redis.pcall('DECR', key)
    return nil, 'string (not a counter)'
  end
  return token
end

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
