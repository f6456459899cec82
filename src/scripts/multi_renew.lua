#!lua flags=allow-oom
-- Renew or extend a MultiLock lease, only while this owner still holds every lock of the set.
-- KEYS     lock1, lock2, ...                (P{N}, names sorted)
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in milliseconds
-- ARGV[3..] the locks' channels, in KEYS order   (P{N}:ch)
-- Reply:   1  renewed (every lock)
--          0  some lock is no longer held by this owner: the hold of the set is lost (dlock
--             marks the lease lost on this reply, and never releases a lost lease). So the
--             locks of the set that are still ours are released here, at once, with a
--             "released" notification, rather than left to sit out their TTL.
-- Never re-creates a missing key: a renewal racing with unlock() cannot resurrect a lock.
local n = #KEYS
local mine = {}
local all = true
for i = 1, n do
  mine[i] = redis.pcall('GET', KEYS[i]) == ARGV[1]
  if not mine[i] then all = false end
end
if all then
  for i = 1, n do
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
  return 1
end
for i = 1, n do
  if mine[i] then
    redis.call('DEL', KEYS[i])
    if ARGV[2 + i] then redis.pcall('PUBLISH', ARGV[2 + i], 'released') end
  end
end
return 0
