-- Release a Mutex: compare-and-delete, then notify waiters.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the release marker      P{N}:rel
-- ARGV[1]  owner token
-- ARGV[2]  the lock's channel      P{N}:ch
-- ARGV[3]  how long the release marker lives, in milliseconds
-- Reply:   1  released; nobody was subscribed to the channel
--          2 + n  (n >= 1) released; the notification reached n subscribers (waiting processes,
--             the releaser's own included): the releaser lets a waiter elsewhere go first
--          2  already released by this same owner (a retried release whose first reply was lost)
--          0  not held by this owner (expired, taken over, or never held)
-- pcall: a key of another type simply is not ours; a user whose ACL lacks channel rights
-- still releases (waiters then notice at their recheck).
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  local n = redis.pcall('PUBLISH', ARGV[2], 'released')
  if type(n) == 'number' and n > 0 then return 2 + n end
  return 1
end
if redis.pcall('GET', KEYS[2]) == ARGV[1] then return 2 end
return 0
