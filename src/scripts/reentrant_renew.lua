#!lua flags=allow-oom
-- Renew a ReentrantMutex hold, once for the whole hold whatever its count.
-- KEYS[1]  the lock key            P{N} or N
-- ARGV[1]  owner identity (the hash field)
-- ARGV[2]  new TTL in milliseconds
-- ARGV[3]  the hold's fencing token; '' in Redisson mode
-- ARGV[4]  'take' when called through the Lease of one take (Lease::extend): refused, because
--          the TTL belongs to the whole hold, which the Client's one record for it renews
-- Reply:   1  renewed;  0  not held by this owner (the lease is lost)
-- Never re-creates a missing key: a renewal racing with the last release cannot resurrect it.
if ARGV[4] == 'take' then
  return redis.error_reply('ERR dlock: extend() is not supported on a ReentrantMutex lease; ' ..
                           'the hold is renewed as a whole')
end
-- pcall: a key of another type simply is not ours. One HMGET reads the count and the token.
local h = redis.pcall('HMGET', KEYS[1], ARGV[1], ':fence')
if h.err or not h[1] then return 0 end
if ARGV[3] ~= '' and h[2] ~= ARGV[3] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
