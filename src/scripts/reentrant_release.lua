-- Release one take of a ReentrantMutex (decrement), or the owner's whole hold.
-- KEYS[1]  the lock key            P{N} or N
-- KEYS[2]  this take's release latch: P{N}:rel:<take id> (Redisson mode:
--          redisson_unlock_latch:{N}:<take id>). Absent: drop the owner's whole hold at once,
--          whatever its count (the Client is shutting down).
-- ARGV[1]  owner identity (the hash field)
-- ARGV[2]  the lock's channel      P{N}:ch, or redisson_lock__channel:{N}
-- ARGV[3]  the release message     'released', or Redisson's unlock message '0'
-- ARGV[4]  the hold's fencing token; '' in Redisson mode (no token to compare)
-- ARGV[5]  how long the latch lives, in milliseconds (with KEYS[2])
-- Reply:   1  released (the count went down; at 0 the key is deleted and waiters are notified)
--          2  this take was already released (a retried release whose first reply was lost):
--             without the latch the retry would decrement a second time and free the lock
--             under the owner's outer hold
--          0  not held by this owner (expired, taken over, or a later hold with another token)
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
-- pcall: a key of another type simply is not ours.
local count = tonumber(redis.pcall('HGET', KEYS[1], ARGV[1]))
if not count then return 0 end
if ARGV[4] ~= '' and redis.call('HGET', KEYS[1], ':fence') ~= ARGV[4] then return 0 end
if KEYS[2] then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[5])
  if count > 1 then
    redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
    return 1
  end
end
-- Exclusive: no other owner can have a field, so the last release deletes the whole hash.
redis.call('DEL', KEYS[1])
-- pcall: a user whose ACL lacks channel rights still releases (waiters notice at their recheck).
-- On Cluster this is SPUBLISH (see src/cluster/sharded_scripts.hpp).
redis.pcall('PUBLISH', ARGV[2], ARGV[3])
-- Redisson mode (no fencing token) on Cluster: Java clients listen with a classic SUBSCRIBE
-- too, so publish both ways. Double quotes keep this one a PUBLISH in the Cluster form.
local cluster = false
if cluster and ARGV[4] == '' then redis.pcall("PUBLISH", ARGV[2], ARGV[3]) end
return 1
