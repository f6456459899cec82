#!lua flags=allow-oom
-- Release a Redlock hold on ONE node: compare-and-delete, then notify waiters. As
-- mutex_release, except that a node where the key is already gone gets a tombstone, so a
-- renewal that crosses this release on the wire cannot set the key there again.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the release marker      P{N}:rel
-- ARGV[1]  owner token
-- ARGV[2]  the lock's channel      P{N}:ch
-- ARGV[3]  how long the release marker lives, in milliseconds
-- Reply:   1  released
--          2  already released by this same owner (a retried release whose first reply was lost)
--          0  not held by this owner here (expired, taken over, never taken, restarted empty)
local cur = redis.pcall('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  -- The token names this release: a waiter subscribed on every node counts the copies once.
  redis.pcall('PUBLISH', ARGV[2], 'released ' .. ARGV[1])
  return 1
end
local marker = redis.pcall('GET', KEYS[2])
if marker == ARGV[1] then return 2 end
-- "-owner": released while not held here. Not a release by this owner (a retry still gets 0),
-- but enough for redlock_renew.lua not to resurrect the key, and for redlock_acquire.lua not
-- to take it should this owner's acquire still come (it was overtaken by this cleanup). It
-- replaces only another tombstone: another owner's release marker stays, or that owner's
-- retried release would answer 0, not 2.
if cur == false and (marker == false or (type(marker) == 'string' and string.sub(marker, 1, 1) == '-')) then
  redis.call('SET', KEYS[2], '-' .. ARGV[1], 'PX', ARGV[3])
end
return 0
