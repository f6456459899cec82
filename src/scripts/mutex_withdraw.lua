#!lua flags=allow-oom
-- A Client's last waiter for a Mutex gave up (timeout, cancellation, shutdown): give its place
-- on the waiters' roll back. When the lock is free, a release may have named this Client after
-- it stopped listening, so the turn passes to the next waiter (as in mutex_release.lua).
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the waiters' roll       P{N}:waiters
-- ARGV[1]  waiter id (the Client's id)
-- ARGV[2]  the lock's channel      P{N}:ch
-- Reply:   1  the lock was free and another waiter was named; 0 otherwise
if type(redis.pcall('ZREM', KEYS[2], ARGV[1])) ~= 'number' then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.pcall('TIME')
local now = type(t) == 'table' and t[2] and tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) or 0
local place = redis.call('ZPOPMIN', KEYS[2])
while place[2] do
  if tonumber(place[2]) > now then
    local heard
    if place[1] == '*' then  -- the place of waiters on P{N}:ch (mutex_release.lua)
      heard = redis.pcall('PUBLISH', ARGV[2], 'released')
    else
      heard = redis.pcall('PUBLISH', ARGV[2] .. ':' .. place[1], 'released ' .. place[1])
    end
    if type(heard) ~= 'number' then return 0 end
    if heard > 0 then return 1 end
  end
  place = redis.call('ZPOPMIN', KEYS[2])
end
return 0
