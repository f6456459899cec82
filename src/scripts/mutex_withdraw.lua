-- A Client's last waiter for a Mutex gave up (timeout, cancellation, shutdown): give its place
-- on the waiters' roll back. When the lock is free, a release may have named this Client after
-- it stopped listening, so the turn passes to the next waiter (mutex_release.lua).
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the waiters' roll       P{N}:waiters
-- ARGV[1]  waiter id (the Client's id)
-- ARGV[2]  the lock's channel      P{N}:ch
-- Reply:   1  the lock was free and another waiter was named; 0 otherwise
if type(redis.pcall('ZREM', KEYS[2], ARGV[1])) ~= 'number' then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now))
local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if not first then return 0 end
redis.call('ZREM', KEYS[2], first)
redis.pcall('PUBLISH', ARGV[2], 'released ' .. first)
return 1
