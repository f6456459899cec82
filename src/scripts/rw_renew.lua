#!lua flags=allow-oom
-- Renew or extend a SharedMutex hold (writer or reader), only while this owner still holds it.
-- KEYS[1]  P{N}          hash: kind, writer
-- KEYS[2]  P{N}:readers  zset: reader owner token -> expiry (server ms)
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in milliseconds
-- Reply:   1  renewed;  0  not held by this owner (the lease is lost)
-- Never re-creates a missing hold. The lock key outlives every live reader (its PTTL is kept at
-- least as long as each reader's), so a reader whose lock key is gone was revoked.
local ttl = tonumber(ARGV[2])
if redis.pcall('HGET', KEYS[1], 'writer') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 1
end
local score = redis.pcall('ZSCORE', KEYS[2], ARGV[1])
if type(score) ~= 'string' then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(score) <= now or redis.pcall('HGET', KEYS[1], 'kind') ~= 'SharedMutex' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
