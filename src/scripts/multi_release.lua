-- Release a MultiLock: compare-and-delete every lock of the set, then notify each one's waiters.
-- KEYS     lock1, rel1, lock2, rel2, ...   (P{N} and P{N}:rel, names sorted)
-- ARGV[1]  owner token
-- ARGV[2]  how long each release marker lives, in milliseconds
-- ARGV[3..] the locks' channels, in KEYS order   (P{N}:ch)
-- Reply:   1  released (every lock was ours)
--          2  none was ours, but every release marker shows this owner (a retried release
--             whose first reply was lost)
--          0  otherwise: some lock was not held by this owner (expired, taken over). Those
--             that still were ours are released all the same.
-- pcall: a key of another type simply is not ours; a user whose ACL lacks channel rights
-- still releases (waiters then notice at their recheck).
local n = #KEYS / 2
local mine = {}
local count = 0
for i = 1, n do
  mine[i] = redis.pcall('GET', KEYS[2 * i - 1]) == ARGV[1]
  if mine[i] then count = count + 1 end
end
if count == 0 then
  for i = 1, n do
    if redis.pcall('GET', KEYS[2 * i]) ~= ARGV[1] then return 0 end
  end
  return 2
end
for i = 1, n do
  if mine[i] then
    redis.call('DEL', KEYS[2 * i - 1])
    redis.call('SET', KEYS[2 * i], ARGV[1], 'PX', ARGV[2])
    redis.pcall('PUBLISH', ARGV[2 + i], 'released')
  end
end
if count == n then return 1 end
return 0
