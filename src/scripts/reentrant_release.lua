#!lua flags=allow-oom
-- Release one take of a ReentrantMutex (decrement), or the owner's whole hold.
-- KEYS[1]  the lock key            P{N} or N
-- KEYS[2]  this take's release latch: P{N}:rel:<take id> (Redisson mode:
--          redisson_unlock_latch:{N}:<take id>, or redisson_unlock_latch:N:<take id> when N has
--          a '{'). Absent: drop the owner's whole hold at once,
--          whatever its count (the Client is shutting down).
-- ARGV[1]  owner identity (the hash field)
-- ARGV[2]  the lock's channel      P{N}:ch, or redisson_lock__channel:{N} (:N when N has a '{')
-- ARGV[3]  the release message     'released', or Redisson's unlock message '0'
-- ARGV[4]  the hold's fencing token; '' in Redisson mode (no token to compare)
-- ARGV[5]  how long the latch lives, in milliseconds (with KEYS[2])
-- Reply:   1  released (the count went down; at 0 the key is deleted and waiters are notified,
--             but no subscriber heard it)
--          2 + n  (n >= 1) released: the count reached 0 and the notification reached n
--             subscribers (waiting processes, the releaser's own included): the releasing
--             Client lets a waiter elsewhere go first (ClientCore::note_release)
--          2  this take was already released (a retried release whose first reply was lost):
--             without the latch the retry would decrement a second time and free the lock
--             under the owner's outer hold
--          0  not held by this owner (expired, taken over, or a later hold with another token)
-- Only dlock reads these replies; Redisson clients see the keys and the channel message alone.
--
-- The latch is set with NX first: one call both detects a retry and records this release (an
-- EXISTS and a SET before). A release that finds the hold is not ours takes its latch back, so
-- a retry of it still answers 0.
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'PX', ARGV[5], 'NX') then return 2 end
-- pcall: a key of another type simply is not ours. One HMGET reads the count and the token.
local h = redis.pcall('HMGET', KEYS[1], ARGV[1], ':fence')
local count = type(h) == 'table' and not h.err and tonumber(h[1])
if not count or (ARGV[4] ~= '' and h[2] ~= ARGV[4]) then
  if KEYS[2] then redis.call('DEL', KEYS[2]) end
  return 0
end
if KEYS[2] and count > 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  return 1
end
-- Exclusive: no other owner can have a field, so the last release deletes the whole hash.
redis.call('DEL', KEYS[1])
-- pcall: a user whose ACL lacks channel rights still releases (waiters notice at their recheck).
-- On Cluster this is SPUBLISH (see src/cluster/sharded_scripts.hpp).
local n = redis.pcall('PUBLISH', ARGV[2], ARGV[3])
-- Redisson mode (no fencing token) on Cluster: Java clients listen with a classic SUBSCRIBE
-- too, so publish both ways. Double quotes keep this one a PUBLISH in the Cluster form.
local cluster = false
if cluster and ARGV[4] == '' then redis.pcall("PUBLISH", ARGV[2], ARGV[3]) end
if type(n) == 'number' and n > 0 then return 2 + n end
return 1
