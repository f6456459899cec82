#!lua flags=allow-oom
-- Release a MultiLock: compare-and-delete every lock of the set, then give each one's next turn.
-- KEYS     [queue,] lock1, rel1, roll1, lock2, rel2, roll2, ...   (P{N}, P{N}:rel and
--          P{N}:waiters, names sorted)
--          queue, present when #KEYS % 3 == 1: the name of the releasing Client's wait queue
--          for this set (<prefix>multi:{a}{b}..., in the first lock's slot). Never read or
--          written: the Client keys its hold-back after a release by the first key of the
--          release (ClientCore::note_release), which must name the queue its next try waits in.
-- ARGV[1]  owner token
-- ARGV[2]  how long each release marker lives, in milliseconds
-- ARGV[3]  the releasing Client's id (a roll place of its own needs no hold-back)
-- ARGV[4..3+n] the locks' channels, in KEYS order   (P{N}:ch), n locks
-- ARGV[4+n] the notification; optional, default 'released'. The ordered path (Cluster, keys
--          across slots) gives back the groups it took before a busy one with 'released <its
--          wait queue's key>': every other waiter wakes on it as on any message, and the
--          giving waiter, which listens on these channels too, knows it for its own and sleeps
--          on instead of trying again at once (acquire_op.cpp, WaitQueue::on_notification).
-- Each released lock's next turn is given as mutex_release.lua gives it: the first place on
-- the lock's waiters' roll that still counts is used up, and a Mutex waiter's Client alone is
-- told ('released <id>' on P{N}:ch:<id>); the place '*' (MultiLock waiters), or no place
-- left, is answered with the notification on P{N}:ch, which wakes every waiter of the lock.
-- Reply:   1  released (every lock was ours); no waiter of another Client was woken
--          2 + n  (n >= 1) released (every lock was ours), and the notifications reached up to
--             n subscribers on one channel (waiting processes, the releaser's own included; a
--             named waiter of another Client counts as 2, so that it outlasts the Client's
--             discount of its own subscription): the releasing Client lets a waiter elsewhere
--             go first
--          2  none was ours, but every release marker shows this owner (a retried release
--             whose first reply was lost)
--          0  otherwise: some lock was not held by this owner (expired, taken over). Those
--             that still were ours are released all the same.
-- pcall: a key of another type simply is not ours; a user whose ACL lacks channel rights (or
-- the roll's commands) still releases (waiters then notice at their recheck).
-- The choice of the next waiter repeats mutex_release.lua's (scripts cannot share code).
local at = #KEYS % 3  -- KEYS[at + 3i - 2] is lock i, KEYS[at + 3i - 1] its marker, KEYS[at + 3i] its roll
local n = (#KEYS - at) / 3
local message = ARGV[4 + n] or 'released'
local mine = {}
local count = 0
for i = 1, n do
  mine[i] = redis.pcall('GET', KEYS[at + 3 * i - 2]) == ARGV[1]
  if mine[i] then count = count + 1 end
end
if count == 0 then
  for i = 1, n do
    if redis.pcall('GET', KEYS[at + 3 * i - 1]) ~= ARGV[1] then return 0 end
  end
  return 2
end

local now
-- Gives the next turn of the lock whose roll is `roll`; returns how many subscribers count.
local function next_turn(roll, channel)
  local place = redis.pcall('ZPOPMIN', roll)
  while type(place) == 'table' and place[2] do
    if not now then
      local t = redis.pcall('TIME')
      now = type(t) == 'table' and t[2] and tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) or 0
    end
    if tonumber(place[2]) > now then
      local heard
      if place[1] == '*' then
        heard = redis.pcall('PUBLISH', channel, message)
      else
        heard = redis.pcall('PUBLISH', channel .. ':' .. place[1], 'released ' .. place[1])
      end
      if type(heard) ~= 'number' then break end  -- no channel rights: everyone rechecks
      if heard > 0 then
        if place[1] == '*' then return heard end
        if place[1] == ARGV[3] then return 0 end
        return 2
      end
    end
    place = redis.call('ZPOPMIN', roll)
  end
  local s = redis.pcall('PUBLISH', channel, message)
  if type(s) == 'number' then return s end
  return 0
end

local heard = 0
for i = 1, n do
  if mine[i] then
    redis.call('DEL', KEYS[at + 3 * i - 2])
    redis.call('SET', KEYS[at + 3 * i - 1], ARGV[1], 'PX', ARGV[2])
    local s = next_turn(KEYS[at + 3 * i], ARGV[3 + i])
    if s > heard then heard = s end
  end
end
if count ~= n then return 0 end
if heard > 0 then return 2 + heard end
return 1
