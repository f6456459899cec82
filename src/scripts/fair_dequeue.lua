-- A FairLock waiter gives up (timed out, cancelled, or unsure whether its last try took the
-- lock): leave the queue, and drop the lock too if that try did take it. When this frees the
-- lock or the head's place, the next waiter is woken.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the queue               P{N}:queue
-- KEYS[3]  the waiters' deadlines  P{N}:timeouts
-- ARGV[1]  the waiter id (its owner token)
-- ARGV[2]  prefix of the waiters' channels  P{N}:ch:
-- Reply:   {removed, released}  removed: 1 when it was queued; released: 1 when it held the lock
local me = ARGV[1]
local queued = redis.call('TYPE', KEYS[2])['ok'] == 'list'
local was_head = queued and redis.call('LINDEX', KEYS[2], 0) == me
local removed = 0
if queued then removed = redis.call('LREM', KEYS[2], 0, me) end
if redis.call('TYPE', KEYS[3])['ok'] == 'zset' then redis.call('ZREM', KEYS[3], me) end
local released = 0
if redis.pcall('GET', KEYS[1]) == me then
  redis.call('DEL', KEYS[1])
  released = 1
end
if (was_head or released == 1) and queued and redis.call('EXISTS', KEYS[1]) == 0 then
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head then redis.pcall('PUBLISH', ARGV[2] .. head, 'released') end
end
return {math.min(removed, 1), released}
