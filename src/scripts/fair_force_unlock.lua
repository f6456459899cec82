#!lua flags=allow-oom
-- Force-unlock a FairLock (for `dlock unlock --force`): remove whoever holds it, announce the
-- revocation to the holder, and wake the head of the queue only.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the queue               P{N}:queue
-- ARGV[1]  the lock's channel      P{N}:ch     ("revoked": what a holder listens for)
-- ARGV[2]  prefix of the waiters' channels  P{N}:ch:
-- Reply:   {1, holder}  removed; holder is the owner token it held
--          {0, false}   it was not held
--          {-1, type}   the key holds a value of another type
-- The release marker is not set: the old holder's own release must report that the lock was no
-- longer its own.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return {0, false} end
if kind ~= 'string' then return {-1, kind} end
local holder = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', ARGV[1], 'revoked')
if redis.call('TYPE', KEYS[2])['ok'] == 'list' then
  local head = redis.call('LINDEX', KEYS[2], 0)
  -- The head's channel: fair_acquire.lua's channel_of.
  if head then
    redis.pcall('PUBLISH', ARGV[2] .. (string.match(head, '^%x+@(.+):%d+$') or head), 'released ' .. head)
  end
end
return {1, holder}
