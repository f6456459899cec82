-- Release a MultiLock: compare-and-delete every lock of the set, then notify each one's waiters.
-- KEYS     [queue,] lock1, rel1, lock2, rel2, ...   (P{N} and P{N}:rel, names sorted)
--          queue, present when #KEYS is odd: the name of the releasing Client's wait queue for
--          this set (<prefix>multi:{a}{b}..., in the first lock's slot). Never read or written:
--          the Client keys its hold-back after a release by the first key of the release
--          (ClientCore::note_release), which must name the queue its next try waits in.
-- ARGV[1]  owner token
-- ARGV[2]  how long each release marker lives, in milliseconds
-- ARGV[3..2+n] the locks' channels, in KEYS order   (P{N}:ch), n locks
-- ARGV[3+n] the notification; optional, default 'released'. The ordered path (Cluster, keys
--          across slots) gives back the groups it took before a busy one with 'released <its
--          wait queue's key>': every other waiter wakes on it as on any message, and the
--          giving waiter, which listens on these channels too, knows it for its own and sleeps
--          on instead of trying again at once (acquire_op.cpp, WaitQueue::on_notification).
-- Reply:   1  released (every lock was ours); no subscriber heard a notification
--          2 + n  (n >= 1) released (every lock was ours), and the notifications reached up to
--             n subscribers on one channel (waiting processes, the releaser's own included):
--             the releasing Client lets a waiter elsewhere go first
--          2  none was ours, but every release marker shows this owner (a retried release
--             whose first reply was lost)
--          0  otherwise: some lock was not held by this owner (expired, taken over). Those
--             that still were ours are released all the same.
-- pcall: a key of another type simply is not ours; a user whose ACL lacks channel rights
-- still releases (waiters then notice at their recheck).
local at = #KEYS % 2  -- KEYS[at + 2i - 1] is lock i, KEYS[at + 2i] its release marker
local n = (#KEYS - at) / 2
local message = ARGV[3 + n] or 'released'
local mine = {}
local count = 0
for i = 1, n do
  mine[i] = redis.pcall('GET', KEYS[at + 2 * i - 1]) == ARGV[1]
  if mine[i] then count = count + 1 end
end
if count == 0 then
  for i = 1, n do
    if redis.pcall('GET', KEYS[at + 2 * i]) ~= ARGV[1] then return 0 end
  end
  return 2
end
local heard = 0
for i = 1, n do
  if mine[i] then
    redis.call('DEL', KEYS[at + 2 * i - 1])
    redis.call('SET', KEYS[at + 2 * i], ARGV[1], 'PX', ARGV[2])
    local s = redis.pcall('PUBLISH', ARGV[2 + i], message)
    if type(s) == 'number' and s > heard then heard = s end
  end
end
if count ~= n then return 0 end
if heard > 0 then return 2 + heard end
return 1
