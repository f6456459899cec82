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
--
-- Types: one TYPE on the lock key (the free lock's path then needs no other check); the other
-- keys' types are checked only when a pcall on them fails (issue #6: Redis calls per EVALSHA
-- cost throughput; three TYPEs ran on every call before).
--@include counter_of.lua
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Without the lock key there is no hold: readers left in the zset belong to a lock that was
-- deleted (forced unlock, data loss) and are revoked. Otherwise expired readers go.
if failed(redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', kind == 'none' and '+inf' or now)) then
  return wrong_type(KEYS[2])
end
-- The latest intent: a live one keeps this reader out. It tells whether any is live.
local intent = redis.pcall('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if failed(intent) then return wrong_type(KEYS[3]) end

if writer then return {0, redis.call('PTTL', KEYS[1])} end
if #intent > 0 then
  if tonumber(intent[2]) > now then return {0, tonumber(intent[2]) - now} end
  -- Every intent has ended (writers that died waiting): the set goes now. Its key TTL ends with
  -- the latest intent, but Redis expires a key only once its time is past, so within that
  -- millisecond the set would outlive the intents this reader has just passed.
  redis.call('DEL', KEYS[3])
end

-- The reader carries the current writer epoch: the counter's value, seeded from the server's
-- clock in microseconds when missing (as for Mutex) so tokens keep rising after data loss.
-- Read before any write: a counter that is no number would otherwise leave this reader's hold
-- in place behind a reply without a token, which the client cannot use nor release. A counter
-- is one include/counter_of.lua takes: what the writers' INCR reads, up to the last token a
-- writer can be given. tonumber() alone passed '1e5', '0x10' or 'inf', which INCR then
-- refuses: readers held tokens that writers could not follow.
local epoch = redis.pcall('GET', KEYS[4])
if failed(epoch) then return wrong_type(KEYS[4]) end
-- A zero counter is seeded too, as the writers' INCR does (it answers 1 only then): a reader
-- of epoch 0 would hold no token (zero is none, fencing.hpp).
if not epoch or epoch == '0' then
  epoch = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('SET', KEYS[4], epoch)
elseif not counter_of(epoch) then
  return {-1, 'string (not a counter) at ' .. KEYS[4]}
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('HSET', KEYS[1], 'kind', 'SharedMutex')
if kind == 'none' then
  -- Both keys were just created (the zset emptied above), without a TTL.
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  -- Each lives at least as long as its longest hold: GT only ever lengthens. The zset may have
  -- just been created by ZADD (its last readers had expired): no TTL yet, which GT would treat
  -- as infinite, hence the PTTL.
  if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
  redis.call('PEXPIRE', KEYS[1], ttl, 'GT')
end
return {1, tonumber(epoch)}
