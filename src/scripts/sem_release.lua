#!lua flags=allow-oom
-- Release the permits of one Semaphore acquisition, then notify waiters.
-- KEYS[1]  P{N}:permits   zset: permit id -> expiry (server ms)
-- KEYS[2]  P{N}:released  zset: owner token -> when it released (server ms), for idempotence;
--          the newest 10,000 within ARGV[3] (src/locks/release_memory.hpp)
-- KEYS[3]  P{N}           hash: kind = 'Semaphore', the name's claim (sem_acquire.lua): its TTL
--          becomes the longest live permit's, and it is deleted with the last one (optional)
-- ARGV[1]  owner token
-- ARGV[2]  the semaphore's channel  P{N}:ch
-- ARGV[3]  how long a release is remembered, in milliseconds
-- ARGV[4]  k, the number of permits of this acquisition
-- Reply:   1  released; no subscriber heard the notification
--          2 + n  (n >= 1) released, and the notification reached n subscribers (waiting
--             processes, the releaser's own included): the releasing Client lets a waiter
--             elsewhere go first (ClientCore::note_release, keyed by KEYS[1], the key of the
--             Client's wait queue for this semaphore)
--          2  already released by this same owner (a retried release whose first reply was lost)
--          0  not held by this owner (expired and reclaimed, deleted, or never held)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep = tonumber(ARGV[3])
local k = tonumber(ARGV[4])
local live = true
local found = false
for i = 1, k do
  local s = redis.pcall('ZSCORE', KEYS[1], ARGV[1] .. '#' .. i)
  if type(s) == 'string' then
    found = true
    if tonumber(s) <= now then live = false end
    redis.call('ZREM', KEYS[1], ARGV[1] .. '#' .. i)
  else
    live = false
  end
end
-- The claim follows the longest live permit: with the last one gone (released, or expired and
-- not yet reclaimed), the name is free for any kind at once. Only a Semaphore's claim.
if found and KEYS[3] and redis.pcall('HGET', KEYS[3], 'kind') == 'Semaphore' then
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] and tonumber(last[2]) > now then
    redis.call('PEXPIRE', KEYS[3], string.format('%d', tonumber(last[2]) - now))
  else
    redis.call('DEL', KEYS[3])
  end
end
if found and live then
  redis.pcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - keep)
  redis.pcall('ZADD', KEYS[2], now, ARGV[1])
  -- Bounded whatever the release rate: memory, and the time Redis takes to free it.
  if redis.pcall('ZCARD', KEYS[2]) > 10000 then redis.pcall('ZREMRANGEBYRANK', KEYS[2], 0, -10001) end
  redis.pcall('PEXPIRE', KEYS[2], keep)
  local n = redis.pcall('PUBLISH', ARGV[2], 'released')
  if type(n) == 'number' and n > 0 then return 2 + n end
  return 1
end
if found then
  -- Some were left by a hold that had already expired: room was freed all the same.
  redis.pcall('PUBLISH', ARGV[2], 'released')
  return 0
end
if type(redis.pcall('ZSCORE', KEYS[2], ARGV[1])) == 'string' then return 2 end
return 0
