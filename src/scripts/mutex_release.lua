#!lua flags=allow-oom
-- Release a Mutex: compare-and-delete, then wake the next waiter.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the release marker      P{N}:rel
-- KEYS[3]  the waiters' roll       P{N}:waiters  (mutex_acquire.lua); optional
-- ARGV[1]  owner token
-- ARGV[2]  the lock's channel      P{N}:ch
-- ARGV[3]  how long the release marker lives, in milliseconds
-- ARGV[4]  the releasing Client's id; optional
-- The first place on the roll that still counts is used up and its Client alone is told,
-- 'released <id>' on its own channel P{N}:ch:<id>; only that Client tries, the other waiting
-- processes are not even woken. A Client that no longer listens there (gone, crashed) is passed
-- over at once. When no place is left, 'released' on P{N}:ch wakes every waiter.
-- The place '*' (waiters that take no place of their own: a MultiLock) is answered with
-- 'released' on P{N}:ch, as when no place is left.
-- Reply:   1  released; no waiter of another Client was woken (nobody waited, or the next
--             place was the releaser's own)
--          3  released; a waiter of another Client was named (or the '*' place woke every
--             waiting process): the releaser lets it go first (for '*', even when the only
--             listener was the releasing Client itself: a hold-back of at most 2 ms, once)
--          2 + n  (n >= 1) released without a roll (no KEYS[3]); 'released' reached n
--             subscribers (waiting processes, the releaser's own included)
--          2  already released by this same owner (a retried release whose first reply was lost)
--          0  not held by this owner (expired, taken over, or never held)
-- pcall: a key of another type simply is not ours; a user whose ACL lacks channel rights
-- still releases (waiters then notice at their recheck).
-- The choice of the next waiter is repeated in mutex_withdraw.lua (scripts cannot share code).
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  if KEYS[3] then
    -- Lapsed places (waiters that stopped trying) go as they come up. One call when nobody
    -- waits (the key does not exist).
    local now
    local place = redis.pcall('ZPOPMIN', KEYS[3])
    while type(place) == 'table' and place[2] do
      if not now then
        -- An ACL that refuses TIME: every place counts (a lapsed one is passed over anyway
        -- when nobody listens on its channel).
        local t = redis.pcall('TIME')
        now = type(t) == 'table' and t[2] and tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) or 0
      end
      if tonumber(place[2]) > now then
        -- '*' is the place of waiters that listen on P{N}:ch only (a MultiLock, multi_acquire.lua):
        -- their turn wakes every waiting process.
        local heard
        if place[1] == '*' then
          heard = redis.pcall('PUBLISH', ARGV[2], 'released')
        else
          heard = redis.pcall('PUBLISH', ARGV[2] .. ':' .. place[1], 'released ' .. place[1])
        end
        if type(heard) ~= 'number' then break end  -- no channel rights: everyone rechecks
        if heard > 0 then
          if place[1] == ARGV[4] then return 1 end
          return 3
        end
      end
      place = redis.call('ZPOPMIN', KEYS[3])
    end
    redis.pcall('PUBLISH', ARGV[2], 'released')
    return 1
  end
  local n = redis.pcall('PUBLISH', ARGV[2], 'released')
  if type(n) == 'number' and n > 0 then return 2 + n end
  return 1
end
if redis.pcall('GET', KEYS[2]) == ARGV[1] then return 2 end
return 0
