#!lua flags=allow-oom
-- Turn a SharedMutex write hold into a read hold of the same owner, without a moment unheld.
-- KEYS[1]  P{N}          hash: kind, writer
-- KEYS[2]  P{N}:readers  zset: reader owner token -> expiry (server ms)
-- ARGV[1]  owner token
-- ARGV[2]  TTL of the read hold in milliseconds (at least the write hold's remaining TTL is kept)
-- ARGV[3]  the lock's channel  P{N}:ch
-- Reply:   1  downgraded (waiting readers are notified)
--          2  already a read hold of this owner (a retried downgrade, or a reader's lease)
--          0  not held by this owner
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.pcall('HGET', KEYS[1], 'writer') == ARGV[1] then
  local ttl = math.max(tonumber(ARGV[2]), redis.call('PTTL', KEYS[1]))
  redis.call('HDEL', KEYS[1], 'writer')
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
  if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
  redis.pcall('PUBLISH', ARGV[3], 'downgraded')
  return 1
end
local score = redis.pcall('ZSCORE', KEYS[2], ARGV[1])
if type(score) == 'string' and tonumber(score) > now and redis.pcall('HGET', KEYS[1], 'kind') == 'SharedMutex' then
  return 2
end
return 0
