#!lua flags=allow-oom
-- Release a SharedMutex hold (writer or reader), then notify waiters.
-- KEYS[1]  P{N}           hash: kind, writer
-- KEYS[2]  P{N}:readers   zset: reader owner token -> expiry (server ms)
-- KEYS[3]  P{N}:released  zset: owner token -> when it released (server ms), for idempotence;
--          the newest 10,000 within ARGV[3] (src/locks/release_memory.hpp)
-- KEYS[4]  P{N}:wintent   zset: waiting writers' intents
-- ARGV[1]  owner token
-- ARGV[2]  the lock's channel  P{N}:ch
-- ARGV[3]  how long a release is remembered, in milliseconds
-- Reply:   1  released (no subscriber heard a notification, or none was due)
--          2 + n  (n >= 1) released, and the notification reached n subscribers (waiting
--             processes, the releaser's own included): the releasing Client lets a waiter
--             elsewhere go first (ClientCore::note_release)
--          2  already released by this same owner (a retried release whose first reply was lost)
--          0  not held by this owner (expired, revoked, or never held)
-- A writer's release always publishes; a reader's only when it was the last live reader
-- (only writers wait for readers to leave). A release that withdrew an intent and published
-- nothing else says 'withdrawn', as rw_withdraw.lua does: readers the intent kept out are waiting.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep = tonumber(ARGV[3])
-- An acquisition whose reply was lost may have left an intent: withdraw it.
local withdrew = redis.pcall('ZREM', KEYS[4], ARGV[1]) == 1
local function quiet(reply)
  if withdrew then redis.pcall('PUBLISH', ARGV[2], 'withdrawn') end
  return reply
end
local function remember()
  redis.pcall('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - keep)
  redis.pcall('ZADD', KEYS[3], now, ARGV[1])
  -- Bounded whatever the release rate: memory, and the time Redis takes to free it.
  if redis.pcall('ZCARD', KEYS[3]) > 10000 then redis.pcall('ZREMRANGEBYRANK', KEYS[3], 0, -10001) end
  redis.pcall('PEXPIRE', KEYS[3], keep)
end

-- The reply for a release that published: how many subscribers the notification reached.
local function notified(n)
  if type(n) == 'number' and n > 0 then return 2 + n end
  return 1
end

if redis.pcall('HGET', KEYS[1], 'writer') == ARGV[1] then
  -- Live readers (a downgrade's) keep the lock key. ZCOUNT, not a cleanup and a ZCARD: expired
  -- readers left here are removed by the next acquire, which looks at the zset anyway.
  if redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') == 0 then
    redis.call('DEL', KEYS[1])
  else
    redis.call('HDEL', KEYS[1], 'writer')
  end
  remember()
  return notified(redis.pcall('PUBLISH', ARGV[2], 'released'))
end

local score = redis.pcall('ZSCORE', KEYS[2], ARGV[1])
if type(score) == 'string' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  -- One HMGET: is the lock key still a SharedMutex's, and does a writer hold it (a downgrade)?
  local h = redis.pcall('HMGET', KEYS[1], 'kind', 'writer')
  if tonumber(score) <= now or h.err or h[1] ~= 'SharedMutex' then return quiet(0) end
  remember()
  if redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') == 0 then
    if not h[2] then redis.call('DEL', KEYS[1]) end
    return notified(redis.pcall('PUBLISH', ARGV[2], 'released'))
  end
  return quiet(1)
end
if type(redis.pcall('ZSCORE', KEYS[3], ARGV[1])) == 'string' then return quiet(2) end
return quiet(0)
