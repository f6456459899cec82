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
-- The hold's token lives in the hash under the field ':fence'; owner identities never start
-- with ':' (ReentrantMutex rejects such explicit owners), so no owner can collide with it.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  local token = 0
  if KEYS[2] then
    -- Seeded from the server's clock when missing, as for Mutex: tokens keep rising after data
    -- loss. Mutex and ReentrantMutex share the counter, so tokens rise across both kinds.
    if redis.call('EXISTS', KEYS[2]) == 0 then
      local now = redis.call('TIME')
      redis.call('SET', KEYS[2], now[1] .. string.format('%06d', tonumber(now[2])))
    end
    redis.call('INCR', KEYS[2])
    local text = redis.call('GET', KEYS[2])  -- the exact decimal text, for the hash field
    redis.call('HSET', KEYS[1], ARGV[1], 1, ':fence', text)
    token = tonumber(text)
  else
    redis.call('HSET', KEYS[1], ARGV[1], 1)
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, token, 1}
end
if kind ~= 'hash' then return {-1, kind} end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local count = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  local token = 0
  if KEYS[2] then token = tonumber(redis.call('HGET', KEYS[1], ':fence')) or 0 end
  return {1, token, count}
end
return {0, redis.call('PTTL', KEYS[1])}
