#!lua flags=allow-oom
-- Withdraw a writer's intent when it stops waiting (timeout, cancel, error), so readers it
-- blocked need not wait for the intent to expire.
-- KEYS[1]  P{N}:wintent  zset: waiting writers' intents
-- ARGV[1]  the writer's owner token
-- ARGV[2]  the lock's channel  P{N}:ch
-- Reply:   1  withdrawn (readers are notified);  0  there was none
if redis.pcall('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.pcall('PUBLISH', ARGV[2], 'withdrawn')
  return 1
end
return 0
