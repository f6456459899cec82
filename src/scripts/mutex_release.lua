-- Release a Mutex: compare-and-delete, then wake the next waiter.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the release marker      P{N}:rel
-- KEYS[3]  the waiters' roll       P{N}:waiters  (mutex_acquire.lua); optional
-- ARGV[1]  owner token
-- ARGV[2]  the lock's channel      P{N}:ch
-- ARGV[3]  how long the release marker lives, in milliseconds
-- The message is 'released <waiter id>' when a waiter's place counts: the first one leaves the
-- roll and only that Client tries (the others keep sleeping; one round trip per handoff instead
-- of one per waiting Client); plain 'released' (every waiter tries) when the roll is empty.
-- Reply:   1  released; nobody was subscribed to the channel
--          2 + n  (n >= 1) released; the notification reached n subscribers (waiting processes,
--             the releaser's own included): the releaser lets a waiter elsewhere go first
--          2  already released by this same owner (a retried release whose first reply was lost)
--          0  not held by this owner (expired, taken over, or never held)
-- pcall: a key of another type simply is not ours; a user whose ACL lacks channel rights
-- still releases (waiters then notice at their recheck).
-- The choice of the next waiter is repeated in mutex_withdraw.lua (scripts cannot share code).
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  local message = 'released'
  if KEYS[3] then
    -- The first place that still counts is used up; lapsed ones (waiters that stopped trying:
    -- gone, or crashed) go with it. One call when nobody waits (the key does not exist).
    local now
    local place = redis.pcall('ZPOPMIN', KEYS[3])
    while type(place) == 'table' and place[2] do
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      if tonumber(place[2]) > now then
        message = 'released ' .. place[1]
        break
      end
      place = redis.call('ZPOPMIN', KEYS[3])
    end
  end
  local n = redis.pcall('PUBLISH', ARGV[2], message)
  if type(n) == 'number' and n > 0 then return 2 + n end
  return 1
end
if redis.pcall('GET', KEYS[2]) == ARGV[1] then return 2 end
return 0
