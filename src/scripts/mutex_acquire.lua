-- Take a Mutex: SET NX PX and the next fencing token, in one atomic step.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the fencing counter     P{N}:fence   (no TTL, never deleted)
-- ARGV[1]  owner token
-- ARGV[2]  lease TTL in milliseconds
-- Reply:   {1, token}  acquired; token is the new fencing token
--          {0, pttl}   held by another owner; pttl is its remaining TTL (-1: no expiry)
--          {-1, type}  the key holds a value of another type
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' then
  if kind ~= 'string' then return {-1, kind} end
  return {0, redis.call('PTTL', KEYS[1])}
end
-- A missing counter (restart without persistence, failover to a replica that lacked it) is
-- seeded from the server's clock in microseconds, so tokens keep rising after data loss.
-- Seeded before the lock is set, so a failure here (e.g. an ACL without TIME) leaves no lock.
if redis.call('EXISTS', KEYS[2]) == 0 then
  local now = redis.call('TIME')
  redis.call('SET', KEYS[2], now[1] .. string.format('%06d', tonumber(now[2])))
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, token}
